// Package uploads is the one home of accepting a report: the file name
// rules, streaming the body into a blob while counting and checking its
// records, and creating the pending Ingestion that hands it to the
// controller. Each front door (the REST API, the aggregated API) adapts its
// request to Accept and maps the errors to its own wire format.
package uploads

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/billing"
	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/termsafe"
)

// FileSuffix is the only accepted report file name ending.
const FileSuffix = ".ocsf.json"

// MaxFilenameBytes bounds an uploaded report's name; the Ingestion CRD holds
// the same bound, so a name accepted here is one the API server stores.
const MaxFilenameBytes = 255

// DefaultMaxBytes bounds one uploaded report.
const DefaultMaxBytes int64 = 1 << 30

// Kind says which answer a refused upload deserves.
type Kind int

const (
	// Invalid is the client's mistake: a bad name or a malformed report (400).
	Invalid Kind = iota + 1
	// TooLarge is a report past the size limit (413).
	TooLarge
	// Interrupted is a request whose context ended mid-upload (400): no
	// part of the report is to blame.
	Interrupted
)

// Error is a refused upload. Message is safe to show the caller.
type Error struct {
	Kind    Kind
	Message string
}

func (e *Error) Error() string { return e.Message }

func invalidf(format string, args ...any) *Error {
	return &Error{Kind: Invalid, Message: fmt.Sprintf(format, args...)}
}

// Service accepts uploads for every tenant.
type Service struct {
	// Client creates the Ingestion objects.
	Client client.Client
	Store  store.Blobs
	Log    logr.Logger
	// MaxBytes bounds one report (DefaultMaxBytes when zero).
	MaxBytes int64
}

// Limit is the size limit in force.
func (s *Service) Limit() int64 {
	if s.MaxBytes > 0 {
		return s.MaxBytes
	}
	return DefaultMaxBytes
}

// TooLargeError is the refusal of a report past the limit.
func (s *Service) TooLargeError() *Error {
	return &Error{Kind: TooLarge, Message: fmt.Sprintf("the report is larger than the upload limit of %d bytes", s.Limit())}
}

// Request is one report to accept.
type Request struct {
	Tenant    string
	Namespace string
	Filename  string
	// Body is the report itself; it is read once, to its end or to the
	// first error.
	Body io.Reader
	// BodyName names the body in messages ("the part file", "the request
	// body"), as the caller knows it.
	BodyName    string
	RequestedBy posturev1.Requester
}

// CheckFilename refuses names that would be unsafe to show: the name is
// printed by kubectl and carried in events, where control characters repaint
// a terminal or forge lines and a bidi override shows "report\u202Enosj.exe"
// as something else, and a huge name bloats every listing. What is unsafe is
// termsafe's rule, the one every table cell is printed by.
func CheckFilename(name string) *Error {
	if name == "" {
		return invalidf("the part file carries no file name; its name must end in %s", FileSuffix)
	}
	shown := name
	if len(shown) > 64 {
		shown = shown[:64] + "..."
	}
	if len(name) > MaxFilenameBytes {
		return invalidf("file name %q is %d bytes long; at most %d bytes are allowed", shown, len(name), MaxFilenameBytes)
	}
	if !utf8.ValidString(name) {
		return invalidf("file name %q is not valid UTF-8", shown)
	}
	if c, i := termsafe.Find(name); i >= 0 {
		return invalidf("file name %q has the %s %U at byte %d; control characters, line separators and bidirectional formatting characters are not allowed", shown, kindOf(c), c, i)
	}
	if !strings.HasSuffix(name, FileSuffix) {
		return invalidf("file name %q must end in %s", name, FileSuffix)
	}
	return nil
}

func kindOf(c rune) string {
	switch {
	case c < 0x20 || (c >= 0x7f && c <= 0x9f):
		return "control character"
	case c == 0x2028 || c == 0x2029:
		return "line separator"
	}
	return "bidirectional formatting character"
}

// Printable shows text from a request (a file name, a malformed header) in
// an answer or a log without it acting on a terminal.
func Printable(s string) string { return termsafe.String(s) }

// Accept streams the report into a blob while counting its records, then
// creates the Ingestion (pending). A malformed report ends the stream at the
// first bad byte, so a large bad file is never stored whole. Refusals are
// *Error; anything else is the server's failure.
func (s *Service) Accept(ctx context.Context, req Request) (*posturev1.Ingestion, error) {
	if err := CheckFilename(req.Filename); err != nil {
		return nil, err
	}
	bodyName := req.BodyName
	if bodyName == "" {
		bodyName = "the request body"
	}
	blob, records, err := StoreReport(ctx, s.Store, req.Tenant, req.Body, s.Limit())
	var (
		tl  *TooLargeError
		mbe *http.MaxBytesError
		fe  *ocsf.FileError
		tma *billing.TooManyAccountsError
		re  *ReadError
		se  *StoreError
	)
	switch {
	case err == nil:
	case errors.As(err, &tl) || errors.As(err, &mbe):
		return nil, s.TooLargeError()
	case errors.As(err, &fe):
		return nil, invalidf("%s is not a valid OCSF report: %s", req.Filename, fe.Error())
	case errors.As(err, &tma):
		return nil, invalidf("%s names too many accounts: %s", req.Filename, tma.Error())
	case errors.As(err, &re):
		// The body broke off (truncated, client gone): the client's
		// problem, not the server's.
		return nil, invalidf("reading %s failed after %d bytes: %v", bodyName, re.Read, re.Err)
	case errors.As(err, &se) && ctx.Err() != nil:
		return nil, &Error{Kind: Interrupted, Message: fmt.Sprintf("the upload was interrupted after %d bytes", se.Read)}
	default:
		return nil, fmt.Errorf("store upload: %w", err)
	}
	ing := &posturev1.Ingestion{
		ObjectMeta: metav1.ObjectMeta{
			Name:      uuid.NewString(),
			Namespace: req.Namespace,
			Labels:    map[string]string{posturev1.LabelTenant: req.Tenant},
		},
		Spec: posturev1.IngestionSpec{
			Source: posturev1.IngestionSource{Upload: &posturev1.UploadSource{
				BlobID: blob.ID, Filename: req.Filename, Size: blob.Size, SHA256: blob.SHA256,
			}},
			RecordCount: int64(records),
			RequestedBy: req.RequestedBy,
		},
	}
	if err := s.Client.Create(ctx, ing); err != nil {
		s.deleteBlob(req.Tenant, blob.ID)
		return nil, fmt.Errorf("create Ingestion: %w", err)
	}
	s.Log.Info("ingestion accepted", "tenant", req.Tenant, "ingestion", ing.Name, "file", req.Filename, "records", records, "bytes", blob.Size)
	return ing, nil
}

// deleteBlob cleans up after a rejected upload; it must not depend on the
// request's context, which may be the reason for the cleanup.
func (s *Service) deleteBlob(tenant, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Store.DeleteBlob(ctx, tenant, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.Log.Error(err, "deleting a rejected upload failed", "tenant", tenant, "blob", id)
	}
}
