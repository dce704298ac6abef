package billing

import (
	"bytes"
	"io"
	"sync"
)

// pipe is io.Pipe with a buffer of up to limit bytes between its ends.
// io.Pipe's Write returns only once the reader has taken every byte, so an
// intake and the collector decoding the same report took turns on one core;
// with the buffer between them, each runs on its own.
type pipe struct {
	mu       sync.Mutex
	readable sync.Cond // data, or the write end closed
	writable sync.Cond // room, or the read end closed
	buf      bytes.Buffer
	limit    int
	wclosed  bool
	werr     error // what Read returns once the buffer is empty (io.EOF by default)
	rerr     error // what Write returns once the read end is closed
}

func newPipe(limit int) *pipe {
	p := &pipe{limit: limit}
	p.readable.L, p.writable.L = &p.mu, &p.mu
	return p
}

// Write copies b into the buffer, waiting for room, and fails once the
// reader closed its end.
func (p *pipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for len(b) > 0 {
		for p.rerr == nil && !p.wclosed && p.buf.Len() >= p.limit {
			p.writable.Wait()
		}
		switch {
		case p.rerr != nil:
			return n, p.rerr
		case p.wclosed:
			return n, io.ErrClosedPipe
		}
		m := min(len(b), p.limit-p.buf.Len())
		p.buf.Write(b[:m])
		b, n = b[m:], n+m
		p.readable.Signal()
	}
	return n, nil
}

// Read takes what is buffered, waiting for some while the write end is
// open.
func (p *pipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.buf.Len() == 0 && !p.wclosed && p.rerr == nil {
		p.readable.Wait()
	}
	if p.rerr != nil {
		return 0, io.ErrClosedPipe
	}
	if p.buf.Len() == 0 {
		return 0, p.werr
	}
	n, _ := p.buf.Read(b)
	p.writable.Signal()
	return n, nil
}

// CloseWrite ends the data: Read returns err (io.EOF when nil) once the
// buffer is drained.
func (p *pipe) CloseWrite(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wclosed {
		return
	}
	if err == nil {
		err = io.EOF
	}
	p.wclosed, p.werr = true, err
	p.readable.Broadcast()
	p.writable.Broadcast()
}

// CloseRead ends the reading: every Write from now on fails with err.
func (p *pipe) CloseRead(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rerr == nil {
		p.rerr = err
		p.buf.Reset()
	}
	p.readable.Broadcast()
	p.writable.Broadcast()
}
