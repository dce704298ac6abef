// Package sources reads the report of an Ingestion that names it in its
// spec (configMapRef, secretRef or url) instead of uploading it, and stores
// it through the same intake as an upload. It holds the URL fetcher with its
// address guard, and the background reads that keep the network out of a
// reconcile. What a read's outcome means for the Ingestion is the
// controller's to decide: this package only reads, and says whether a
// failure is worth waiting out.
package sources

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/billing"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/uploads"
)

// CodeTooLarge is the ingestion-level error of a declared source past its limit.
const CodeTooLarge = "file_too_large"

// Options bound how the manager reads an Ingestion's configMapRef,
// secretRef or url source.
type Options struct {
	// MaxBytes is the upload limit; no declared report may be larger, and a
	// URL's maxBytes is capped to it. Zero means MaxURLMaxBytes.
	MaxBytes int64
	// URLTimeout bounds one fetch, body included. Default 60 s.
	URLTimeout time.Duration
	// AllowLoopback lets url sources reach loopback addresses (127.0.0.0/8,
	// ::1): for tests and a single-machine setup, never a shared cluster.
	AllowLoopback bool
	// Wait is how long after its creation an Ingestion may wait for its
	// ConfigMap or Secret to appear, or for its URL to answer, before it
	// fails. GitOps tools may create the report's object after the
	// Ingestion. Default 2 minutes.
	Wait time.Duration
	// URLFetchesPerTenant bounds the url sources of one tenant read at once
	// (DefaultURLFetchesPerTenant when zero). URLs are read in the
	// background, never in a reconcile.
	URLFetchesPerTenant int
}

// Limit is the largest declared report.
func (o Options) Limit() int64 {
	if o.MaxBytes > 0 {
		return o.MaxBytes
	}
	return posturev1.MaxURLMaxBytes
}

// Timeout bounds one URL fetch.
func (o Options) Timeout() time.Duration {
	if o.URLTimeout > 0 {
		return o.URLTimeout
	}
	return time.Minute
}

// MaxWait is how long after its creation an Ingestion waits for its source.
func (o Options) MaxWait() time.Duration {
	if o.Wait > 0 {
		return o.Wait
	}
	return 2 * time.Minute
}

// Error is why a declared report could not be stored. Transient ones are
// worth retrying until Options.Wait has passed; the others fail the
// ingestion at once, since only a new Ingestion can fix them. Code is the
// ingestion-level error code the failure is recorded under.
type Error struct {
	Code      string
	Message   string
	Transient bool
}

func (e *Error) Error() string { return e.Message }

func permanent(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func transient(format string, args ...any) *Error {
	return &Error{Code: ingest.CodeUnreadable, Message: fmt.Sprintf(format, args...), Transient: true}
}

// Declared reports whether the Ingestion's report comes from a source the
// manager reads itself, rather than an upload.
func Declared(ing *posturev1.Ingestion) bool {
	s := ing.Spec.Source
	return s.Upload == nil && (s.ConfigMapRef != nil || s.SecretRef != nil || s.URL != nil)
}

// Describe names the source for messages and events. A URL is shown
// without its query or fragment, which may carry a signed token.
func Describe(ing *posturev1.Ingestion) string {
	s := ing.Spec.Source
	switch {
	case s.ConfigMapRef != nil:
		return fmt.Sprintf("ConfigMap %s key %s", s.ConfigMapRef.Name, s.ConfigMapRef.Key)
	case s.SecretRef != nil:
		return fmt.Sprintf("Secret %s key %s", s.SecretRef.Name, s.SecretRef.Key)
	case s.URL != nil:
		return "URL " + redactURL(s.URL.URL)
	}
	return "an unknown source"
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// Reader reads declared sources into the store.
type Reader struct {
	// Client reads ConfigMaps and Secrets of tenant namespaces, uncached:
	// the manager may only get them there.
	Client  client.Reader
	Store   store.Blobs
	Options Options
	// AccessBinding is the RoleBinding through which the manager reads a
	// tenant namespace, which messages name when a read is refused.
	AccessBinding string
}

// Read stores ing's declared report under tenant through the intake an
// upload takes, and returns the blob and its record count. A failure the
// Ingestion's author must hear about is an *Error.
func (r *Reader) Read(ctx context.Context, ing *posturev1.Ingestion, tenant string) (store.Blob, int, error) {
	s := ing.Spec.Source
	limit := r.Options.Limit()
	var body io.Reader
	switch {
	case s.ConfigMapRef != nil:
		data, err := r.readConfigMap(ctx, ing.Namespace, s.ConfigMapRef)
		if err != nil {
			return store.Blob{}, 0, err
		}
		body = bytes.NewReader(data)
	case s.SecretRef != nil:
		data, err := r.readSecretKey(ctx, ing.Namespace, s.SecretRef, "spec.source.secretRef")
		if err != nil {
			return store.Blob{}, 0, err
		}
		body = bytes.NewReader(data)
	case s.URL != nil:
		if s.URL.MaxBytes != nil {
			limit = min(limit, *s.URL.MaxBytes)
		} else {
			limit = min(limit, posturev1.DefaultURLMaxBytes)
		}
		resp, cancel, err := r.getURL(ctx, ing.Namespace, s.URL, limit)
		if err != nil {
			return store.Blob{}, 0, err
		}
		defer cancel()
		defer resp.Body.Close()
		body = resp.Body
	default:
		return store.Blob{}, 0, permanent(ingest.CodeUnreadable, "spec.source names no report")
	}
	blob, records, err := uploads.StoreReport(ctx, r.Store, tenant, body, limit)
	var tl *uploads.TooLargeError
	var fe *ocsf.FileError
	var tma *billing.TooManyAccountsError
	switch {
	case errors.As(err, &tl):
		return store.Blob{}, 0, permanent(CodeTooLarge, "%s is larger than the limit of %d bytes", Describe(ing), limit)
	case errors.As(err, &fe):
		why := fe.Error()
		if s.ConfigMapRef == nil {
			// view reads the Ingestion's status, events and errors, and
			// the ConfigMap beside it, but not a Secret, nor what a URL
			// answered the manager: their problems are told by position
			// and kind, never by the bytes found there.
			why = fe.WithoutContent()
		}
		return store.Blob{}, 0, permanent(ingest.CodeMalformed, "%s is not a valid OCSF report: %s", Describe(ing), why)
	case errors.As(err, &tma):
		return store.Blob{}, 0, permanent(ingest.CodeProviderLimit, "%s names too many accounts: %s", Describe(ing), tma.Error())
	case err != nil && ctx.Err() == nil && s.URL != nil:
		// The connection broke off or timed out mid-body.
		return store.Blob{}, 0, transient("reading %s: %v", Describe(ing), err)
	}
	return blob, records, err
}

// readConfigMap reads the report from a ConfigMap.
func (r *Reader) readConfigMap(ctx context.Context, ns string, ref *posturev1.ReportKeyRef) ([]byte, error) {
	var cm corev1.ConfigMap
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, transient("spec.source.configMapRef: ConfigMap %s/%s does not exist", ns, ref.Name)
	case apierrors.IsForbidden(err):
		return nil, r.noAccess("ConfigMap", ns, ref.Name, "spec.source.configMapRef")
	case err != nil:
		return nil, fmt.Errorf("read ConfigMap %s/%s: %w", ns, ref.Name, err)
	}
	if v, ok := cm.Data[ref.Key]; ok {
		return []byte(v), nil
	}
	if v, ok := cm.BinaryData[ref.Key]; ok {
		return v, nil
	}
	return nil, transient("spec.source.configMapRef: ConfigMap %s/%s has no key %s", ns, ref.Name, ref.Key)
}

// noAccess is a read of a declared source the manager was refused. It reads
// only through the RoleBinding the tenant controller creates in a Tenant's
// namespace, and a namespace reaches here only once a Tenant uses it; an
// Ingestion applied together with its Tenant can get here before that
// RoleBinding exists or is in force. So it is waited for, as a ConfigMap not
// created yet is, and fails the ingestion once the wait is over.
func (r *Reader) noAccess(kind, ns, name, field string) *Error {
	return transient("%s: the manager may not read %s %s/%s (yet): it reads only in a Tenant's namespace, "+
		"through RoleBinding %s, which the Tenant grants", field, kind, ns, name, r.AccessBinding)
}

func (r *Reader) readSecretKey(ctx context.Context, ns string, ref *posturev1.ReportKeyRef, field string) ([]byte, error) {
	var sec corev1.Secret
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, &sec)
	switch {
	case apierrors.IsNotFound(err):
		return nil, transient("%s: Secret %s/%s does not exist", field, ns, ref.Name)
	case apierrors.IsForbidden(err):
		return nil, r.noAccess("Secret", ns, ref.Name, field)
	case err != nil:
		return nil, fmt.Errorf("read Secret %s/%s: %w", ns, ref.Name, err)
	}
	v, ok := sec.Data[ref.Key]
	if !ok {
		return nil, transient("%s: Secret %s/%s has no key %s", field, ns, ref.Name, ref.Key)
	}
	return v, nil
}
