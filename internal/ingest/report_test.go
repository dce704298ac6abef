package ingest_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/store"
)

// brokenReader gives data, then fails as a connection cut mid-body does.
type brokenReader struct{ r io.Reader }

func (b *brokenReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, errors.New("connection reset by peer")
	}
	return n, err
}

// farFuture makes a sweep count every incomplete blob, however fresh.
var farFuture = time.Now().Add(24 * time.Hour)

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
			func(err error) bool { var tl *ingest.TooLargeError; return errors.As(err, &tl) }, "larger than the limit of 38 bytes"},
		{"not an array", strings.NewReader(`{"class_uid":2004}`), 1 << 20, 0,
			func(err error) bool { var fe *ocsf.FileError; return errors.As(err, &fe) }, "byte 0"},
		{"cut off mid-body", &brokenReader{strings.NewReader(two[:10])}, 1 << 20, 0,
			func(err error) bool { return err != nil }, "connection reset by peer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newStore(t)
			blob, n, err := ingest.StoreReport(context.Background(), st, "t", tc.body, tc.limit)
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
			if n, _ := st.(store.Janitor).SweepIncompleteBlobs(context.Background(), farFuture); n != 0 {
				t.Errorf("a failed report left %d incomplete blobs", n)
			}
		})
	}
}
