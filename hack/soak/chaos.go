package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/posture-dev/posture/internal/localsystem"
	"github.com/posture-dev/posture/internal/supervise"
	"github.com/posture-dev/posture/internal/testenv"
)

// kill is one kill -9 of the manager and its recovery.
type kill struct {
	at time.Duration // since the load began
	// serving is when the new manager answered /healthz, available when
	// kube-apiserver read its APIService Available again.
	serving, available time.Duration
}

// killer kill -9's the manager at random moments, and the supervisor
// restarts it as make dev's does. A kill comes at least HealthyRun after
// the last restart, so the supervisor never takes the kills for a crash
// loop. It returns how many kills it made.
func (w *world) killer(ctx context.Context) int {
	rng := w.rng()
	var next time.Duration
	if w.cfg.Short {
		// One kill, in the middle of the load.
		next = w.cfg.Load/4 + time.Duration(rng.Int64N(int64(w.cfg.Load/3)))
	} else {
		next = 20*time.Second + time.Duration(rng.Int64N(int64(40*time.Second)))
	}
	n := 0
	for {
		if !sleep(ctx, next-time.Since(w.start)) {
			return n
		}
		pid := w.sys.Programs.PID(localsystem.ManagerName)
		killed := time.Now()
		span := w.outages.begin(killed)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			w.probs.add("kill", "kill -9 %d: %v", pid, err)
			w.outages.end(span, time.Now())
			return n
		}
		n++
		k := kill{at: killed.Sub(w.start)}
		// Recovery is waited for whatever the load does: an outage left
		// open would excuse every failure after it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
		k.serving, k.available = w.awaitRecovery(rctx, pid, killed)
		cancel()
		w.outages.end(span, time.Now().Add(5*time.Second))
		w.killMu.Lock()
		w.kills = append(w.kills, k)
		w.killMu.Unlock()
		w.logf("kill -9 of the manager (pid %d): serving again after %s, its APIService available after %s",
			pid, k.serving.Round(10*time.Millisecond), k.available.Round(10*time.Millisecond))
		if w.cfg.Short {
			<-ctx.Done()
			return n
		}
		// The next kill after the supervisor counts this run as healthy.
		next = time.Since(w.start) + supervise.HealthyRun + 5*time.Second + time.Duration(rng.Int64N(int64(60*time.Second)))
	}
}

// awaitRecovery waits for a new manager to serve, then for kube-apiserver
// to find its aggregated API available again.
func (w *world) awaitRecovery(ctx context.Context, old int, killed time.Time) (serving, available time.Duration) {
	for ctx.Err() == nil {
		if pid := w.sys.Programs.PID(localsystem.ManagerName); pid != old && pid != 0 {
			if resp, err := http.Get(w.sys.APIURL + "/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					serving = time.Since(killed)
					break
				}
			}
		}
		sleep(ctx, 50*time.Millisecond)
	}
	for ctx.Err() == nil {
		if apiServiceAvailable(ctx, w.sys.Admin) {
			// Found again by a request through it, not only by its
			// status: the status may still read Available from before.
			status, _, err := w.kubeDoAs(ctx, w.tenants[0].kubeUser, http.MethodGet, dataPath(w.tenants[0].ns, "scans")+"?limit=1", "application/json", nil)
			if err == nil && status == 200 {
				return serving, time.Since(killed)
			}
		}
		sleep(ctx, 100*time.Millisecond)
	}
	w.probs.add("kill", "the manager killed at %s had not recovered 3 minutes later", killed.Sub(w.start).Round(time.Second))
	return serving, time.Since(killed)
}

func apiServiceAvailable(ctx context.Context, c client.Client) bool {
	ok, _ := apiServiceCondition(ctx, c)
	return ok
}

// apiServiceCondition is the APIService's Available condition: whether
// kube-apiserver routes to the aggregated API, and if not, why.
func apiServiceCondition(ctx context.Context, c client.Client) (bool, string) {
	api := testenv.APIService("", nil)
	if err := c.Get(ctx, client.ObjectKeyFromObject(api), api); err != nil {
		return false, err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(api.Object, "status", "conditions")
	for _, cond := range conds {
		if m, _ := cond.(map[string]any); m["type"] == "Available" {
			return m["status"] == "True", fmt.Sprintf("%v: %v", m["reason"], m["message"])
		}
	}
	return false, "no Available condition"
}

// watchAPIService notes when kube-apiserver judges the aggregated API
// unavailable: it answers 503 for it then, after a kill and also when its
// probe of a busy manager times out. Those 503s are kube-apiserver's
// judgement, not the manager's answers; the report lists the spans.
func (w *world) watchAPIService(ctx context.Context) {
	open := -1
	for sleep(ctx, time.Second) {
		ok, why := apiServiceCondition(ctx, w.sys.Admin)
		if ctx.Err() != nil {
			break
		}
		switch {
		case !ok && open < 0:
			// It was read available a second ago at most.
			open = w.outages.beginSpan(span{from: time.Now().Add(-time.Second), kubeOnly: true, why: why})
		case ok && open >= 0:
			w.outages.end(open, time.Now())
			open = -1
		}
	}
	if open >= 0 {
		w.outages.end(open, time.Now())
	}
}

// rssLog is the manager's resident memory over time.
type rssLog struct {
	mu      sync.Mutex
	samples []rssSample
}

type rssSample struct {
	at       time.Duration
	pid      int
	kib, mcp int64
}

// sampleRSS reads the manager's (and the MCP server's) VmRSS every two
// seconds.
func (w *world) sampleRSS(ctx context.Context) {
	for {
		pid := w.sys.Programs.PID(localsystem.ManagerName)
		if kib := vmRSS(pid); kib > 0 {
			w.rss.mu.Lock()
			w.rss.samples = append(w.rss.samples, rssSample{at: time.Since(w.start), pid: pid, kib: kib,
				mcp: vmRSS(w.sys.Programs.PID(localsystem.MCPServerName))})
			w.rss.mu.Unlock()
		}
		if !sleep(ctx, 2*time.Second) {
			return
		}
	}
}

func vmRSS(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// writeRSS prints the manager's RSS over time: the highest sample of each
// interval, with the kills that fell in it.
func (w *world) writeRSS(out io.Writer, load time.Duration) {
	w.rss.mu.Lock()
	samples := append([]rssSample(nil), w.rss.samples...)
	w.rss.mu.Unlock()
	if len(samples) == 0 {
		return
	}
	step := 30 * time.Second
	if load < 5*time.Minute {
		step = 10 * time.Second
	}
	fmt.Fprintf(out, "| from | manager RSS MiB (highest) | MCP server RSS MiB | manager pid | kills |\n|---|---:|---:|---|---|\n")
	var peak, last rssSample
	for from := time.Duration(0); from <= samples[len(samples)-1].at; from += step {
		var top rssSample
		pids := map[int]bool{}
		for _, s := range samples {
			if s.at >= from && s.at < from+step {
				if s.kib > top.kib {
					top = s
				}
				pids[s.pid] = true
			}
		}
		if top.kib == 0 {
			continue
		}
		var killed []string
		for _, k := range w.killsSoFar() {
			if k.at >= from && k.at < from+step {
				killed = append(killed, fmt.Sprintf("kill -9 at %s", k.at.Round(time.Second)))
			}
		}
		ps := make([]string, 0, len(pids))
		for p := range pids {
			ps = append(ps, strconv.Itoa(p))
		}
		fmt.Fprintf(out, "| %s | %.0f | %.0f | %s | %s |\n", from, float64(top.kib)/1024, float64(top.mcp)/1024, strings.Join(ps, ", "), strings.Join(killed, ", "))
		if top.kib > peak.kib {
			peak = top
		}
	}
	last = samples[len(samples)-1]
	fmt.Fprintf(out, "\nmanager RSS: peak %.0f MiB at %s, last %.0f MiB\n", float64(peak.kib)/1024, peak.at.Round(time.Second), float64(last.kib)/1024)
}

// progress prints a line every half minute (every ten seconds in the
// short run).
func (w *world) progress(ctx context.Context) {
	every := 30 * time.Second
	if w.cfg.Short {
		every = 15 * time.Second
	}
	for sleep(ctx, every) {
		total, unexpected := w.rec.counts()
		accepted, refused, unknown, records := 0, 0, 0, 0
		for _, t := range w.tenants {
			t.mu.Lock()
			for _, u := range t.uploads {
				u.mu.Lock()
				switch u.state {
				case stateAccepted:
					accepted++
					if u.ended {
						records += u.spec.valid()
					}
				case stateRefused:
					refused++
				case stateUnknown:
					unknown++
				}
				u.mu.Unlock()
			}
			t.mu.Unlock()
		}
		w.rss.mu.Lock()
		var rss int64
		if n := len(w.rss.samples); n > 0 {
			rss = w.rss.samples[n-1].kib
		}
		w.rss.mu.Unlock()
		w.logf("%d calls (%.0f/s), %d unexpected; uploads: %d accepted (%d valid records ingested), %d refused, %d without an answer; manager RSS %.0f MiB, %d kills",
			total, float64(total)/time.Since(w.start).Seconds(), unexpected, accepted, records, refused, unknown, float64(rss)/1024, len(w.killsSoFar()))
	}
}

func (w *world) killsSoFar() []kill {
	w.killMu.Lock()
	defer w.killMu.Unlock()
	return append([]kill(nil), w.kills...)
}
