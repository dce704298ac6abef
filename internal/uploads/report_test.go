package uploads_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/billing"
	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/sqlite"
	"github.com/posture-dev/posture/internal/store/storetest"
	"github.com/posture-dev/posture/internal/testenv"
	"github.com/posture-dev/posture/internal/uploads"
)

func newStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// brokenReader gives data, then fails as a connection cut mid-body does.
type brokenReader struct{ r io.Reader }

func (b *brokenReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, errors.New("connection reset by peer")
	}
	return n, err
}

func TestStoreReport(t *testing.T) {
	const two = `[{"class_uid":2004},{"class_uid":2004}]`
	cases := []struct {
		name    string
		body    io.Reader
		limit   int64
		records int
		check   func(error) bool // nil: success
		want    string
	}{
		{"exactly the limit", strings.NewReader(two), int64(len(two)), 2, nil, ""},
		{"one byte past the limit", strings.NewReader(two), int64(len(two)) - 1, 0,
			func(err error) bool { var tl *uploads.TooLargeError; return errors.As(err, &tl) }, "larger than the limit of 38 bytes"},
		{"not an array", strings.NewReader(`{"class_uid":2004}`), 1 << 20, 0,
			func(err error) bool { var fe *ocsf.FileError; return errors.As(err, &fe) }, "byte 0"},
		{"cut off mid-body", &brokenReader{strings.NewReader(two[:10])}, 1 << 20, 0,
			func(err error) bool { return err != nil }, "connection reset by peer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			blob, n, err := uploads.StoreReport(context.Background(), st, "t", tc.body, tc.limit)
			if tc.check == nil {
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256([]byte(two))
				if n != tc.records || blob.Size != int64(len(two)) || blob.SHA256 != hex.EncodeToString(sum[:]) {
					t.Errorf("stored %d records, %d bytes, sha256 %s; want %d, %d, %x", n, blob.Size, blob.SHA256, tc.records, len(two), sum)
				}
				rc, err := st.OpenBlob(context.Background(), "t", blob.ID)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(rc)
				rc.Close()
				if string(got) != two {
					t.Errorf("blob holds %q", got)
				}
				return
			}
			if !tc.check(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
			if blob.ID != "" {
				t.Errorf("a failed report returned blob %s", blob.ID)
			}
			// The partial blob is removed in the background; CountBlobs
			// waits for that.
			if blobs, chunks, err := st.(storetest.BlobCounter).CountBlobs(context.Background(), "t"); err != nil || blobs != 0 || chunks != 0 {
				t.Errorf("a failed report left %d blobs and %d chunks (%v)", blobs, chunks, err)
			}
		})
	}
}

// TestStoreReportRecordsAccounts: a stored report carries the accounts
// billing will charge, found in the one pass that stores it, and a report
// naming more than billing.MaxAccounts is refused, keeping nothing.
func TestStoreReportRecordsAccounts(t *testing.T) {
	fixture, err := os.ReadFile(testenv.Fixture("aws_1500_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		body    []byte
		tooMany bool
	}{
		{"real report", fixture, false},
		{"only invalid records", []byte(`[{"class_uid":2004},{"class_uid":2004}]`), false},
		{"as many accounts as allowed", testenv.AccountsReport(t, testenv.DistinctAccounts(billing.MaxAccounts)...), false},
		{"one account too many", testenv.AccountsReport(t, testenv.DistinctAccounts(billing.MaxAccounts+1)...), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			blob, _, err := uploads.StoreReport(ctx, st, "t", bytes.NewReader(tc.body), 1<<30)
			if tc.tooMany {
				var tma *billing.TooManyAccountsError
				if !errors.As(err, &tma) || !strings.Contains(err.Error(), fmt.Sprintf("at most %d distinct accounts", billing.MaxAccounts)) {
					t.Fatalf("err = %v, want a TooManyAccountsError naming the limit", err)
				}
				blobs, chunks, err := st.(storetest.BlobCounter).CountBlobs(ctx, "t")
				if err != nil || blobs != 0 || chunks != 0 || blob.ID != "" {
					t.Errorf("a refused report returned blob %q and left %d blobs, %d chunks (%v)", blob.ID, blobs, chunks, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want, err := billing.DiscoverAccounts(ctx, bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			got, recorded, err := st.BlobAccounts(ctx, "t", blob.ID)
			if err != nil || !recorded {
				t.Fatalf("BlobAccounts = recorded %v, %v; want recorded", recorded, err)
			}
			if !slices.Equal(billing.FromStore(got), want) || got == nil {
				t.Fatalf("recorded accounts %v (%d), want %v (%d)", got, len(got), want, len(want))
			}
		})
	}
}

// spaces is a reader of a bad start and then n spaces, counting what was
// read of it.
type spaces struct {
	head string
	n    int64
	read int64
}

func (s *spaces) Read(p []byte) (int, error) {
	if s.read >= int64(len(s.head))+s.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), int64(len(s.head))+s.n-s.read)]
	for i := range p {
		if at := s.read + int64(i); at < int64(len(s.head)) {
			p[i] = s.head[at]
		} else {
			p[i] = ' '
		}
	}
	s.read += int64(len(p))
	return len(p), nil
}

// TestStoreReportStopsEarly: a report known to be malformed from its first
// byte is refused without reading it all, and nothing of it is kept.
func TestStoreReportStopsEarly(t *testing.T) {
	st := newStore(t)
	body := &spaces{head: `{"not":"an array"}`, n: 1 << 30}
	_, _, err := uploads.StoreReport(context.Background(), st, "t", body, 2<<30)
	var fe *ocsf.FileError
	if !errors.As(err, &fe) || fe.Offset != 0 {
		t.Fatalf("err = %v, want the file error at byte 0", err)
	}
	if body.read > 64<<20 {
		t.Fatalf("read %d bytes of a report malformed at its first byte, want the copy stopped within 64 MiB", body.read)
	}
	if blobs, chunks, err := st.(storetest.BlobCounter).CountBlobs(context.Background(), "t"); err != nil || blobs != 0 || chunks != 0 {
		t.Errorf("a refused report left %d blobs and %d chunks (%v)", blobs, chunks, err)
	}
}
