package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// TestCopyChunks: chunks arrive whole, in order and numbered; a failure of
// the source or of put ends the copy, put's before the rest is read.
func TestCopyChunks(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), (5*ChunkSize)/20)
	refused := errors.New("disk full")
	tests := []struct {
		name       string
		src        io.Reader
		failAt     int // put fails at this chunk; -1 never
		wantErr    string
		wantChunks int
		maxRead    int // bytes of the source read at most; 0 any
	}{
		{name: "whole", src: iotest.HalfReader(bytes.NewReader(data)), failAt: -1, wantChunks: 3},
		{name: "empty", src: strings.NewReader(""), failAt: -1, wantChunks: 0},
		{name: "source fails", src: io.MultiReader(bytes.NewReader(data[:ChunkSize+7]), iotest.ErrReader(errors.New("reset"))), failAt: -1, wantErr: "read: reset"},
		{name: "put fails", src: bytes.NewReader(append(data, data...)), failAt: 0, wantErr: "disk full", maxRead: 3 * ChunkSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got bytes.Buffer
			next := 0
			counted := &countingReader{r: tt.src}
			c, err := CopyChunks(counted, func(seq int, chunk []byte) error {
				if seq != next {
					t.Errorf("chunk %d came as number %d", next, seq)
				}
				next++
				if seq == tt.failAt {
					return refused
				}
				got.Write(chunk)
				return nil
			}, func(time.Time) error { return nil })
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if tt.maxRead > 0 && counted.n > tt.maxRead {
					t.Fatalf("read %d bytes after put failed, want at most %d", counted.n, tt.maxRead)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := data
			if tt.name == "empty" {
				want = nil
			}
			sum := sha256.Sum256(want)
			if !bytes.Equal(got.Bytes(), want) || c.Size != int64(len(want)) || c.Chunks != tt.wantChunks || c.SHA256 != hex.EncodeToString(sum[:]) {
				t.Fatalf("copied %d bytes in %d chunks (%s), want %d in %d", c.Size, c.Chunks, c.SHA256, len(want), tt.wantChunks)
			}
		})
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}
