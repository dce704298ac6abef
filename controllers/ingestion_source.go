package controllers

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/billing"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/termsafe"
	"github.com/posture-dev/posture/internal/uploads"
)

// Event reason of a report fetched for a declared source.
const ReasonFetched = "Fetched"

// CodeReportChanged is the job-level error of a declared source whose
// content differs from the digest recorded at its first fetch.
const CodeReportChanged = "report_changed"

// CodeTooLarge is the job-level error of a declared source past its limit.
const CodeTooLarge = "file_too_large"

// SourceOptions bound how the manager reads an Ingestion's configMapRef,
// secretRef or url source.
type SourceOptions struct {
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

func (o SourceOptions) maxBytes() int64 {
	if o.MaxBytes > 0 {
		return o.MaxBytes
	}
	return posturev1.MaxURLMaxBytes
}

func (o SourceOptions) urlTimeout() time.Duration {
	if o.URLTimeout > 0 {
		return o.URLTimeout
	}
	return time.Minute
}

func (o SourceOptions) wait() time.Duration {
	if o.Wait > 0 {
		return o.Wait
	}
	return 2 * time.Minute
}

// sourceError is why a declared report could not be stored. transient ones
// are retried until SourceOptions.Wait has passed; the others fail the
// ingestion at once, since only a new Ingestion can fix them.
type sourceError struct {
	code      string
	msg       string
	transient bool
}

func (e *sourceError) Error() string { return e.msg }

func permanent(code, format string, args ...any) *sourceError {
	return &sourceError{code: code, msg: fmt.Sprintf(format, args...)}
}

func transient(format string, args ...any) *sourceError {
	return &sourceError{code: ingest.CodeUnreadable, msg: fmt.Sprintf(format, args...), transient: true}
}

// declared reports whether the Ingestion's report comes from a source the
// manager reads itself, rather than an upload.
func declared(ing *posturev1.Ingestion) bool {
	s := ing.Spec.Source
	return s.Upload == nil && (s.ConfigMapRef != nil || s.SecretRef != nil || s.URL != nil)
}

// needsFetch is whether the declared report must be read (again) before a
// run: never read, or its stored copy is gone before any run used it.
func (r *IngestionReconciler) needsFetch(ctx context.Context, ing *posturev1.Ingestion) (bool, error) {
	if !declared(ing) {
		return false, nil
	}
	rep := ing.Status.Report
	if rep == nil || rep.BlobID == "" {
		return true, nil
	}
	// A look at the blob's row, not its content: the worker is the only
	// reader of a stored report.
	_, _, err := r.Store.BlobAccounts(ctx, TenantOf(ing), rep.BlobID)
	if errors.Is(err, store.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up the stored report %s: %w", rep.BlobID, err)
	}
	return false, nil
}

// fetch reads a declared source once and stores it as a blob through the
// same checks as an upload, then records the blob and its digest in status.
// done is false when the reconcile ends here (waiting, or failed).
//
// A digest already in status means the report was read before and its copy
// has been lost before a run: the content read now must be the same, or
// the ingestion fails rather than importing a different report under the
// same object.
func (r *IngestionReconciler) fetch(ctx context.Context, p *ingestionPass, ing *posturev1.Ingestion) (res ctrl.Result, done bool, err error) {
	// The label patch answers with the stored object, whose status lacks
	// what this reconcile has decided so far; keep that, and patch the
	// status against the version the label patch produced.
	decided := ing.Status.DeepCopy()
	err = r.labelTenant(ctx, ing)
	ing.Status = *decided
	if err == nil {
		p.orig.ResourceVersion, p.orig.Labels = ing.ResourceVersion, ing.Labels
	}
	var blob store.Blob
	var records int
	tenant := TenantOf(ing)
	if err == nil && ing.Spec.Source.URL != nil && r.fetches != nil {
		var again time.Duration
		blob, records, again, err = r.fetchURL(ing, tenant)
		if again > 0 {
			// The status as decided so far (pending, on a first pass)
			// is written; the fetch's end wakes the next reconcile, and
			// the requeue stands in should that wake-up be lost.
			res, err := r.writeThen(ctx, p, ing, again)
			return res, false, err
		}
	} else if err == nil {
		blob, records, err = r.storeDeclared(ctx, ing, tenant)
	}
	var se *sourceError
	if errors.As(err, &se) {
		if se.transient {
			if deadline := ing.CreationTimestamp.Add(r.Sources.wait()); r.now().Time.Before(deadline) {
				return r.waitForSource(ctx, p, ing, se.msg, deadline)
			}
			se.msg += fmt.Sprintf(" (gave up %s after the Ingestion was created)", r.Sources.wait())
		}
		res, err := r.finish(ctx, p, ing, r.job(ing, int(ing.Status.Attempt)+1), store.Outcome{Status: store.RunFailed, Message: se.msg}, se.code)
		return res, false, err
	}
	if err != nil {
		return ctrl.Result{}, false, err
	}
	if prev := ing.Status.Report; prev != nil && prev.SHA256 != "" && prev.SHA256 != blob.SHA256 {
		r.dropBlob(ctx, tenant, blob.ID)
		msg := fmt.Sprintf("%s changed since it was first read: sha256 %s then, %s now; an Ingestion imports one report only, so it was not imported again: create an Ingestion with a new name for the new content", describeSource(ing), prev.SHA256, blob.SHA256)
		res, err := r.finish(ctx, p, ing, r.job(ing, int(ing.Status.Attempt)+1), store.Outcome{Status: store.RunFailed, Message: msg}, CodeReportChanged)
		return res, false, err
	}
	fetched := r.now()
	ing.Status.Report = &posturev1.FetchedReport{BlobID: blob.ID, Size: blob.Size, SHA256: blob.SHA256, RecordCount: int64(records), FetchedAt: &fetched}
	ing.Status.Summary.Total = int64(records)
	p.emit(r.Recorder, ing, corev1.EventTypeNormal, ReasonFetched, "Fetch", "Stored %d records (%d bytes, sha256 %s) from %s", records, blob.Size, blob.SHA256, describeSource(ing))
	// Recording the stored copy is this reconcile's status write; the run
	// starts in the next one, from a status that names its blob.
	written, res, err := r.write(ctx, p, ing)
	if err != nil || !written {
		// Not recorded, so not used: the next reconcile reads the source again.
		r.dropBlob(ctx, tenant, blob.ID)
		return res, false, err
	}
	return ctrl.Result{RequeueAfter: time.Millisecond}, false, nil
}

// labelTenant gives a declared Ingestion the tenant label an upload gets
// from the API, so that its report, run and findings are stored under the
// tenant whose users read them. The Tenant of the namespace is looked up;
// GitOps tools may create it after the Ingestion, so none is a wait. The
// label is added by a merge patch, which a GitOps tool leaves alone: it is
// not in the manifest it applies.
func (r *IngestionReconciler) labelTenant(ctx context.Context, ing *posturev1.Ingestion) error {
	if ing.Labels[posturev1.LabelTenant] != "" {
		return nil
	}
	t, err := auth.TenantForNamespace(ctx, r.Client, ing.Namespace)
	var ae *auth.Error
	switch {
	case errors.As(err, &ae):
		return permanent(CodeTenantNotFound, "%s", ae.Reason)
	case err != nil:
		return err
	case t == nil:
		return transient("no Tenant uses namespace %s", ing.Namespace)
	}
	orig := ing.DeepCopy()
	if ing.Labels == nil {
		ing.Labels = map[string]string{}
	}
	ing.Labels[posturev1.LabelTenant] = t.Name
	if err := r.Patch(ctx, ing, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("label Ingestion %s/%s with its tenant %s: %w", ing.Namespace, ing.Name, t.Name, err)
	}
	return nil
}

// fetchURL takes the result of the background read of ing's url source, or
// starts that read; while it goes on, again is when to look again.
func (r *IngestionReconciler) fetchURL(ing *posturev1.Ingestion, tenant string) (blob store.Blob, records int, again time.Duration, err error) {
	running := r.Sources.wait() + r.Sources.urlTimeout()
	if res, busy := r.fetches.take(ing); busy {
		return store.Blob{}, 0, running, nil
	} else if res != nil {
		return res.blob, res.records, 0, res.err
	}
	slotBy := ing.CreationTimestamp.Add(r.Sources.wait())
	if now := r.now().Time; slotBy.Before(now) {
		// A read started again once the wait is over (a stored copy lost
		// before a run) still gets its turn.
		slotBy = now.Add(r.Sources.urlTimeout())
	}
	// The read outlives this reconcile, which goes on changing ing (a status
	// patch rewrites the whole object): it reads a copy.
	snapshot := ing.DeepCopy()
	read := func(ctx context.Context) (store.Blob, int, error) { return r.storeDeclared(ctx, snapshot, tenant) }
	if !r.fetches.begin(ing, tenant, slotBy, read) {
		// Fetches start with the manager; this reconcile came first.
		return store.Blob{}, 0, 200 * time.Millisecond, nil
	}
	return store.Blob{}, 0, running, nil
}

func (r *IngestionReconciler) waitForSource(ctx context.Context, p *ingestionPass, ing *posturev1.Ingestion, why string, deadline time.Time) (ctrl.Result, bool, error) {
	msg := fmt.Sprintf("Waiting for the report: %s; retrying until %s", why, deadline.UTC().Format(time.RFC3339))
	setIngestionPhase(ing, posturev1.IngestionPending, ReasonPending, msg)
	res, err := r.writeThen(ctx, p, ing, min(5*time.Second, time.Until(deadline)+time.Second))
	return res, false, err
}

func (r *IngestionReconciler) dropBlob(ctx context.Context, tenant, id string) {
	if err := r.Store.DeleteBlob(context.WithoutCancel(ctx), tenant, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		ctrl.LoggerFrom(ctx).Error(err, "delete an unused copy of a declared report", "blob", id)
	}
}

// describeSource names the source for messages and events. A URL is shown
// without its query or fragment, which may carry a signed token.
func describeSource(ing *posturev1.Ingestion) string {
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

func (r *IngestionReconciler) storeDeclared(ctx context.Context, ing *posturev1.Ingestion, tenant string) (store.Blob, int, error) {
	s := ing.Spec.Source
	limit := r.Sources.maxBytes()
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
		return store.Blob{}, 0, permanent(CodeTooLarge, "%s is larger than the limit of %d bytes", describeSource(ing), limit)
	case errors.As(err, &fe):
		why := fe.Error()
		if s.ConfigMapRef == nil {
			// view reads the Ingestion's status, events and errors, and
			// the ConfigMap beside it, but not a Secret, nor what a URL
			// answered the manager: their problems are told by position
			// and kind, never by the bytes found there.
			why = fe.WithoutContent()
		}
		return store.Blob{}, 0, permanent(ingest.CodeMalformed, "%s is not a valid OCSF report: %s", describeSource(ing), why)
	case errors.As(err, &tma):
		return store.Blob{}, 0, permanent(ingest.CodeProviderLimit, "%s names too many accounts: %s", describeSource(ing), tma.Error())
	case err != nil && ctx.Err() == nil && s.URL != nil:
		// The connection broke off or timed out mid-body.
		return store.Blob{}, 0, transient("reading %s: %v", describeSource(ing), err)
	}
	return blob, records, err
}

// readConfigMap reads the report from a ConfigMap, uncached (see
// UncachedObjects): the manager may only get ConfigMaps of tenant namespaces.
func (r *IngestionReconciler) readConfigMap(ctx context.Context, ns string, ref *posturev1.ReportKeyRef) ([]byte, error) {
	var cm corev1.ConfigMap
	err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, transient("spec.source.configMapRef: ConfigMap %s/%s does not exist", ns, ref.Name)
	case apierrors.IsForbidden(err):
		return nil, noAccess("ConfigMap", ns, ref.Name, "spec.source.configMapRef")
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
// namespace, and a namespace reaches here only once a Tenant uses it
// (labelTenant); an Ingestion applied together with its Tenant can get here
// before that RoleBinding exists or is in force. So it is waited for, as a
// ConfigMap not created yet is, and fails the ingestion once the wait is over.
func noAccess(kind, ns, name, field string) *sourceError {
	return transient("%s: the manager may not read %s %s/%s (yet): it reads only in a Tenant's namespace, "+
		"through RoleBinding %s, which the Tenant grants", field, kind, ns, name, TenantAccessBindingName)
}

func (r *IngestionReconciler) readSecretKey(ctx context.Context, ns string, ref *posturev1.ReportKeyRef, field string) ([]byte, error) {
	var sec corev1.Secret
	err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, &sec)
	switch {
	case apierrors.IsNotFound(err):
		return nil, transient("%s: Secret %s/%s does not exist", field, ns, ref.Name)
	case apierrors.IsForbidden(err):
		return nil, noAccess("Secret", ns, ref.Name, field)
	case err != nil:
		return nil, fmt.Errorf("read Secret %s/%s: %w", ns, ref.Name, err)
	}
	v, ok := sec.Data[ref.Key]
	if !ok {
		return nil, transient("%s: Secret %s/%s has no key %s", field, ns, ref.Name, ref.Key)
	}
	return v, nil
}

// maxRedirects bounds the redirects a url source may follow.
const maxRedirects = 5

// getURL starts the GET of a url source. The caller closes the body and
// then calls cancel, which ends the fetch's deadline.
func (r *IngestionReconciler) getURL(ctx context.Context, ns string, src *posturev1.URLSource, limit int64) (*http.Response, context.CancelFunc, error) {
	shown := redactURL(src.URL)
	u, err := url.Parse(src.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, nil, permanent(ingest.CodeUnreadable, "spec.source.url.url %s is not an https URL", shown)
	}
	if u.User != nil {
		// Messages, events and the object itself would show them.
		return nil, nil, permanent(ingest.CodeUnreadable, "spec.source.url.url must not carry credentials (user:password@)")
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if ref := src.CABundleSecretRef; ref != nil {
		pem, err := r.readSecretKey(ctx, ns, ref, "spec.source.url.caBundleSecretRef")
		if err != nil {
			return nil, nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, permanent(ingest.CodeUnreadable, "spec.source.url.caBundleSecretRef: key %s of Secret %s/%s holds no PEM certificate", ref.Key, ns, ref.Name)
		}
		tlsConfig.RootCAs = pool
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: r.checkAddress}
	client := &http.Client{
		Transport: &http.Transport{
			// No proxy: a proxy would reach the addresses checkAddress refuses.
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			TLSClientConfig:       tlsConfig,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 30 * time.Second,
			DisableKeepAlives:     true,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != "https" {
				return permanent(ingest.CodeUnreadable, "%s redirected to %s URL %s; only https is followed", shown, req.URL.Scheme, redactURL(req.URL.String()))
			}
			if len(via) > maxRedirects {
				return permanent(ingest.CodeUnreadable, "%s redirected more than %d times", shown, maxRedirects)
			}
			return nil
		},
	}
	ctx, cancel := context.WithTimeout(ctx, r.Sources.urlTimeout())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		cancel()
		return nil, nil, permanent(ingest.CodeUnreadable, "spec.source.url.url %s: %v", shown, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		var se *sourceError
		if errors.As(err, &se) {
			return nil, nil, se
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			// Its text repeats the URL, query included.
			err = ue.Err
		}
		var cert *tls.CertificateVerificationError
		if errors.As(err, &cert) {
			return nil, nil, permanent(ingest.CodeUnreadable, "fetching %s: the server's certificate is not trusted (%v); set spec.source.url.caBundleSecretRef to its CA", shown, cert.Err)
		}
		return nil, nil, transient("fetching %s: %v", shown, err)
	}
	switch {
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		resp.Body.Close()
		cancel()
		return nil, nil, transient("fetching %s: the server answered %s", shown, termsafe.String(resp.Status))
	case resp.StatusCode != http.StatusOK:
		resp.Body.Close()
		cancel()
		return nil, nil, permanent(ingest.CodeUnreadable, "fetching %s: the server answered %s, want 200 OK", shown, termsafe.String(resp.Status))
	case resp.ContentLength > limit:
		resp.Body.Close()
		cancel()
		return nil, nil, permanent(CodeTooLarge, "%s is %d bytes, larger than the limit of %d bytes", "URL "+shown, resp.ContentLength, limit)
	}
	return resp, cancel, nil
}

// metadataAddresses are cloud instance metadata endpoints outside the
// link-local range (AWS's IPv6 one).
var metadataAddresses = []netip.Addr{netip.MustParseAddr("fd00:ec2::254")}

// checkAddress refuses, at connect time (so after DNS, which a hostile
// name could point anywhere), the addresses a url source must not reach
// from inside the cluster: loopback, link-local (instance metadata at
// 169.254.169.254 among them), unspecified, multicast and known metadata
// endpoints. Loopback is allowed only with SourceOptions.AllowLoopback.
func (r *IngestionReconciler) checkAddress(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return permanent(ingest.CodeUnreadable, "unusable address %s: %v", address, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return permanent(ingest.CodeUnreadable, "unusable address %s: %v", address, err)
	}
	ip = ip.Unmap()
	refused := ""
	switch {
	case ip.IsLoopback():
		if !r.Sources.AllowLoopback {
			refused = "loopback"
		}
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		refused = "link-local (cloud instance metadata lives there)"
	case ip.IsUnspecified():
		refused = "unspecified"
	case ip.IsMulticast():
		refused = "multicast"
	}
	for _, m := range metadataAddresses {
		if ip == m {
			refused = "a cloud instance metadata endpoint"
		}
	}
	if refused != "" {
		return permanent(ingest.CodeUnreadable, "spec.source.url: address %s is %s; the manager does not fetch reports from it", ip, refused)
	}
	return nil
}
