package main

// The export measurement of the read phase: once the database holds its
// largest size, every finding of the read tenant is exported once as OCSF
// (the larger format: whole records) through the REST API, while this
// process's memory is sampled. The server, the store and the client that
// reads the export are all this process, so its heap and RSS bound what an
// export costs the manager; they must not grow with the findings exported
// (docs/performance.md, "Exports").

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// exportSample is how often memory is read during the export.
const exportSample = 50 * time.Millisecond

// memorySample is one reading of this process's memory.
type memorySample struct {
	heap uint64 // Go heap in use by objects (HeapAlloc)
	rss  uint64 // resident set (VmRSS)
}

func sampleMemory() memorySample {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memorySample{heap: ms.HeapAlloc, rss: residentBytes()}
}

// residentBytes is VmRSS of /proc/self/status, 0 where there is none.
func residentBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// maxRSS is the process's peak resident set over its whole life
// (getrusage), which includes the loads before the export.
func maxRSS() uint64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return uint64(ru.Maxrss) << 10
}

// exportMemory exports the read tenant's history as OCSF and prints its
// size, time and this process's memory before and at its peak.
func (rb *readBench) exportMemory(ctx context.Context) error {
	runtime.GC()
	before := sampleMemory()
	var (
		mu   sync.Mutex
		peak = before
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(exportSample)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s := sampleMemory()
				mu.Lock()
				peak.heap, peak.rss = max(peak.heap, s.heap), max(peak.rss, s.rss)
				mu.Unlock()
			}
		}
	}()
	start := time.Now()
	bytesRead, lines, err := rb.readExport(ctx)
	d := time.Since(start)
	close(done)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("export of %d findings: %w", rb.loaded, err)
	}
	// The array's opening and closing lines, and one line a record.
	if records := lines - 2; records != rb.loaded {
		return fmt.Errorf("the export holds %d records; the tenant %d", records, rb.loaded)
	}
	mib := func(b uint64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	fmt.Printf("\n%s: export of %d findings (OCSF, the history) through the REST API: %.2f GiB in %.0f s (%.0f findings/s)\n",
		rb.engine, rb.loaded, float64(bytesRead)/(1<<30), d.Seconds(), float64(rb.loaded)/d.Seconds())
	fmt.Printf("%s: export memory: Go heap peak %s (%s before; +%s), RSS peak %s (%s before); the process's max RSS over the whole run %s\n",
		rb.engine, mib(peak.heap), mib(before.heap), mib(peak.heap-min(peak.heap, before.heap)), mib(peak.rss), mib(before.rss), mib(maxRSS()))
	return nil
}

// readExport reads the export to its end, counting bytes and lines: the
// generated records are one line each.
func (rb *readBench) readExport(ctx context.Context) (int64, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rb.api+"/findings/export?format=ocsf", nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Api-Key "+rb.key)
	// An export takes as long as it takes: no whole-request timeout.
	resp, err := (&http.Client{}).Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1000))
		return 0, 0, fmt.Errorf("%s: %s", resp.Status, b)
	}
	var n int64
	lines := 0
	r := bufio.NewReaderSize(resp.Body, 1<<20)
	buf := make([]byte, 1<<20)
	for {
		k, err := r.Read(buf)
		n += int64(k)
		lines += bytes.Count(buf[:k], []byte{'\n'})
		if err == io.EOF {
			return n, lines, nil
		}
		if err != nil {
			return n, lines, err
		}
	}
}
