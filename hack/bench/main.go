// Command bench measures ingestion end to end (make bench):
//
//  1. generates scanner-shaped reports (records shaped and sized like the
//     Prowler fixtures, ~2.2 KB, unique finding uids, a few accounts);
//  2. uploads each over HTTP (multipart, streamed) to the real REST API
//     handler (webhook.Server on loopback, with a real kube-apiserver from
//     envtest and the real store) and times it;
//  3. runs the worker as a subprocess, `manager worker`, exactly as a Job
//     pod would, and reads its peak RSS (VmHWM) and CPU time from the kernel;
//  4. on PostgreSQL, times a COPY of the same records into a one-column
//     table with psql: the storage floor, and prints the ratio;
//  5. optionally uploads and parses a much larger report generated on the
//     fly (-big-mib) to show that the API server's and the worker's memory
//     do not grow with the size of the report.
//  6. the read phase (reads.go, -read-sizes): grows one database per
//     engine to each size through the worker and times every documented
//     findings query shape through the REST API, p50 and p95, and the
//     ratio to the smallest size; and ingestion into the full table
//     against ingestion into a new empty database, in pairs run back to
//     back (-read-probes; -probe-into, a new tenant for each pair or the
//     loaded one; probes.go). At the largest size, one export of every
//     finding (OCSF, through the REST API) with this process's heap and
//     RSS peak during it (export.go; -read-export=false skips it).
//     -read-hold then keeps each engine's database and API server up for
//     EXPLAIN by hand.
//
// PostgreSQL is a throwaway server (pgtest.Start: fsync off, like every
// test here), so the figures are CPU and protocol bound, not disk bound;
// -pg-shared-buffers gives it a production-sized buffer cache.
// Each report runs -repeat times, after one untimed warm-up run, and the
// table shows medians: docs/performance.md says why.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/posture-dev/posture/internal/reportgen"
	"github.com/posture-dev/posture/internal/testenv"
)

const tenant = "bench"

// options are the command's flags.
type options struct {
	sizes, engines         string
	bigMiB, repeat         int
	readSizes, readEngines string
	// pgSharedBuffers, when set, is the throwaway server's shared_buffers.
	pgSharedBuffers string
	// pgSettings are more name=value settings of the throwaway server.
	pgSettings string
	// readHold keeps each engine's read database and API server up after
	// its read phase, until interrupted.
	readHold   bool
	readDSN    string
	readProbes int
	probeInto  string
	// leaveOut selects the leave-out mode (leaveout.go): "all", or the
	// structures whose names contain it.
	leaveOut string
	// indexCosts selects the index-cost mode (indexcosts.go).
	indexCosts bool
	// check judges the run against the bounds of make bench-check.
	check bool
}

func main() {
	var o options
	flag.StringVar(&o.sizes, "records", "10000,100000", "Report sizes to run, in records.")
	flag.StringVar(&o.engines, "engines", "postgres,sqlite", "Store engines to run.")
	flag.IntVar(&o.bigMiB, "big-mib", 1024, "Size of the large report (MiB) generated on the fly for the memory run on PostgreSQL; 0 skips it.")
	flag.IntVar(&o.repeat, "repeat", 5, "Runs of each report on each engine; the table shows their medians.")
	flag.StringVar(&o.readSizes, "read-sizes", "10000,1000000", "Findings the read phase loads, in turn, before timing the findings reads through the REST API; empty skips it.")
	flag.StringVar(&o.readEngines, "read-engines", "postgres,sqlite", "Engines (among -engines) the read phase runs on.")
	flag.StringVar(&o.pgSettings, "pg-settings", "", "More settings of the throwaway PostgreSQL, name=value separated by commas (e.g. work_mem=64MB).")
	flag.StringVar(&o.pgSharedBuffers, "pg-shared-buffers", "", "shared_buffers of the throwaway PostgreSQL (e.g. 6GB); empty keeps the server's default (128MB).")
	flag.BoolVar(&o.readHold, "read-hold", false, "After each engine's read phase, keep its database (at the last size) and the API server up, print how to reach them, and wait for SIGINT or SIGTERM before going on.")
	flag.StringVar(&o.readDSN, "read-dsn", "", "Time the read shapes, with this binary's code, against the database a run with -read-hold keeps (the DSN it prints for PostgreSQL, the file for SQLite; -engines names the one engine), and do nothing else: a change to the reads is measured at 10M findings without loading them again.")
	flag.IntVar(&o.readProbes, "read-probes", 3, "Pairs of probe ingestions (into the read database and into an empty one) at each read size, and with -read-dsn; the ratio printed is their median.")
	flag.StringVar(&o.probeInto, "probe-into", probeIntoNew, "Tenant the probe ingestions write to: \"new\", a new tenant for each pair (what the table's size costs), or \"loaded\", the tenant the read phase loaded (what a tenant's own findings cost).")
	flag.StringVar(&o.leaveOut, "leave-out", "", "What each read structure costs ingestion: \"all\", a part of a structure's name, or \"none\" (the ingestion alone, every structure kept); ingests the first -records report with every structure and without that one, in -repeat pairs, and prints the differences per 100,000 records (nothing else runs).")
	flag.BoolVar(&o.indexCosts, "index-costs", false, "What each index of the findings table (and SQLite's search text) costs at the database: one ingestion of the first -records report fills a database, and its findings are copied in the worker's batches into an empty table shaped like findings with no index, with each one alone and with all of them, -repeat rounds; prints the medians per 100,000 records and, on PostgreSQL, the COPY floor of the same records (nothing else runs).")
	flag.BoolVar(&o.check, "check", false, "make bench-check: the 100,000-record ingestion (3 runs) and the read shapes at 10,000 and 1,000,000 findings on both engines, one process; fails when PostgreSQL's worker / COPY passes 3×, SQLite's worker falls below 3,000 records/s, or a read shape's p95 at 1M passes 3× its p95 at 10k (documented exceptions listed apart). Sets -records, -repeat, -big-mib, -read-sizes and -read-probes unless given.")
	cpuProfile := flag.String("cpuprofile", "", "Write this process's CPU profile to the file (the in-process worker of -leave-out and of the read phase; the upload's API server).")
	flag.BoolVar(&exportPhase, "read-export", true, "After the read shapes at the largest read size, export that size's findings once as OCSF through the REST API and print this process's Go heap and RSS peak during the export (export.go).")
	readShapes := flag.String("read-shapes", "", "A regular expression: time only the read shapes whose names it matches (e.g. '^latest: sort').")
	flag.Parse()
	if *readShapes != "" {
		re, err := regexp.Compile(*readShapes)
		if err != nil {
			fmt.Fprintln(os.Stderr, "-read-shapes:", err)
			os.Exit(2)
		}
		shapeFilter = re
	}
	if o.check {
		given := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for name, v := range map[string]string{"records": "100000", "repeat": "3", "big-mib": "0", "read-sizes": "10000,1000000", "read-probes": "1"} {
			if !given[name] {
				_ = flag.Set(name, v)
			}
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -cpuprofile:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	if o.probeInto != probeIntoNew && o.probeInto != probeIntoLoaded {
		fmt.Fprintf(os.Stderr, "bench: -probe-into is %q; want %q or %q\n", o.probeInto, probeIntoNew, probeIntoLoaded)
		os.Exit(2)
	}
	if o.readProbes < 0 || (o.readProbes == 0 && o.readDSN == "") {
		fmt.Fprintln(os.Stderr, "bench: -read-probes must be at least 1 (0 only with -read-dsn)")
		os.Exit(2)
	}
	if o.readDSN != "" {
		if err := timeHeld(context.Background(), strings.TrimSpace(o.engines), o.readDSN, o.readProbes, o.probeInto); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if o.repeat < 1 {
		fmt.Fprintln(os.Stderr, "bench: -repeat must be at least 1")
		os.Exit(2)
	}
	if o.indexCosts {
		if err := indexCosts(o); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if o.leaveOut != "" {
		if err := leaveOut(o); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type result struct {
	engine        string
	records       int
	bytes         int64
	upload        time.Duration
	uploadPeakRSS int64
	worker        time.Duration
	workerRSS     int64 // KiB
	workerCPU     time.Duration
	// serverCPU is what PostgreSQL's processes spent during the worker run,
	// copyCPU during the COPY floor: the two sides of the ratio.
	serverCPU time.Duration
	copyFloor time.Duration
	copyCPU   time.Duration

	// Set on the median of repeated runs.
	runs                         int
	medRatio, minRatio, maxRatio float64
}

func run(o options) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "posture-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	fmt.Printf("machine: %d CPUs (GOMAXPROCS %d), %s, %s/%s\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), memTotal(), runtime.GOOS, runtime.GOARCH)
	// The read phase needs neither: its worker runs in process, and the
	// findings reads touch no Kubernetes object.
	manager := filepath.Join(dir, "manager")
	var k8s client.Client
	ns := "tenant-" + tenant
	if strings.TrimSpace(o.sizes) != "" || o.bigMiB > 0 {
		fmt.Println("building ./cmd/manager ...")
		build := exec.Command("go", "build", "-o", manager, "./cmd/manager")
		build.Dir = testenv.Root()
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build ./cmd/manager: %w", err)
		}

		fmt.Println("starting a control plane (envtest) ...")
		envt, cfg, err := testenv.Start()
		if err != nil {
			return err
		}
		defer func() { _ = envt.Stop() }()
		if k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
			return err
		}
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}

	gen, err := reportgen.New()
	if err != nil {
		return err
	}
	sizes, err := parseSizes("-records", o.sizes)
	if err != nil {
		return err
	}
	readSizes, err := parseSizes("-read-sizes", o.readSizes)
	if err != nil {
		return err
	}
	slices.Sort(readSizes)
	reports := map[int]string{}
	for _, n := range sizes {
		path := filepath.Join(dir, fmt.Sprintf("report-%d.ocsf.json", n))
		size, err := gen.WriteFile(path, n)
		if err != nil {
			return err
		}
		reports[n] = path
		fmt.Printf("generated %d records, %.1f MB (%.0f bytes/record)\n", n, float64(size)/1e6, float64(size)/float64(n))
	}

	var results []result
	var reads []readOutcome
	for _, engine := range strings.Split(o.engines, ",") {
		engine = strings.TrimSpace(engine)
		var pg *pgServer
		if engine == "postgres" {
			fmt.Println("starting a throwaway PostgreSQL ...")
			pg, err = startPostgres(o.pgSharedBuffers, o.serverSettings()...)
			if err != nil {
				return err
			}
		}
		if pg != nil && len(sizes) > 0 {
			// A new server has yet to fault in its shared memory and create
			// its WAL files; a long-running one has done both. One untimed run
			// of the smallest report keeps that from landing on the first
			// timed one.
			fmt.Println("warming up PostgreSQL (one untimed run) ...")
			b := &bench{k8s: k8s, ns: ns, manager: manager, dir: dir, engine: engine, pg: pg}
			smallest := slices.Min(sizes)
			if _, err := b.runFile(ctx, reports[smallest], smallest); err != nil {
				pg.stop()
				return fmt.Errorf("warm-up: %w", err)
			}
		}
		for _, n := range sizes {
			var runs []result
			for range o.repeat {
				b := &bench{k8s: k8s, ns: ns, manager: manager, dir: dir, engine: engine, pg: pg}
				r, err := b.runFile(ctx, reports[n], n)
				if err != nil {
					if pg != nil {
						pg.stop()
					}
					return fmt.Errorf("%s, %d records: %w", engine, n, err)
				}
				printResult(r)
				runs = append(runs, r)
			}
			results = append(results, median(runs))
		}
		if engine == "postgres" && o.bigMiB > 0 {
			b := &bench{k8s: k8s, ns: ns, manager: manager, dir: dir, engine: engine, pg: pg}
			r, err := b.runBig(ctx, gen, int64(o.bigMiB)<<20)
			if err != nil {
				pg.stop()
				return fmt.Errorf("large report: %w", err)
			}
			results = append(results, r)
			printResult(r)
		}
		if len(readSizes) > 0 && slices.Contains(strings.Split(o.readEngines, ","), engine) {
			b := &bench{k8s: k8s, ns: ns, manager: manager, dir: dir, engine: engine, pg: pg}
			retime := 0.0
			if o.check {
				retime = checkReadRatio
			}
			r, err := runReads(ctx, b, gen, readSizes, o.readProbes, o.probeInto, o.readHold, retime)
			if err != nil {
				if pg != nil {
					pg.stop()
				}
				return fmt.Errorf("read phase, %s: %w", engine, err)
			}
			reads = append(reads, r)
		}
		if pg != nil {
			pg.stop()
		}
	}
	if len(results) > 0 {
		printResults(o, results)
	}
	if o.check {
		return check(results, reads)
	}
	return nil
}

func printResults(o options, results []result) {
	fmt.Println()
	fmt.Printf("Medians of %d runs (peak RSS: the highest); worker / COPY: the median of each run's ratio, with the range.\n\n", o.repeat)
	fmt.Println("| engine | records | MB | upload s | upload MB/s | API peak RSS MiB | worker s | worker records/s | worker MB/s | end-to-end records/s | worker peak RSS MiB | worker CPU s | server CPU s | COPY s | COPY server CPU s | worker / COPY |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		mb := float64(r.bytes) / 1e6
		serverCPU, copyS, copyCPU, ratio := "-", "-", "-", "-"
		if r.serverCPU > 0 {
			serverCPU = fmt.Sprintf("%.2f", r.serverCPU.Seconds())
		}
		if r.copyFloor > 0 {
			copyS = fmt.Sprintf("%.2f", r.copyFloor.Seconds())
			copyCPU = fmt.Sprintf("%.2f", r.copyCPU.Seconds())
			ratio = fmt.Sprintf("%.2f×", r.ratio())
			if r.runs > 1 {
				ratio = fmt.Sprintf("%.2f× (%.2f–%.2f)", r.medRatio, r.minRatio, r.maxRatio)
			}
		}
		fmt.Printf("| %s | %d | %.0f | %.2f | %.0f | %.0f | %.2f | %.0f | %.1f | %.0f | %.0f | %.2f | %s | %s | %s | %s |\n",
			r.engine, r.records, mb, r.upload.Seconds(), mb/r.upload.Seconds(), float64(r.uploadPeakRSS)/1024,
			r.worker.Seconds(), float64(r.records)/r.worker.Seconds(), mb/r.worker.Seconds(),
			float64(r.records)/(r.upload+r.worker).Seconds(), float64(r.workerRSS)/1024, r.workerCPU.Seconds(),
			serverCPU, copyS, copyCPU, ratio)
	}
	// What a change to the store is read by: records a second on both
	// engines, and against the COPY floor on PostgreSQL.
	fmt.Println()
	for _, r := range results {
		line := fmt.Sprintf("%s, %d records: worker %.0f records/s", r.engine, r.records, float64(r.records)/r.worker.Seconds())
		if r.copyFloor > 0 {
			line += fmt.Sprintf(", worker / COPY %.2f× (%.2f–%.2f), server CPU %.2f s against the COPY's %.2f s (%.2f×)",
				r.medRatio, r.minRatio, r.maxRatio, r.serverCPU.Seconds(), r.copyCPU.Seconds(), r.serverCPU.Seconds()/r.copyCPU.Seconds())
		}
		fmt.Println(line)
	}
}

// serverSettings are -pg-settings' name=value pairs.
func (o options) serverSettings() []string {
	var out []string
	for _, s := range strings.Split(o.pgSettings, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// parseSizes reads a comma-separated list of positive counts; an empty
// list is none.
func parseSizes(flagName, list string) ([]int, error) {
	var sizes []int
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s: %q is not a positive number", flagName, s)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// median summarises repeated runs of one report: the median of each time
// and of the paired worker/COPY ratios (a worker run and the COPY after it
// share the machine's state, so their ratio is steadier than either time),
// and the highest memory peaks.
func median(runs []result) result {
	m := runs[0]
	m.runs = len(runs)
	mid := func(get func(r result) time.Duration) time.Duration {
		v := make([]time.Duration, len(runs))
		for i, r := range runs {
			v[i] = get(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	m.upload = mid(func(r result) time.Duration { return r.upload })
	m.worker = mid(func(r result) time.Duration { return r.worker })
	m.workerCPU = mid(func(r result) time.Duration { return r.workerCPU })
	m.serverCPU = mid(func(r result) time.Duration { return r.serverCPU })
	m.copyFloor = mid(func(r result) time.Duration { return r.copyFloor })
	m.copyCPU = mid(func(r result) time.Duration { return r.copyCPU })
	ratios := make([]float64, len(runs))
	for i, r := range runs {
		m.uploadPeakRSS = max(m.uploadPeakRSS, r.uploadPeakRSS)
		m.workerRSS = max(m.workerRSS, r.workerRSS)
		ratios[i] = r.ratio()
	}
	slices.Sort(ratios)
	m.medRatio, m.minRatio, m.maxRatio = ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1]
	return m
}

func (r result) ratio() float64 {
	if r.copyFloor <= 0 {
		return 0
	}
	return r.worker.Seconds() / r.copyFloor.Seconds()
}

func printResult(r result) {
	fmt.Printf("%-8s %7d records %7.1f MB: upload %6.2fs (API peak RSS %.0f MiB), worker %6.2fs = %7.0f records/s %5.1f MB/s, worker peak RSS %.0f MiB",
		r.engine, r.records, float64(r.bytes)/1e6, r.upload.Seconds(), float64(r.uploadPeakRSS)/1024, r.worker.Seconds(),
		float64(r.records)/r.worker.Seconds(), float64(r.bytes)/1e6/r.worker.Seconds(), float64(r.workerRSS)/1024)
	fmt.Printf(", worker CPU %.2fs", r.workerCPU.Seconds())
	if r.serverCPU > 0 {
		fmt.Printf(", server CPU %.2fs", r.serverCPU.Seconds())
	}
	if r.copyFloor > 0 {
		fmt.Printf(", COPY %.2fs (server CPU %.2fs; worker/COPY %.2f×)", r.copyFloor.Seconds(), r.copyCPU.Seconds(), r.ratio())
	}
	fmt.Println()
}

// cpu sums the CPU time of the bench's PostgreSQL server: the postmaster
// and its live children, and the children it has reaped (its cutime and
// cstime), so a difference of two readings is what the server spent in
// between. Only this server's processes count: the machine is shared, and
// other servers (other tests' throwaway ones) start, work and exit
// meanwhile; summing every postgres process on the machine counted them,
// and a server that exited made a reading fall.
func (p *pgServer) cpu() time.Duration {
	var ticks int64
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		// comm is in parentheses and may hold spaces; fields follow the last ')'.
		end := bytes.LastIndexByte(b, ')')
		if end < 0 {
			continue
		}
		f := strings.Fields(string(b[end+1:]))
		if len(f) < 15 {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(d, "/proc/"), "/stat"))
		ppid, _ := strconv.Atoi(f[1])
		if pid != p.postmaster && ppid != p.postmaster {
			continue
		}
		// After comm: state is field 3, ppid 4, utime 14, stime 15, cutime 16, cstime 17.
		for _, i := range []int{14, 15, 16, 17} {
			v, _ := strconv.ParseInt(f[i-3], 10, 64)
			ticks += v
		}
	}
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(ticks) * time.Second / clockTicks
}
