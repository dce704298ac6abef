package billing

import (
	"github.com/posture-dev/posture/internal/ocsf"
)

// readAheadBytes is about how much of a report one batch of records holds.
const readAheadBytes = 1 << 20

// readAhead splits a report into records on a goroutine of its own, a
// batch or two ahead of the caller, which validates them: the two are the
// bulk of an intake's work, and one after the other on one core they were
// its slowest part.
type readAhead struct {
	batches chan *recordBatch
	free    chan *recordBatch
	done    chan struct{}
	cur     *recordBatch
	i       int
}

// recordBatch is records copied out of the Reader's buffers into one
// arena, and, after them, what the Reader said next (io.EOF, a
// *ocsf.FileError, a read error), if it said anything.
type recordBatch struct {
	recs  []ocsf.Record
	spans [][2]int // each record's bytes in arena
	arena []byte
	err   error
}

func newReadAhead(r *ocsf.Reader) *readAhead {
	ra := &readAhead{batches: make(chan *recordBatch, 1), free: make(chan *recordBatch, 3), done: make(chan struct{})}
	for range 3 {
		ra.free <- &recordBatch{arena: make([]byte, 0, readAheadBytes+readAheadBytes/4)}
	}
	go ra.run(r)
	return ra
}

func (ra *readAhead) run(r *ocsf.Reader) {
	for {
		var b *recordBatch
		select {
		case b = <-ra.free:
		case <-ra.done:
			return
		}
		b.recs, b.spans, b.arena, b.err = b.recs[:0], b.spans[:0], b.arena[:0], nil
		for len(b.arena) < readAheadBytes {
			rec, err := r.NextBorrowed()
			if err != nil {
				b.err = err
				break
			}
			start := len(b.arena)
			b.arena = append(b.arena, rec.Raw...)
			b.spans = append(b.spans, [2]int{start, len(b.arena)})
			b.recs = append(b.recs, rec)
		}
		// The arena may have moved while it grew: the records point into
		// it only once it is whole.
		for i, sp := range b.spans {
			b.recs[i].Raw = b.arena[sp[0]:sp[1]:sp[1]]
		}
		select {
		case ra.batches <- b:
		case <-ra.done:
			return
		}
		if b.err != nil {
			return
		}
	}
}

// next is ocsf.Reader.NextBorrowed, a batch ahead: the record is valid
// until the next call.
func (ra *readAhead) next() (ocsf.Record, error) {
	for {
		if ra.cur != nil {
			if ra.i < len(ra.cur.recs) {
				ra.i++
				return ra.cur.recs[ra.i-1], nil
			}
			if ra.cur.err != nil {
				return ocsf.Record{}, ra.cur.err
			}
			ra.free <- ra.cur
		}
		ra.cur, ra.i = <-ra.batches, 0
	}
}

// stop ends the goroutine once the Reader's read returns, if it has not
// ended already.
func (ra *readAhead) stop() { close(ra.done) }
