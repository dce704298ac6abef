package uploads_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
	"github.com/posture-dev/posture/internal/uploads"
)

// stalledUpload is a client that sends two chunks and then nothing: it
// reports when it stalls and blocks until released, then ends the stream.
type stalledUpload struct {
	left    int
	stalled chan struct{}
	release chan struct{}
}

func (s *stalledUpload) Read(p []byte) (int, error) {
	if s.left == 0 {
		close(s.stalled)
		<-s.release
		return 0, io.EOF
	}
	n := min(len(p), s.left)
	clear(p[:n])
	s.left -= n
	return n, nil
}

// The sweeper runs while the manager does: an upload that stopped writing is
// deleted within an interval, and fails instead of completing if it resumes.
func TestSweeperDeletesStalledUploads(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	up := &stalledUpload{left: 2 << 20, stalled: make(chan struct{}), release: make(chan struct{})}
	putErr := make(chan error, 1)
	go func() {
		_, err := st.PutBlob(ctx, "sweep", up)
		putErr <- err
	}()
	<-up.stalled
	counter := st.(interface {
		CountBlobs(context.Context, string) (int, int, error)
	})
	if n, _, err := counter.CountBlobs(ctx, "sweep"); err != nil || n != 1 {
		t.Fatalf("before the sweep: %d uploads stored (%v), want the stalled one", n, err)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	sweeper := &uploads.Sweeper{
		Store: st.(store.Janitor), StalledAfter: time.Minute, Interval: 20 * time.Millisecond, Log: logr.Discard(),
		// A clock two minutes ahead: the upload has been idle for longer
		// than StalledAfter.
		Now: func() time.Time { return time.Now().Add(2 * time.Minute) },
	}
	go func() { done <- sweeper.Start(runCtx) }()
	testenv.Eventually(t, 10*time.Second, "the sweeper to delete the stalled upload", func() (bool, string) {
		n, _, err := counter.CountBlobs(ctx, "sweep")
		if err != nil {
			t.Fatal(err)
		}
		return n == 0, fmt.Sprintf("%d uploads stored", n)
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("sweeper stopped with %v", err)
	}
	close(up.release)
	if err := <-putErr; err == nil {
		t.Fatal("a swept upload completed when its client came back")
	}
}
