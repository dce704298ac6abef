package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"time"
)

// Copied is what CopyChunks stored of a blob.
type Copied struct {
	Size   int64
	Chunks int
	SHA256 string
}

// CopyChunks copies r into a blob's chunks of ChunkSize. put stores chunk
// seq, one short statement each: an upload is as slow as its client, and a
// transaction as long would pin a connection (or SQLite's write lock) and
// hold back vacuum meanwhile. touch tells the sweep the upload is alive,
// every TouchInterval.
//
// The next chunk is read (and the report checked as it passes) while the
// last one is put, from two buffers: an upload was otherwise the sum of the
// two, where each can use a core of its own. A failure of r comes back as
// "read: ..."; one of put or touch as they returned it, and it ends the
// copy at the next chunk.
func CopyChunks(r io.Reader, put func(seq int, data []byte) error, touch func(now time.Time) error) (Copied, error) {
	free := make(chan []byte, 2)
	free <- make([]byte, ChunkSize)
	free <- make([]byte, ChunkSize)
	full := make(chan []byte, 1)
	failed, done := make(chan struct{}), make(chan struct{})
	var werr error
	go func() {
		defer close(done)
		touched := time.Now()
		for seq := 0; ; seq++ {
			data, ok := <-full
			if !ok {
				return
			}
			if werr == nil {
				if werr = put(seq, data); werr == nil {
					if now := time.Now(); now.Sub(touched) >= TouchInterval {
						werr, touched = touch(now), now
					}
				}
				if werr != nil {
					close(failed)
				}
			}
			free <- data[:cap(data)]
		}
	}()
	var c Copied
	finish := func(err error) (Copied, error) {
		close(full)
		<-done
		if werr != nil {
			return Copied{}, werr
		}
		if err != nil {
			return Copied{}, err
		}
		return c, nil
	}
	h := sha256.New()
	for {
		// A failure is looked at first: once put fails, free has buffers
		// too, and a select between the two would pick either.
		select {
		case <-failed:
			return finish(nil)
		default:
		}
		var buf []byte
		select {
		case buf = <-free:
		case <-failed:
			return finish(nil)
		}
		n, rerr := readChunk(r, buf)
		if n > 0 {
			h.Write(buf[:n])
			c.Size += int64(n)
			c.Chunks++
			full <- buf[:n]
		} else {
			free <- buf
		}
		switch {
		case rerr == io.EOF:
			c.SHA256 = hex.EncodeToString(h.Sum(nil))
			return finish(nil)
		case rerr != nil:
			return finish(fmt.Errorf("read: %w", rerr))
		}
	}
}

// readChunk fills buf from r. It returns io.EOF, possibly with n > 0, only
// when r ended; any other error is r's own. Unlike io.ReadFull it does not
// turn a short read into io.ErrUnexpectedEOF, which a source may return
// itself to say it was cut off (a truncated multipart part does).
func readChunk(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
