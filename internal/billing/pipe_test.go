package billing

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestPipe: bytes arrive whole and in order through a buffer far smaller
// than a write; each end's close reaches the other.
func TestPipe(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	tests := []struct {
		name     string
		closeErr error
		wantErr  error
	}{
		{name: "closed", wantErr: nil},
		{name: "closed with an error", closeErr: errors.New("intake aborted"), wantErr: errors.New("intake aborted")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPipe(1000)
			go func() {
				if _, err := io.Copy(p, iotest.HalfReader(bytes.NewReader(data))); err != nil {
					t.Errorf("write: %v", err)
				}
				p.CloseWrite(tt.closeErr)
			}()
			got, err := io.ReadAll(iotest.OneByteReader(p))
			if !bytes.Equal(got, data) {
				t.Fatalf("read %d bytes, want the %d written", len(got), len(data))
			}
			if (err == nil) != (tt.wantErr == nil) || err != nil && err.Error() != tt.wantErr.Error() {
				t.Fatalf("read ended with %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestPipeReaderGone: a write waiting for room, and every write after it,
// fails with the reader's error.
func TestPipeReaderGone(t *testing.T) {
	p := newPipe(10)
	stop := errors.New("too many accounts")
	done := make(chan error)
	go func() {
		_, err := p.Write(make([]byte, 100))
		done <- err
	}()
	buf := make([]byte, 5)
	if _, err := io.ReadFull(p, buf); err != nil {
		t.Fatal(err)
	}
	p.CloseRead(stop)
	if err := <-done; !errors.Is(err, stop) {
		t.Fatalf("the waiting write ended with %v, want %v", err, stop)
	}
	if _, err := p.Write([]byte("x")); !errors.Is(err, stop) {
		t.Fatalf("a later write ended with %v, want %v", err, stop)
	}
}
