package ingest

import (
	"bytes"
	"testing"
)

func TestRawArena(t *testing.T) {
	record := func(batch, i int) []byte {
		size := 100 + (i*7919)%3000
		if i%97 == 0 {
			size = rawBlockSize/4 + 1 // too large for the blocks
		}
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(batch*31 + i*7 + j)
		}
		return b
	}
	type batch struct {
		kept   [][]byte
		blocks [][]byte
	}
	var a rawArena
	var inflight []batch
	seen := map[*byte]bool{} // the distinct blocks ever handed out
	for b := 0; b < 12; b++ {
		var cur batch
		for i := 0; i < 2000; i++ {
			src := record(b, i)
			got := a.keep(src)
			if !bytes.Equal(got, src) {
				t.Fatalf("batch %d, record %d: kept copy differs", b, i)
			}
			src[0] ^= 0xff // the caller reuses its buffer: the copy must not change
			cur.kept = append(cur.kept, got)
		}
		cur.blocks = a.take()
		for _, blk := range cur.blocks {
			if cap(blk) != rawBlockSize {
				t.Fatalf("block of capacity %d", cap(blk))
			}
			seen[&blk[:1][0]] = true
		}
		inflight = append(inflight, cur)
		// Two batches in flight, as in the worker: when a third is handed
		// out, the oldest is written and its blocks come back.
		if len(inflight) > 2 {
			done := inflight[0]
			inflight = inflight[1:]
			for i, k := range done.kept {
				if !bytes.Equal(k, record(b-2, i)) {
					t.Fatalf("batch %d, record %d changed while its batch was in flight", b-2, i)
				}
			}
			a.giveBack(done.blocks)
		}
	}
	// About three batches are alive at a time, so their blocks are all the
	// arena should ever allocate, however many batches go through it.
	if perBatch := len(inflight[0].blocks); len(seen) > 4*perBatch {
		t.Errorf("%d distinct blocks for 12 batches of %d blocks: blocks are not reused", len(seen), perBatch)
	}
}
