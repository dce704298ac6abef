package uploads

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/posture-dev/posture/internal/billing"
	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/store"
)

// TooLargeError says a report passed its size limit; nothing was kept.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the report is larger than the limit of %d bytes", e.Limit)
}

// StoreReport streams a report into a new blob of the tenant while checking
// its shape, counting its records and finding its accounts: the one path by
// which every report is stored, uploaded (Accept) or declared in Git. A
// malformed report ends the copy soon after its first bad byte (the check
// runs beside the copy, at most a few MiB behind) and is returned as an
// *ocsf.FileError, one past limit bytes as a *TooLargeError, one naming more
// than billing.MaxAccounts accounts as a *billing.TooManyAccountsError. A
// failure of r itself (a client gone, a network source broken off) is a
// *ReadError, one of the store (or of ctx) a *StoreError. The accounts are
// stored with the blob (store.Blobs.BlobAccounts). On any error nothing is
// kept.
func StoreReport(ctx context.Context, st store.Blobs, tenant string, r io.Reader, limit int64) (store.Blob, int, error) {
	lr := &capReader{r: r, left: limit}
	// The records are counted, the shape checked and the accounts found
	// from the same bytes, beside the copy, so neither billing nor the
	// count reads the stored report again.
	accounts := billing.NewCollector(ctx)
	defer accounts.Abort()
	blob, err := st.PutReport(ctx, tenant, io.TeeReader(lr, accounts), accounts.Stored)
	if err != nil {
		read := limit - lr.left
		if lr.exceeded {
			return store.Blob{}, 0, &TooLargeError{Limit: limit}
		}
		var fe *ocsf.FileError
		if errors.As(err, &fe) {
			return store.Blob{}, 0, fe
		}
		var tma *billing.TooManyAccountsError
		if errors.As(err, &tma) {
			return store.Blob{}, 0, tma
		}
		if lr.err != nil {
			return store.Blob{}, 0, &ReadError{Read: read, Err: lr.err}
		}
		return store.Blob{}, 0, &StoreError{Read: read, Err: err}
	}
	records, err := accounts.Records()
	if err != nil {
		if derr := st.DeleteBlob(context.WithoutCancel(ctx), tenant, blob.ID); derr != nil && !errors.Is(derr, store.ErrNotFound) {
			return store.Blob{}, 0, fmt.Errorf("%w (and deleting its stored copy %s failed: %v)", err, blob.ID, derr)
		}
		return store.Blob{}, 0, err
	}
	return blob, records, nil
}

// ReadError is reading the report itself failing after Read bytes.
type ReadError struct {
	Read int64
	Err  error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("reading the report failed after %d bytes: %v", e.Read, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// StoreError is the store (or the context) failing after Read bytes of the
// report were read.
type StoreError struct {
	Read int64
	Err  error
}

func (e *StoreError) Error() string { return "store the report: " + e.Err.Error() }

func (e *StoreError) Unwrap() error { return e.Err }

// capReader fails once more than left bytes come; exactly left is fine.
type capReader struct {
	r        io.Reader
	left     int64
	exceeded bool
	err      error // the first error of r itself, io.EOF aside
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			c.exceeded = true
			return 0, &TooLargeError{}
		}
		return 0, c.note(err)
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, c.note(err)
}

func (c *capReader) note(err error) error {
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return err
}
