package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/store"
)

// patternReader produces n deterministic pseudo-random bytes without holding
// them, so large blobs cost no test memory either.
func patternReader(seed uint64, n int64) io.Reader {
	return io.LimitReader(&rngReader{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}, n)
}

type rngReader struct{ r *rand.Rand }

func (r *rngReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.r.Uint32())
	}
	return len(p), nil
}

func sha(r io.Reader) (string, int64) {
	h := sha256.New()
	n, _ := io.Copy(h, r)
	return hex.EncodeToString(h.Sum(nil)), n
}

func testBlobRoundTrip(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	// Three whole 1 MiB chunks and a ragged tail: crosses every boundary.
	const size = 3<<20 + 12345
	wantSum, _ := sha(patternReader(1, size))
	b, err := s.PutBlob(ctx, tenantA, patternReader(1, size))
	must(t, err, "PutBlob")
	if b.ID == "" || b.Size != size || b.SHA256 != wantSum {
		t.Fatalf("PutBlob = %+v, want size %d sha256 %s", b, size, wantSum)
	}
	rc, err := s.OpenBlob(ctx, tenantA, b.ID)
	must(t, err, "OpenBlob")
	// An odd buffer size makes reads straddle chunk boundaries.
	h := sha256.New()
	n, err := io.CopyBuffer(h, struct{ io.Reader }{rc}, make([]byte, 7777))
	must(t, err, "read blob")
	must(t, rc.Close(), "close blob")
	if got := hex.EncodeToString(h.Sum(nil)); n != size || got != wantSum {
		t.Fatalf("read back %d bytes sha256 %s, want %d bytes %s", n, got, size, wantSum)
	}

	// Byte-exact comparison of a prefix, beyond the hash.
	rc, err = s.OpenBlob(ctx, tenantA, b.ID)
	must(t, err, "OpenBlob again")
	got := make([]byte, 1<<20+10)
	_, err = io.ReadFull(rc, got)
	must(t, err, "read prefix")
	rc.Close()
	want := make([]byte, len(got))
	io.ReadFull(patternReader(1, size), want)
	if !bytes.Equal(got, want) {
		t.Fatal("blob prefix differs from what was written")
	}

	b2, err := s.PutBlob(ctx, tenantA, strings.NewReader("second"))
	must(t, err, "PutBlob second")
	if b2.ID == b.ID {
		t.Fatalf("two blobs share id %s", b.ID)
	}
}

func testBlobEmpty(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	b, err := s.PutBlob(ctx, tenantA, strings.NewReader(""))
	must(t, err, "PutBlob")
	const emptySum = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	if b.Size != 0 || b.SHA256 != emptySum {
		t.Fatalf("PutBlob(empty) = %+v", b)
	}
	rc, err := s.OpenBlob(ctx, tenantA, b.ID)
	must(t, err, "OpenBlob")
	data, err := io.ReadAll(rc)
	must(t, err, "read")
	rc.Close()
	if len(data) != 0 {
		t.Fatalf("read %d bytes from empty blob", len(data))
	}
}

func testBlobTenantIsolation(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	b, err := s.PutBlob(ctx, tenantA, strings.NewReader("secret report"))
	must(t, err, "PutBlob")
	_, err = s.OpenBlob(ctx, tenantB, b.ID)
	wantErr(t, err, store.ErrNotFound, "OpenBlob by other tenant")
	wantErr(t, s.DeleteBlob(ctx, tenantB, b.ID), store.ErrNotFound, "DeleteBlob by other tenant")
	_, err = s.OpenBlob(ctx, tenantA, "00000000-0000-0000-0000-000000000000")
	wantErr(t, err, store.ErrNotFound, "OpenBlob unknown id")
	_, err = s.OpenBlob(ctx, tenantA, "not-a-uuid")
	wantErr(t, err, store.ErrNotFound, "OpenBlob malformed id")

	rc, err := s.OpenBlob(ctx, tenantA, b.ID)
	must(t, err, "OpenBlob by owner after other tenant's delete")
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "secret report" {
		t.Fatalf("read %q", data)
	}

	must(t, s.DeleteBlob(ctx, tenantA, b.ID), "DeleteBlob")
	_, err = s.OpenBlob(ctx, tenantA, b.ID)
	wantErr(t, err, store.ErrNotFound, "OpenBlob after delete")
	wantErr(t, s.DeleteBlob(ctx, tenantA, b.ID), store.ErrNotFound, "DeleteBlob twice")
	expectNoBlobs(t, s, tenantA)
}

func expectNoBlobs(t *testing.T, s store.Store, tenant string) {
	t.Helper()
	c, ok := s.(BlobCounter)
	if !ok {
		t.Fatalf("%T does not implement storetest.BlobCounter", s)
	}
	blobs, chunks, err := c.CountBlobs(context.Background(), tenant)
	must(t, err, "CountBlobs")
	if blobs != 0 || chunks != 0 {
		t.Fatalf("%d blob rows and %d chunk rows left, want none", blobs, chunks)
	}
}

// failingReader yields n good bytes, then err.
type failingReader struct {
	r   io.Reader
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

func testBlobPutFailure(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	boom := errors.New("client went away")
	// Fail after more than two chunks have been written.
	_, err := s.PutBlob(ctx, tenantA, &failingReader{r: patternReader(2, 2<<20+500), err: boom})
	wantErr(t, err, boom, "PutBlob with failing reader")
	expectNoBlobs(t, s, tenantA)
	// A source failing with io.ErrUnexpectedEOF (a truncated multipart part
	// does) is a failure too, not a short last chunk.
	_, err = s.PutBlob(ctx, tenantA, &failingReader{r: patternReader(4, 1<<20+7), err: io.ErrUnexpectedEOF})
	wantErr(t, err, io.ErrUnexpectedEOF, "PutBlob with a reader failing with io.ErrUnexpectedEOF")
	expectNoBlobs(t, s, tenantA)
}

// cancelReader cancels the upload's context after n bytes, as a client
// disconnect does, and keeps producing data.
type cancelReader struct {
	r      io.Reader
	left   int64
	cancel func()
}

func (c *cancelReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left <= 0 {
		c.cancel()
	}
	return n, err
}

func testBlobPutCancel(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(ctxT(t))
	_, err := s.PutBlob(ctx, tenantA, &cancelReader{r: patternReader(3, 4<<20), left: 1<<20 + 300, cancel: cancel})
	if err == nil {
		t.Fatal("PutBlob succeeded although its context was cancelled")
	}
	expectNoBlobs(t, s, tenantA)
}

// stallingReader yields n bytes, then reports on stalled and blocks until
// resume is closed, when it ends the stream: an upload whose client stopped
// sending in the middle.
type stallingReader struct {
	r       io.Reader
	stalled chan struct{}
	resume  chan struct{}
	once    sync.Once
}

func (s *stallingReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err == io.EOF {
		s.once.Do(func() { close(s.stalled) })
		<-s.resume
	}
	return n, err
}

func testBlobSweepIncomplete(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	j, ok := s.(store.Janitor)
	if !ok {
		t.Fatalf("%T does not implement store.Janitor", s)
	}
	c, ok := s.(BlobCounter)
	if !ok {
		t.Fatalf("%T does not implement storetest.BlobCounter", s)
	}
	counts := func(what string, wantBlobs, wantChunks int) {
		t.Helper()
		blobs, chunks, err := c.CountBlobs(ctx, tenantA)
		must(t, err, "CountBlobs")
		if blobs != wantBlobs || chunks != wantChunks {
			t.Fatalf("%s: %d blobs and %d chunks, want %d and %d", what, blobs, chunks, wantBlobs, wantChunks)
		}
	}
	done, err := s.PutBlob(ctx, tenantA, strings.NewReader("a complete report"))
	must(t, err, "PutBlob complete")

	// Two whole chunks are stored when the client stalls.
	stalling := &stallingReader{r: patternReader(5, 2<<20), stalled: make(chan struct{}), resume: make(chan struct{})}
	putErr := make(chan error, 1)
	go func() {
		_, err := s.PutBlob(ctx, tenantA, stalling)
		putErr <- err
	}()
	select {
	case <-stalling.stalled:
	case err := <-putErr:
		t.Fatalf("PutBlob returned %v before its reader stalled", err)
	}
	// The last chunk read may still be on its way to the store (an engine
	// may write one chunk while it reads the next); it gets there while
	// the client stalls.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		blobs, chunks, err := c.CountBlobs(ctx, tenantA)
		must(t, err, "CountBlobs")
		if blobs == 2 && chunks == 3 || time.Now().After(deadline) {
			break
		}
	}
	counts("while the upload stalls", 2, 3)

	n, err := j.SweepIncompleteBlobs(ctx, time.Now().Add(-time.Hour))
	must(t, err, "SweepIncompleteBlobs with an old cutoff")
	if n != 0 {
		t.Fatalf("a sweep of uploads idle for an hour removed %d, want 0 (the stalled one is seconds old)", n)
	}
	counts("after a sweep that must keep everything", 2, 3)

	n, err = j.SweepIncompleteBlobs(ctx, time.Now().Add(time.Second))
	must(t, err, "SweepIncompleteBlobs")
	if n != 1 {
		t.Fatalf("sweep removed %d uploads, want the 1 stalled one", n)
	}
	counts("after the sweep", 1, 1)

	// The swept upload resumes and ends: it must fail, not complete a blob
	// that has lost its chunks.
	close(stalling.resume)
	if err := <-putErr; err == nil {
		t.Fatal("PutBlob of a swept upload succeeded")
	}
	counts("after the swept upload ended", 1, 1)

	rc, err := s.OpenBlob(ctx, tenantA, done.ID)
	must(t, err, "OpenBlob of the complete blob after sweeps")
	data, _ := io.ReadAll(rc)
	rc.Close()
	if string(data) != "a complete report" {
		t.Fatalf("complete blob reads %q after sweeps", data)
	}
	n, err = j.SweepIncompleteBlobs(ctx, time.Now().Add(time.Hour))
	must(t, err, "SweepIncompleteBlobs again")
	if n != 0 {
		t.Fatalf("second sweep removed %d, want 0: complete blobs are never swept", n)
	}
}
