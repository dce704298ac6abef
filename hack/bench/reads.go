package main

// The read phase (make bench; -read-sizes): how the findings reads answer
// through the REST API as a tenant's findings grow.
//
// For each engine, one database grows to each size in turn. The findings
// are the ingestion phase's generated records, written by the real worker
// (ingest.Worker, in process) from reports stored as blobs, in reports of
// at most loadReport records, each a separate ingestion, so the rows,
// scans and summary are exactly what uploads would leave. At each size,
// every documented query shape is requested over loopback HTTP from the
// real API handler, timed, and compared with the smallest size.
//
// Ingestion into a full table is measured the same way: after each size's
// reads, a probe report of probeRecords records goes through the worker
// into the database and into an empty one, in pairs (probePairs). By
// default each pair's probes write to a new tenant of their own, so they
// measure the size of the table alone and do not change what the reads
// read; -probe-into loaded writes them to the loaded tenant instead.
//
// With -read-hold, the database at the last size and the API server stay
// up after the tables, for EXPLAIN and requests by hand (hold).

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/reportgen"
	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/engines"
	"github.com/posture-dev/posture/webhook"
)

const (
	// loadReport is the largest report the load writes at once: its blob
	// (about 2.2 KB a record) is deleted once ingested, so the disk holds
	// one report at a time besides the findings.
	loadReport = 250_000
	// firstReport is the size of the load's first report, whatever the first
	// size: the shapes name its ingestion and its oldest scan, so they read
	// the same 10,000 findings (2,500 a scan) in every run and at every size,
	// and a ratio between two sizes or two runs is the tenant's growth alone.
	firstReport = 10_000
	// probeRecords is the size of the report whose ingestion is timed into
	// the empty database and into each size.
	probeRecords = 20_000
	// readRequests are timed per shape and size, after readWarmup untimed.
	readRequests = 20
	readWarmup   = 2
	// shapeBudget stops a shape early when its requests are this slow
	// (after at least 3, and one warm-up); the table then says how many
	// were timed.
	shapeBudget = 15 * time.Second
	// rareSearchRecord is the loaded record whose whole uid the rare
	// search looks for: among the first report's, so there at every size.
	rareSearchRecord = 7
)

// groupedSearchException is why grouped counts under a common search may
// grow with the tenant: they count the first 1,001 matches, and finding
// them costs what the word's candidates in the trigram index cost
// (docs/performance.md, "Not done yet"; decision 0013, amendments).
const groupedSearchException = "grouped counts under a common search: exact to 1,000 matches, a labelled lower bound past that (documented)"

// readShape is one request of the read phase.
type readShape struct {
	name  string
	path  string // under /api/v1
	query string
	// cursorAt, when set, places page[cursor] after the finding at this
	// fraction of the listing (0.5: the middle; 1: just before the end).
	cursorAt float64
	// then are requests made after this one and timed with it: an
	// overview is several.
	then []readShape
	// exception, when set, says why this shape's growth is accepted: the
	// documented exceptions to the flat reads, which -check does not hold
	// to its bound.
	exception string
}

// readResult is a shape's timings at one size.
type readResult struct {
	p50, p95 time.Duration
	n        int
}

// readBench is one engine's database, growing through the sizes.
type readBench struct {
	*bench
	gen    *reportgen.Generator
	api    string
	key    string
	http   *http.Client
	loaded int // findings stored in the read tenant
	probed int // findings this run's probes stored in tenants of their own
	runs   int // ingestions made
	pairs  int // probe pairs made
	// probeInto is where probes write: probeIntoNew or probeIntoLoaded.
	probeInto string
	// runTag sets apart the ingestion ids of a run on a held database from
	// those of the run that loaded it.
	runTag string
	// firstIngestion and oldestScan are what the ingestion and scan
	// filters name: the read tenant's first ingestion and its scan of
	// reportgen.Accounts[0]. Both hold the same findings at every size (the first
	// report's), so their shapes grow only with what else the tenant holds.
	firstIngestion, oldestScan string
}

// readOutcome is what the read phase measured on one engine.
type readOutcome struct {
	engine  string
	sizes   []int
	shapes  []readShape
	results map[int]map[string]readResult
}

// ratio is a shape's p95 at the largest size over its p95 at the smallest.
func (o readOutcome) ratio(shape string) float64 {
	first, last := o.results[o.sizes[0]][shape], o.results[o.sizes[len(o.sizes)-1]][shape]
	return float64(last.p95) / float64(max(first.p95, time.Microsecond))
}

// runReads runs the read phase on b's engine. With retime set, a shape
// whose ratio at the largest size passes retime is timed once more at that
// size, and the lower p95 kept: one stall of the shared machine during a
// shape's 20 requests would otherwise decide -check.
func runReads(ctx context.Context, b *bench, gen *reportgen.Generator, sizes []int, probes int, probeInto string, hold bool, retime float64) (readOutcome, error) {
	out, err := runReadsOn(ctx, b, gen, sizes, probes, probeInto, hold, retime)
	out.engine = b.engine
	return out, err
}

func runReadsOn(ctx context.Context, b *bench, gen *reportgen.Generator, sizes []int, probes int, probeInto string, hold bool, retime float64) (out readOutcome, err error) {
	if err := b.open(ctx); err != nil {
		return out, err
	}
	defer b.close()
	rb := &readBench{bench: b, gen: gen, key: "pk_bench.0123456789abcdef0123456789abcdef0123456789",
		http: &http.Client{Timeout: 5 * time.Minute}, probeInto: probeInto}
	stop, err := rb.serve()
	if err != nil {
		return out, err
	}
	defer stop()

	fmt.Printf("\n== read phase, %s: sizes %v ==\n", b.engine, sizes)
	shapes := []readShape(nil)
	results := map[int]map[string]readResult{}
	probeAt := map[int]float64{}
	for _, size := range sizes {
		if size > rb.loaded {
			start := time.Now()
			from := rb.loaded
			for rb.loaded < size {
				n := loadReport
				if rb.loaded == 0 {
					n = firstReport
				}
				if _, err := rb.ingest(ctx, tenant, min(n, size-rb.loaded)); err != nil {
					return out, fmt.Errorf("load to %d: %w", size, err)
				}
			}
			d := time.Since(start)
			fmt.Printf("%s: loaded %d findings in %.0fs (%.0f records/s, through the worker)\n", b.engine, rb.loaded-from,
				d.Seconds(), float64(rb.loaded-from)/d.Seconds())
		}
		if err := rb.settle(); err != nil {
			return out, err
		}
		// Values and positions (the middle, the last page) are the current
		// size's.
		if shapes, err = rb.shapes(ctx); err != nil {
			return out, err
		}
		fmt.Printf("%s: timing %d shapes at %d findings ...\n", b.engine, len(shapes), rb.loaded)
		if results[size], err = rb.timeShapes(ctx, shapes); err != nil {
			return out, err
		}
		if probeAt[size], err = rb.probePairs(ctx, probes); err != nil {
			return out, err
		}
	}
	out = readOutcome{sizes: sizes, shapes: shapes, results: results}
	if retime > 0 && len(sizes) > 1 {
		last := sizes[len(sizes)-1]
		for _, sh := range shapes {
			if sh.exception != "" || out.ratio(sh.name) <= retime {
				continue
			}
			again, err := rb.time(ctx, sh)
			if err != nil {
				return out, fmt.Errorf("%s at %d: %w", sh.name, rb.loaded, err)
			}
			fmt.Printf("  %s at %d, timed again (%.1f× at first): p50 %s ms, p95 %s ms\n", sh.name, rb.loaded, out.ratio(sh.name),
				ms(again.p50), ms(again.p95))
			if again.p95 < results[last][sh.name].p95 {
				results[last][sh.name] = again
			}
		}
	}
	printReads(b.engine, sizes, shapes, results)
	if exportPhase {
		if err := rb.exportMemory(ctx); err != nil {
			return out, err
		}
	}
	fmt.Printf("\n%s ingestion of %d records (worker), time relative to an empty table, median of %d pairs:", b.engine, probeRecords, probes)
	for _, size := range sizes {
		fmt.Printf(" %d: %.2f×;", size, probeAt[size])
	}
	fmt.Println()
	if hold {
		rb.hold()
	}
	return out, nil
}

// timeHeld times the read shapes against a database a held run left: the
// held run's tenants, as loaded, served by this binary's API and store.
// What the shapes name (the first ingestion, the oldest scan of
// reportgen.Accounts[0]) is read back from the findings in insertion order.
func timeHeld(ctx context.Context, engine, dsn string, probes int, probeInto string) error {
	st, err := engines.Open(ctx, engine, dsn)
	if err != nil {
		return err
	}
	defer st.Close()
	gen, err := reportgen.New()
	if err != nil {
		return err
	}
	rb := &readBench{bench: &bench{engine: engine, dsn: dsn, st: st}, gen: gen, key: "pk_bench.0123456789abcdef0123456789abcdef0123456789",
		http: &http.Client{Timeout: 5 * time.Minute}, runTag: fmt.Sprintf("%d-", time.Now().Unix()), probeInto: probeInto}
	groups, err := st.FindingCounts(ctx, tenant, store.FindingQuery{}, []string{"provider_type"})
	if err != nil {
		return err
	}
	for _, g := range groups {
		rb.loaded += g.Count
	}
	first := func(q store.FindingQuery) (store.Finding, error) {
		q.Sort, q.Page = []string{"inserted_at"}, store.Page{Number: 1, Size: 1}
		fs, _, err := st.ListFindings(ctx, tenant, q)
		if err != nil || len(fs) == 0 {
			return store.Finding{}, fmt.Errorf("no finding of tenant %q in %s (%v)", tenant, dsn, err)
		}
		return fs[0], nil
	}
	f, err := first(store.FindingQuery{})
	if err != nil {
		return err
	}
	rb.firstIngestion = f.IngestionID
	if f, err = first(store.FindingQuery{ProviderUID: reportgen.Accounts[0]}); err != nil {
		return err
	}
	rb.oldestScan = f.ScanID
	stop, err := rb.serve()
	if err != nil {
		return err
	}
	defer stop()
	shapes, err := rb.shapes(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("%s: timing %d shapes at %d findings (held database, this binary's code) ...\n", engine, len(shapes), rb.loaded)
	byShape, err := rb.timeShapes(ctx, shapes)
	if err != nil {
		return err
	}
	printReads(engine, []int{rb.loaded}, shapes, map[int]map[string]readResult{rb.loaded: byShape})
	if probes > 0 {
		ratio, err := rb.probePairs(ctx, probes)
		if err != nil {
			return err
		}
		fmt.Printf("\n%s ingestion of %d records (worker) into the held database, time relative to an empty one, median of %d pairs: %.2f×\n",
			engine, probeRecords, probes, ratio)
	}
	return nil
}

// exportPhase (-read-export) exports the largest size once and prints
// the memory it took (export.go).
var exportPhase = true

// shapeFilter, when set (-read-shapes), keeps the shapes whose names it
// matches: a change measured against a held database times what it
// changes.
var shapeFilter *regexp.Regexp

// timeShapes times each shape at the size loaded, saying each figure as
// it comes.
func (rb *readBench) timeShapes(ctx context.Context, shapes []readShape) (map[string]readResult, error) {
	out := map[string]readResult{}
	for _, s := range shapes {
		r, err := rb.time(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("%s at %d: %w", s.name, rb.loaded, err)
		}
		out[s.name] = r
		fmt.Printf("  %s at %d: p50 %s ms, p95 %s ms (%d requests)\n", s.name, rb.loaded, ms(r.p50), ms(r.p95), r.n)
	}
	return out, nil
}

// hold keeps the database and the API server up, says how to reach them
// and waits for SIGINT or SIGTERM, which ends the hold (the bench then
// drops the database and goes on) rather than the process.
func (rb *readBench) hold() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	fmt.Printf("\n== holding the %s database of %d findings (tenant %q; %d more in the probes' tenants) ==\n", rb.engine, rb.loaded, tenant, rb.probed)
	switch rb.engine {
	case "postgres":
		// pgServer's DSN names dbname=postgres, which the appended one overrides.
		fmt.Printf("DSN:  %s\n", strings.Replace(rb.pg.dsn, "dbname=postgres", "dbname="+rb.db(), 1))
		fmt.Printf("psql: psql -h '%s' -p 5432 -U postgres -d %s\n", rb.pg.socket, rb.db())
	case "sqlite":
		fmt.Printf("file: %s\n", rb.dsn)
		fmt.Printf("sqlite3 %s   (WAL mode; the bench keeps it open)\n", rb.dsn)
	}
	fmt.Printf("API:  curl -g -H 'Authorization: Api-Key %s' '%s/findings?filter[scan]=%s'\n", rb.key, rb.api, rb.oldestScan)
	fmt.Printf("search term of the rare search: %s\n", rb.gen.UID(rareSearchRecord))
	fmt.Println("Ctrl-C (SIGINT) or SIGTERM ends the hold.")
	s := <-sig
	fmt.Printf("%s: hold ended (%s)\n", rb.engine, s)
}

func printReads(engine string, sizes []int, shapes []readShape, results map[int]map[string]readResult) {
	fmt.Printf("\n%s: p50 / p95 in ms of %d requests per shape (after %d untimed) through the REST API; ratio: p95 over p95 at %d\n\n",
		engine, readRequests, readWarmup, sizes[0])
	head := "| shape |"
	rule := "|---|"
	for _, s := range sizes {
		head += fmt.Sprintf(" %s p50 / p95 |", humanCount(s))
		rule += "---|"
		if s != sizes[0] {
			head += fmt.Sprintf(" %s ratio |", humanCount(s))
			rule += "---|"
		}
	}
	fmt.Println(head)
	fmt.Println(rule)
	base := results[sizes[0]]
	worst := map[int]float64{}
	for _, sh := range shapes {
		line := "| " + sh.name + " |"
		for _, s := range sizes {
			r := results[s][sh.name]
			cell := fmt.Sprintf(" %s / %s", ms(r.p50), ms(r.p95))
			if r.n < readRequests {
				cell += fmt.Sprintf(" (%d req)", r.n)
			}
			line += cell + " |"
			if s != sizes[0] {
				ratio := float64(r.p95) / float64(max(base[sh.name].p95, time.Microsecond))
				worst[s] = max(worst[s], ratio)
				line += fmt.Sprintf(" %.1f× |", ratio)
			}
		}
		fmt.Println(line)
	}
	for _, s := range sizes[1:] {
		fmt.Printf("%s: worst p95 ratio %s / %s: %.1f×\n", engine, humanCount(s), humanCount(sizes[0]), worst[s])
	}
}

func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	if v < 10 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func humanCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// serve starts the API handler on loopback; no rate limiter wraps its
// authentication, as in upload.
func (rb *readBench) serve() (func(), error) {
	srv := &webhook.Server{
		Client: rb.k8s, APIReader: rb.k8s, Store: rb.st, Log: logr.Discard(), MaxUploadBytes: 4 << 30,
		Auth: auth.StaticKey{KeyHash: auth.HashKey(rb.key), Principal: auth.Principal{
			Tenant: tenant, Namespace: rb.ns, User: "bench", KeyPrefix: "pk_bench",
			Permissions: auth.AllPermissions(), Subscribed: true,
		}},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	rb.api = "http://" + ln.Addr().String() + "/api/v1"
	return func() { _ = hs.Close() }, nil
}

// ingest stores a report of the next n generated records as a blob, runs
// the worker over it as the manager would, deletes the blob and returns
// the worker's time.
func (rb *readBench) ingest(ctx context.Context, tn string, n int) (time.Duration, error) {
	pr, pw := io.Pipe()
	// Probes in tenants of their own take their uids far from the load's.
	from, count := rb.loaded, &rb.loaded
	if tn != tenant {
		from, count = 900_000_000+rb.probed, &rb.probed
	}
	go func() { pw.CloseWithError(rb.gen.WriteRange(pw, from, n)) }()
	blob, err := rb.st.PutBlob(ctx, tn, pr)
	if err != nil {
		return 0, err
	}
	defer func() { _ = rb.st.DeleteBlob(ctx, tn, blob.ID) }()
	rb.runs++
	id := fmt.Sprintf("reads-%s%d", rb.runTag, rb.runs)
	if rb.firstIngestion == "" && tn == tenant {
		rb.firstIngestion = id
	}
	w := &ingest.Worker{Store: rb.st, Log: logr.Discard()}
	start := time.Now()
	err = w.Run(ctx, ingest.Attempt{Tenant: tn, Namespace: rb.ns, IngestionID: id, BlobID: blob.ID, Attempt: 1, Total: n,
		ReportSHA256: blob.SHA256})
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	run, err := rb.st.GetRun(ctx, tn, id)
	if err != nil {
		return 0, err
	}
	if run.Status != store.RunSucceeded || run.Processed != n || run.Invalid != 0 {
		return 0, fmt.Errorf("run %s ended %s with %d processed, %d invalid (%s); want %d valid", id, run.Status, run.Processed, run.Invalid, run.Message, n)
	}
	*count += n
	if rb.oldestScan == "" && tn == tenant {
		scans, _, err := rb.st.ListScans(ctx, tenant, store.ScanQuery{ProviderUID: reportgen.Accounts[0], Page: store.Page{Number: 1, Size: 1}})
		if err != nil {
			return 0, err
		}
		if len(scans) != 1 {
			return 0, fmt.Errorf("ingestion %s left %d scans of account %s", id, len(scans), reportgen.Accounts[0])
		}
		rb.oldestScan = scans[0].ID
	}
	return d, nil
}

// settle does what a database left alone after a load would have done by
// itself: on PostgreSQL, autovacuum's VACUUM and ANALYZE (statistics for
// the planner, the visibility map for index-only scans). SQLite keeps the
// statistics its migrations wrote, as a deployed store does.
func (rb *readBench) settle() error {
	if rb.engine != "postgres" {
		return nil
	}
	return rb.pg.psql(rb.db(), "VACUUM (ANALYZE)")
}

// get requests path?query and returns the decoded document.
func (rb *readBench) get(ctx context.Context, path, query string) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rb.api+path+"?"+query, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Api-Key "+rb.key)
	req.Header.Set("Accept", "application/vnd.api+json")
	resp, err := rb.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s?%s: %d %s", path, query, resp.StatusCode, body)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("GET %s?%s: %w", path, query, err)
	}
	return doc, nil
}

// shapes lists the timed requests, with values taken from the data: the
// most common check and region; and the oldest scan, the first ingestion
// and a loaded record's uid, the same at every size.
func (rb *readBench) shapes(ctx context.Context) ([]readShape, error) {
	top := func(dim string) (string, error) {
		doc, err := rb.get(ctx, "/findings/counts", "group_by="+dim)
		if err != nil {
			return "", err
		}
		best, most := "", -1.0
		for _, g := range doc["data"].([]any) {
			attrs := g.(map[string]any)["attributes"].(map[string]any)
			if n := attrs["count"].(float64); n > most {
				best, most = attrs[dim].(string), n
			}
		}
		return best, nil
	}
	check, err := top("check_id")
	if err != nil {
		return nil, err
	}
	region, err := top("region")
	if err != nil {
		return nil, err
	}
	if rb.oldestScan == "" || rb.firstIngestion == "" {
		return nil, errors.New("nothing loaded into the read tenant")
	}
	q := func(kv ...string) string {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v.Encode()
	}
	f := "/findings"
	shapes := []readShape{
		{name: "default list", path: f},
		{name: "filter severity", path: f, query: q("filter[severity]", "critical")},
		{name: "filter severity__in", path: f, query: q("filter[severity__in]", "critical,high")},
		{name: "filter status_code", path: f, query: q("filter[status_code]", "FAIL")},
		{name: "filter provider_type", path: f, query: q("filter[provider_type]", "aws")},
		{name: "filter provider_uid", path: f, query: q("filter[provider_uid]", reportgen.Accounts[1])},
		{name: "filter check_id", path: f, query: q("filter[check_id]", check)},
		{name: "filter region", path: f, query: q("filter[region]", region)},
		{name: "filter scan", path: f, query: q("filter[scan]", rb.oldestScan)},
		{name: "filter ingestion", path: f, query: q("filter[ingestion]", rb.firstIngestion)},
		{name: "filter region + provider_type", path: f, query: q("filter[region]", region, "filter[provider_type]", "aws")},
		{name: "filter severity__in + status_code + provider_uid", path: f,
			query: q("filter[severity__in]", "critical,high", "filter[status_code]", "FAIL", "filter[provider_uid]", reportgen.Accounts[2])},
	}
	for _, k := range []string{"time", "severity_id", "inserted_at", "check_id", "uid"} {
		shapes = append(shapes, readShape{name: "sort " + k, path: f, query: q("sort", k)},
			readShape{name: "sort -" + k, path: f, query: q("sort", "-"+k)})
	}
	shapes = append(shapes,
		readShape{name: "page[number] 501 (offset 5,000)", path: f, query: q("page[number]", "501")},
		readShape{name: "page[number] deepest: the last, or offset 10,000", path: f,
			query: q("page[number]", fmt.Sprint(min(restapi.MaxPageOffset/10+1, (rb.loaded+9)/10)))},
		readShape{name: "page[cursor] middle", path: f, cursorAt: 0.5},
		readShape{name: "page[cursor] last page", path: f, cursorAt: 1},
		readShape{name: "page[cursor] middle, sort uid", path: f, query: q("sort", "uid"), cursorAt: 0.5},
		readShape{name: "search, rare (one uid)", path: f, query: q("filter[search]", rb.gen.UID(rareSearchRecord))},
		readShape{name: "search, common (a word of many titles)", path: f, query: q("filter[search]", "bucket")},
		readShape{name: "counts by severity", path: "/findings/counts", query: q("group_by", "severity")},
		readShape{name: "counts by every dimension", path: "/findings/counts",
			query: q("group_by", strings.Join(store.CountDimensions, ","))},
		readShape{name: "counts by severity, FAIL in a region", path: "/findings/counts",
			query: q("group_by", "severity", "filter[status_code]", "FAIL", "filter[region]", region)},
		readShape{name: "counts by check, search", path: "/findings/counts", exception: groupedSearchException,
			query: q("group_by", "check_id,severity,status_code", "filter[search]", "bucket")},
		readShape{name: "overview (MCP overview + check catalogue counts)", path: "/findings/counts",
			query: q("group_by", "severity,status_code,provider_type,provider_uid"),
			then:  []readShape{{path: "/findings/counts", query: q("group_by", "check_id,severity,status_code")}}},
	)
	// The current state: the MCP tools read it by default. The latest
	// scans are the last ingestion's at every size, so these stay as
	// large as it while the history behind them grows.
	l := "/findings/latest"
	shapes = append(shapes,
		readShape{name: "latest: default list", path: l},
		readShape{name: "latest: filter severity", path: l, query: q("filter[severity]", "critical")},
		readShape{name: "latest: sort check_id", path: l, query: q("sort", "check_id")},
		readShape{name: "latest: sort severity_id", path: l, query: q("sort", "severity_id")},
		readShape{name: "latest: sort check_id, page 50", path: l, query: q("sort", "check_id", "page[number]", "50")},
		readShape{name: "latest: sort time", path: l, query: q("sort", "time")},
		readShape{name: "latest: sort uid", path: l, query: q("sort", "uid")},
		readShape{name: "latest: search, common", path: l, query: q("filter[search]", "bucket")},
		readShape{name: "latest: counts by check, search", path: l + "/counts", exception: groupedSearchException,
			query: q("group_by", "check_id,severity,status_code", "filter[search]", "bucket")},
		readShape{name: "latest: overview (MCP overview + check catalogue counts)", path: l + "/counts",
			query: q("group_by", "severity,status_code,provider_type,provider_uid"),
			then:  []readShape{{path: l + "/counts", query: q("group_by", "check_id,severity,status_code")}}},
	)
	if shapeFilter != nil {
		shapes = slices.DeleteFunc(shapes, func(s readShape) bool { return !shapeFilter.MatchString(s.name) })
	}
	for i := range shapes {
		if shapes[i].cursorAt > 0 {
			c, err := rb.cursor(ctx, shapes[i])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", shapes[i].name, err)
			}
			shapes[i].query = joinQuery(shapes[i].query, q("page[cursor]", c))
		}
	}
	return shapes, nil
}

func joinQuery(a, b string) string {
	if a == "" {
		return b
	}
	return a + "&" + b
}

// cursor builds the page[cursor] that continues s's listing after the
// finding at s.cursorAt of it. Following links.next that far would take
// a request per page; instead the API's own cursor from page 1 (for its
// binding to the filters and sort) is re-pointed at that finding, read from
// the store. This relies on the cursor's layout (webhook/cursor.go), which
// clients must not: it is opaque to them.
func (rb *readBench) cursor(ctx context.Context, s readShape) (string, error) {
	doc, err := rb.get(ctx, s.path, joinQuery(s.query, "page[size]=1"))
	if err != nil {
		return "", err
	}
	next, _ := doc["links"].(map[string]any)["next"].(string)
	u, err := url.Parse(next)
	if err != nil || next == "" {
		return "", fmt.Errorf("no links.next to take a cursor from: %q", next)
	}
	raw, err := base64.RawURLEncoding.DecodeString(u.Query().Get("page[cursor]"))
	if err != nil {
		return "", err
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) != 7 {
		return "", fmt.Errorf("unexpected cursor layout %s", raw)
	}
	var sortKeys []string
	if v, _ := url.ParseQuery(s.query); v.Get("sort") != "" {
		sortKeys = strings.Split(v.Get("sort"), ",")
	} else {
		sortKeys = []string{"-inserted_at"}
	}
	pos := max(1, int(float64(rb.loaded)*s.cursorAt)-5)
	rows, _, err := rb.st.ListFindings(ctx, tenant, store.FindingQuery{Sort: sortKeys, Page: store.Page{Number: pos, Size: 1}})
	if err != nil || len(rows) != 1 {
		return "", fmt.Errorf("finding %d in order %v: %d rows, %v", pos, sortKeys, len(rows), err)
	}
	k := store.KeyOf(&rows[0])
	b, err := json.Marshal([]any{parts[0], k.Time.UnixMicro(), k.InsertedAt.UnixMicro(), k.SeverityID, k.CheckID, k.UID, k.ID})
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// time requests s readWarmup times untimed, then up to readRequests times.
func (rb *readBench) time(ctx context.Context, s readShape) (readResult, error) {
	once := func() (time.Duration, error) {
		start := time.Now()
		for _, x := range append([]readShape{s}, s.then...) {
			if _, err := rb.get(ctx, x.path, x.query); err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}
	for i := range readWarmup {
		d, err := once()
		if err != nil {
			return readResult{}, err
		}
		if i == 0 && d > shapeBudget/10 {
			break // one warm-up of a slow shape is enough
		}
	}
	var spent time.Duration
	var ds []time.Duration
	for range readRequests {
		d, err := once()
		if err != nil {
			return readResult{}, err
		}
		ds = append(ds, d)
		spent += d
		if spent > shapeBudget && len(ds) >= 3 {
			break
		}
	}
	slices.Sort(ds)
	// Nearest rank: of 20, the 10th and the 19th.
	rank := func(p float64) time.Duration { return ds[max(0, int(p*float64(len(ds))+0.999999)-1)] }
	return readResult{p50: rank(0.5), p95: rank(0.95), n: len(ds)}, nil
}
