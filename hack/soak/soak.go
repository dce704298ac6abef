package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/demo"
	"github.com/posture-dev/posture/internal/localsystem"
	"github.com/posture-dev/posture/internal/reportgen"
	"github.com/posture-dev/posture/internal/restapi"
)

// Config is one soak run.
type Config struct {
	// Load is how long the mixed load runs; the drain and the checks come
	// after it.
	Load time.Duration
	// Seed makes the run's choices (sizes, kinds, kill moments) repeatable.
	Seed uint64
	// BinDir holds the manager and mcp-server binaries.
	BinDir string
	// Dir receives the system's log (soak.log), its kubeconfig and pid
	// files.
	Dir string
	// Short is the make test version: smaller reports, a smaller upload
	// limit, one kill.
	Short bool
	// Out receives the progress and the report.
	Out io.Writer
}

// Result is what a run found.
type Result struct {
	// Problems are the checks that failed and the answers nobody expected;
	// a run without any is green.
	Problems []string
	// Kills is how often the manager was killed.
	Kills int
}

// The tenants the soak loads: three with a subscription (each billed for
// the four accounts its reports name, within a limit of five) and one
// without. Ended ingestions are kept, so every one can be checked at the
// end.
const (
	tenantsWithSubscription = 3
	accountsPerTenant       = 4
)

var tenantNames = []string{"acme", "globex", "initech"}

func soakTenants() []demo.Tenant {
	keep := &posturev1.IngestionHistory{MaxCount: ptr.To[int32](1 << 20), MaxAge: &metav1.Duration{}}
	var out []demo.Tenant
	for _, name := range tenantNames[:tenantsWithSubscription] {
		out = append(out, demo.Tenant{
			Name:             name,
			Subscription:     posturev1.Subscription{Active: true, Plan: "soak", ProviderLimit: accountsPerTenant + 1},
			IngestionHistory: keep,
			Users: []demo.User{
				{Email: "admin@" + name + ".soak.posture.dev", Role: "admin", Key: name + "-admin"},
				{Email: "viewer@" + name + ".soak.posture.dev", Role: "viewer", Key: name + "-viewer"},
				// The MCP client's key: its calls fan out into several API
				// calls, which get a rate limit bucket of their own.
				{Email: "agent@" + name + ".soak.posture.dev", Role: "admin", Key: name + "-agent"},
			},
		})
	}
	return append(out, demo.Tenant{Name: "nosub", Subscription: posturev1.Subscription{}, Users: []demo.User{
		{Email: "admin@nosub.soak.posture.dev", Role: "admin", Key: "nosub-admin"},
	}})
}

// accountOf is tenant ti's account k: twelve digits no other tenant's
// account, uuid or timestamp holds, so a body naming it shows whose data
// it is.
func accountOf(ti, k int) string { return fmt.Sprintf("7%d0%d9%d0%d3%d5%d", ti, k, ti, k, ti, k) }

// tenant is one loaded tenant: its credentials, its generator, and the
// model of what it uploaded and what its reads may show.
type tenant struct {
	idx      int
	name, ns string
	accounts []string
	gen      *reportgen.Generator
	admin    demo.Credentials
	viewer   demo.Credentials
	agent    demo.Credentials
	// kubeUser is the Kubernetes user bound to view and edit in ns.
	kubeUser string
	// Each credential's rate limit bucket on the server is paced on this
	// side, below the server's limit: the soak measures work, not 429s.
	adminPace, viewerPace, userPace, agentPace *rate.Limiter

	mu   sync.Mutex
	next int // next record index of the generator
	// uploads are every upload, in the order sent; byID the accepted
	// ones by ingestion id.
	uploads []*upload
	byID    map[string]*upload
	// seenIngestions are ingestion ids any read showed this tenant.
	seenIngestions map[string]string // id → where
	// Recent ids of the tenant's objects, for reads and for other tenants'
	// probes.
	findingIDs, scanIDs, providerIDs recent
	// access and refresh are the admin's latest sign-in.
	access, refresh string
}

// recent keeps the last ids seen.
type recent struct{ ids []string }

func (r *recent) add(ids ...string) {
	for _, id := range ids {
		if id == "" {
			continue
		}
		if len(r.ids) >= 200 {
			r.ids = r.ids[1:]
		}
		r.ids = append(r.ids, id)
	}
}

func (r *recent) pick(rng *rand.Rand) string {
	if len(r.ids) == 0 {
		return ""
	}
	return r.ids[rng.IntN(len(r.ids))]
}

// reserve takes n record indexes of the tenant's generator.
func (t *tenant) reserve(n int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	from := t.next
	t.next += n
	return from
}

func (t *tenant) ownsAccount(s string) bool {
	for _, a := range t.accounts {
		if s == a {
			return true
		}
	}
	return false
}

// namesOwnAccount tells whether a finding uid names one of the tenant's
// accounts (generated uids carry their record's account).
func (t *tenant) namesOwnAccount(uid string) bool {
	for _, a := range t.accounts {
		if strings.Contains(uid, "-"+a+"-") {
			return true
		}
	}
	return false
}

func (t *tenant) saw(id, where string) {
	if id == "" {
		return
	}
	t.mu.Lock()
	if _, ok := t.seenIngestions[id]; !ok {
		t.seenIngestions[id] = where
	}
	t.mu.Unlock()
}

// world is everything the load's goroutines share.
type world struct {
	cfg     Config
	sys     *localsystem.System
	dsn     string
	api     *restapi.Client
	hc      *http.Client
	kube    *rest.Config
	tenants []*tenant
	nosub   demo.Credentials
	rec     *recorder
	outages *outages
	probs   *problems
	// maxUpload is the manager's --max-upload-bytes.
	maxUpload int64
	rss       *rssLog
	// followers are the goroutines following accepted ingestions.
	followers sync.WaitGroup
	start     time.Time
	seedMu    sync.Mutex
	seedRng   *rand.Rand
	killMu    sync.Mutex
	kills     []kill
}

// rng is a goroutine's own source, drawn from the run's seed.
func (w *world) rng() *rand.Rand {
	w.seedMu.Lock()
	defer w.seedMu.Unlock()
	return rand.New(rand.NewPCG(w.seedRng.Uint64(), w.seedRng.Uint64()))
}

func (w *world) since() time.Duration { return time.Since(w.start).Round(time.Second) }

func (w *world) logf(format string, args ...any) {
	fmt.Fprintf(w.cfg.Out, "soak %6s  %s\n", w.since(), fmt.Sprintf(format, args...))
}

// Run brings the system up, loads it for cfg.Load, drains, checks and
// reports. An error is the system failing to start or stop; a failed check
// is a problem in the result.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	logPath := filepath.Join(cfg.Dir, "soak.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	w := &world{cfg: cfg, outages: &outages{}, probs: &problems{},
		seedRng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}
	w.rec = newRecorder(w.outages)
	w.start = time.Now()
	fmt.Fprintf(cfg.Out, "soak: seed %d, load %s; the system's log is %s\n", cfg.Seed, cfg.Load, logPath)
	fmt.Fprintf(cfg.Out, "soak: machine: %d CPUs (GOMAXPROCS %d), %s, %s/%s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), memTotal(), runtime.GOOS, runtime.GOARCH)

	stop, err := w.startSystem(ctx, logFile)
	if err != nil {
		return nil, err
	}
	defer stop()

	res := &Result{}
	w.start = time.Now()
	w.rec.start = w.start
	loadCtx, endLoad := context.WithTimeout(ctx, cfg.Load)
	defer endLoad()
	var load sync.WaitGroup
	goLoad := func(f func(context.Context)) {
		load.Add(1)
		go func() { defer load.Done(); f(loadCtx) }()
	}
	w.rss = &rssLog{}
	rssCtx, stopRSS := context.WithCancel(ctx)
	rssDone := make(chan struct{})
	go func() { defer close(rssDone); w.sampleRSS(rssCtx) }()
	for _, t := range w.tenants {
		goLoad(func(ctx context.Context) { w.uploader(ctx, t) })
		goLoad(func(ctx context.Context) { w.restReader(ctx, t) })
		goLoad(func(ctx context.Context) { w.kubeReader(ctx, t) })
		goLoad(func(ctx context.Context) { w.mcpCaller(ctx, t) })
	}
	goLoad(w.watchAPIService)
	goLoad(w.signIns)
	goLoad(w.crossTenant)
	goLoad(w.progress)
	kills := make(chan int, 1)
	goLoad(func(ctx context.Context) { kills <- w.killer(ctx) })
	load.Wait()
	res.Kills = <-kills
	loadTook := time.Since(w.start)
	w.logf("load over after %s; draining: waiting for every accepted ingestion to end", loadTook.Round(time.Second))

	drainCtx, endDrain := context.WithTimeout(ctx, drainTimeout(cfg))
	defer endDrain()
	drainStart := time.Now()
	waitGroup(drainCtx, &w.followers)
	checks := w.check(drainCtx)
	w.checkLogs(logPath)
	drainTook := time.Since(drainStart)
	stopRSS()
	<-rssDone

	w.report(loadTook, drainTook, checks, res.Kills)
	_, unexpected := w.rec.counts()
	res.Problems = append(res.Problems, w.probs.list()...)
	if unexpected > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d answers nobody expected (see the table above)", unexpected))
	}
	return res, nil
}

// drainTimeout bounds the wait for the last ingestions and the checks.
func drainTimeout(cfg Config) time.Duration {
	return max(5*time.Minute, cfg.Load)
}

func waitGroup(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// sleep waits d or until ctx ends, and tells whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// jitter is d give or take a half.
func jitter(rng *rand.Rand, d time.Duration) time.Duration {
	return d/2 + time.Duration(rng.Int64N(int64(d)))
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "memory unknown"
	}
	var kb int64
	for _, line := range strings.Split(string(b), "\n") {
		if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
			return fmt.Sprintf("%.1f GiB RAM", float64(kb)/(1<<20))
		}
	}
	return "memory unknown"
}

// problems are failed checks, by kind, with the first examples of each.
type problems struct {
	mu      sync.Mutex
	order   []string
	n       map[string]int
	samples map[string][]string
}

func (p *problems) add(kind, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n, p.samples = map[string]int{}, map[string][]string{}
	}
	if p.n[kind] == 0 {
		p.order = append(p.order, kind)
	}
	p.n[kind]++
	if len(p.samples[kind]) < 10 {
		p.samples[kind] = append(p.samples[kind], fmt.Sprintf(format, args...))
	}
}

func (p *problems) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, k := range p.order {
		out = append(out, fmt.Sprintf("%s: %d, e.g. %s", k, p.n[k], strings.Join(p.samples[k], "; ")))
	}
	return out
}
