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
//     loaded one; probes.go). -read-hold then keeps each
//     engine's database and API server up for EXPLAIN by hand.
//
// PostgreSQL is a throwaway server (pgtest.Start: fsync off, like every
// test here), so the figures are CPU and protocol bound, not disk bound;
// -pg-shared-buffers gives it a production-sized buffer cache.
// Each report runs -repeat times, after one untimed warm-up run, and the
// table shows medians: docs/performance.md says why.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
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
	// readHold keeps each engine's read database and API server up after
	// its read phase, until interrupted.
	readHold   bool
	readDSN    string
	readProbes int
	probeInto  string
}

func main() {
	var o options
	flag.StringVar(&o.sizes, "records", "10000,100000", "Report sizes to run, in records.")
	flag.StringVar(&o.engines, "engines", "postgres,sqlite", "Store engines to run.")
	flag.IntVar(&o.bigMiB, "big-mib", 1024, "Size of the large report (MiB) generated on the fly for the memory run on PostgreSQL; 0 skips it.")
	flag.IntVar(&o.repeat, "repeat", 5, "Runs of each report on each engine; the table shows their medians.")
	flag.StringVar(&o.readSizes, "read-sizes", "10000,1000000", "Findings the read phase loads, in turn, before timing the findings reads through the REST API; empty skips it.")
	flag.StringVar(&o.readEngines, "read-engines", "postgres,sqlite", "Engines (among -engines) the read phase runs on.")
	flag.StringVar(&o.pgSharedBuffers, "pg-shared-buffers", "", "shared_buffers of the throwaway PostgreSQL (e.g. 6GB); empty keeps the server's default (128MB).")
	flag.BoolVar(&o.readHold, "read-hold", false, "After each engine's read phase, keep its database (at the last size) and the API server up, print how to reach them, and wait for SIGINT or SIGTERM before going on.")
	flag.StringVar(&o.readDSN, "read-dsn", "", "Time the read shapes, with this binary's code, against the database a run with -read-hold keeps (the DSN it prints for PostgreSQL, the file for SQLite; -engines names the one engine), and do nothing else: a change to the reads is measured at 10M findings without loading them again.")
	flag.IntVar(&o.readProbes, "read-probes", 3, "Pairs of probe ingestions (into the read database and into an empty one) at each read size, and with -read-dsn; the ratio printed is their median.")
	flag.StringVar(&o.probeInto, "probe-into", probeIntoNew, "Tenant the probe ingestions write to: \"new\", a new tenant for each pair (what the table's size costs), or \"loaded\", the tenant the read phase loaded (what a tenant's own findings cost).")
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
	for _, engine := range strings.Split(o.engines, ",") {
		engine = strings.TrimSpace(engine)
		var pg *pgServer
		if engine == "postgres" {
			fmt.Println("starting a throwaway PostgreSQL ...")
			pg, err = startPostgres(o.pgSharedBuffers)
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
			if err := runReads(ctx, b, gen, readSizes, o.readProbes, o.probeInto, o.readHold); err != nil {
				if pg != nil {
					pg.stop()
				}
				return fmt.Errorf("read phase, %s: %w", engine, err)
			}
		}
		if pg != nil {
			pg.stop()
		}
	}
	if len(results) == 0 {
		return nil
	}
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
	return nil
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
