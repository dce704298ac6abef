package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// call is one request's outcome.
type call struct {
	op    string
	start time.Time
	took  time.Duration
	// status is the HTTP status, 0 when no answer came (err says why).
	status int
	// code is the error's code (JSON:API errors[].code, a Kubernetes
	// Status reason, an MCP tool error's code).
	code string
	err  error
	// want are the statuses the caller expects; anything else is
	// unexpected unless a restart of the manager explains it.
	want []int
	// what says what was asked, for the report of unexpected answers.
	what string
}

// recorder keeps every call: latencies per operation, answers by status
// and code, and what nobody expected.
type recorder struct {
	start   time.Time
	outages *outages

	mu         sync.Mutex
	ops        map[string]*opStats
	codes      map[string]int
	unexpected []string
	nUnexp     int
	nRestart   int
}

type opStats struct {
	n       int
	lat     []time.Duration
	answers map[string]int
}

func newRecorder(o *outages) *recorder {
	return &recorder{start: time.Now(), outages: o, ops: map[string]*opStats{}, codes: map[string]int{}}
}

// record files c and tells whether it got one of the answers wanted.
func (r *recorder) record(c call) bool {
	label := answerLabel(c)
	wanted := c.status != 0 && slices.Contains(c.want, c.status)
	restart := false
	if !wanted && restartRelated(c) && r.outages.overlaps(c.start, c.start.Add(c.took), throughKube(c.op)) {
		restart = true
		label = "restart: " + label
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.ops[c.op]
	if s == nil {
		s = &opStats{answers: map[string]int{}}
		r.ops[c.op] = s
	}
	s.n++
	s.answers[label]++
	if c.status != 0 && !restart {
		s.lat = append(s.lat, c.took)
	}
	if c.status < 200 || c.status > 299 {
		r.codes[label]++
	}
	switch {
	case wanted:
	case restart:
		r.nRestart++
	default:
		r.nUnexp++
		if len(r.unexpected) < 50 {
			detail := ""
			if c.err != nil {
				detail = ": " + c.err.Error()
			}
			r.unexpected = append(r.unexpected, fmt.Sprintf("%s at %s: %s, want %v (%s)%s",
				c.op, c.start.Sub(r.start).Round(time.Millisecond), label, c.want, c.what, detail))
		}
	}
	return wanted
}

// answerLabel names an answer: "200", "404 not_found", "no answer
// (connection refused)".
func answerLabel(c call) string {
	if c.status == 0 {
		return "no answer (" + errClass(c.err) + ")"
	}
	if c.code != "" {
		return fmt.Sprintf("%d %s", c.status, c.code)
	}
	return fmt.Sprint(c.status)
}

// errClass is a transport error's kind, without addresses.
func errClass(err error) string {
	var op *net.OpError
	switch {
	case err == nil:
		return "none"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EPIPE):
		return "broken pipe"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "EOF"
	case errors.As(err, &op) && op.Timeout():
		return "timeout"
	case strings.Contains(err.Error(), "deadline exceeded"), strings.Contains(err.Error(), "Timeout"):
		return "timeout"
	case strings.Contains(err.Error(), "connection refused"):
		return "connection refused"
	case strings.Contains(err.Error(), "EOF"):
		return "EOF"
	case strings.Contains(err.Error(), "reset by peer"):
		return "connection reset"
	}
	return "other"
}

// restartRelated is what a killed manager answers: nothing, or, through
// kube-apiserver or the MCP server, that the backend is gone.
func restartRelated(c call) bool {
	switch c.status {
	case 0, 502, 503, 504:
		return true
	}
	return false
}

// throughKube tells whether an operation goes through kube-apiserver.
func throughKube(op string) bool {
	return strings.Contains(op, "kube.")
}

// outages are the spans in which the manager was down: from a kill until
// it served again (and kube-apiserver found its aggregated API again), and
// a grace period after; and those in which kube-apiserver judged the
// aggregated API unavailable, which excuse only its own 503s.
type outages struct {
	mu    sync.Mutex
	spans []span
}

type span struct {
	from, to time.Time // to is zero while open
	// kubeOnly marks kube-apiserver's judgement rather than a kill.
	kubeOnly bool
	why      string
}

func (o *outages) begin(t time.Time) int { return o.beginSpan(span{from: t}) }

func (o *outages) beginSpan(s span) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.spans = append(o.spans, s)
	return len(o.spans) - 1
}

func (o *outages) end(i int, t time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.spans[i].to = t
}

// overlaps tells whether a call that ran from a to b met an outage; kube
// says it went through kube-apiserver.
func (o *outages) overlaps(a, b time.Time, kube bool) bool {
	if o == nil {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.spans {
		if s.kubeOnly && !kube {
			continue
		}
		if !b.Before(s.from) && (s.to.IsZero() || !a.After(s.to)) {
			return true
		}
	}
	return false
}

func (o *outages) list() []span {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]span(nil), o.spans...)
}

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.0f", d.Seconds()*1000)
	case d >= 100*time.Millisecond:
		return fmt.Sprintf("%.0f", float64(d)/1e6)
	}
	return fmt.Sprintf("%.1f", float64(d)/1e6)
}

// writeOps prints a table of the operations: calls, rate, p50/p95/p99 of
// the answered calls, and the answers.
func (r *recorder) writeOps(w io.Writer, load time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.ops))
	total := 0
	for name, s := range r.ops {
		names = append(names, name)
		total += s.n
	}
	sort.Strings(names)
	fmt.Fprintf(w, "| operation | calls | calls/s | p50 ms | p95 ms | p99 ms | answers |\n|---|---:|---:|---:|---:|---:|---|\n")
	for _, name := range names {
		s := r.ops[name]
		lat := slices.Clone(s.lat)
		slices.Sort(lat)
		fmt.Fprintf(w, "| %s | %d | %.2f | %s | %s | %s | %s |\n", name, s.n, float64(s.n)/load.Seconds(),
			ms(percentile(lat, .50)), ms(percentile(lat, .95)), ms(percentile(lat, .99)), answers(s.answers))
	}
	fmt.Fprintf(w, "| **all** | %d | %.1f | | | | |\n", total, float64(total)/load.Seconds())
}

func answers(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// writeCodes prints every answer that was not a success, by status and
// code, over all operations.
func (r *recorder) writeCodes(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.codes))
	for k := range r.codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "| answer | count |\n|---|---:|\n")
	for _, k := range keys {
		fmt.Fprintf(w, "| %s | %d |\n", k, r.codes[k])
	}
	fmt.Fprintf(w, "\n%d answers no caller expected; %d failures explained by a manager restart.\n", r.nUnexp, r.nRestart)
	for _, u := range r.unexpected {
		fmt.Fprintf(w, "  unexpected: %s\n", u)
	}
}

func (r *recorder) counts() (total, unexpected int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.ops {
		total += s.n
	}
	return total, r.nUnexp
}
