package ingest

// rawBlockSize is the size of the blocks records are copied into.
const rawBlockSize = 1 << 20

// rawArena keeps the raw records of the batch being filled in a few large
// blocks, and reuses the blocks of batches whose writes are done. A report
// streams through the worker, so without reuse every record was a fresh
// allocation: hundreds of megabytes of garbage per report, and under the
// worker's memory limit the runtime kept returning pages to the system and
// faulting them back in.
type rawArena struct {
	blocks [][]byte // the batch being filled; the last one is being appended to
	free   [][]byte // empty blocks of written batches
}

// keep returns a copy of raw the caller may hold until it passes the
// blocks on with take.
func (a *rawArena) keep(raw []byte) []byte {
	if len(raw) > rawBlockSize/4 {
		// Rare and large: its own memory, left to the garbage collector.
		return append([]byte(nil), raw...)
	}
	n := len(a.blocks)
	if n == 0 || cap(a.blocks[n-1])-len(a.blocks[n-1]) < len(raw) {
		a.blocks = append(a.blocks, a.newBlock())
		n++
	}
	b := a.blocks[n-1]
	start := len(b)
	b = append(b, raw...)
	a.blocks[n-1] = b
	return b[start:len(b):len(b)]
}

func (a *rawArena) newBlock() []byte {
	if n := len(a.free); n > 0 {
		b := a.free[n-1]
		a.free = a.free[:n-1]
		return b
	}
	return make([]byte, 0, rawBlockSize)
}

// take hands over the blocks of the batch being filled: they stay untouched
// until given back.
func (a *rawArena) take() [][]byte {
	b := a.blocks
	a.blocks = nil
	return b
}

// giveBack returns blocks taken earlier, whose records nobody reads any more.
func (a *rawArena) giveBack(blocks [][]byte) {
	for _, b := range blocks {
		a.free = append(a.free, b[:0])
	}
}
