package main

// The leave-out mode (-leave-out): what each read structure costs
// ingestion. Every structure a read needs (an index, the search text, a
// summary, the latest scans' spans) is paid for by every finding written;
// this mode ingests the same report into a database with every structure
// and into one with a structure left out, in pairs run back to back (the
// order alternating), and prints the difference, so a change to the write
// path shows its price and a new structure shows what it adds.
//
// The worker runs in process (ingest.Worker, as the read phase's does) on a
// report stored as a blob: the upload and the worker's start are the same
// on both sides of a pair and are left out.

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/reportgen"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/engines"
)

// readStructure is one structure ingestion maintains for reads, and how a
// database is made without it. Statements run after the migrations, on the
// empty database.
type readStructure struct {
	name string
	// serves says which reads need it.
	serves   string
	postgres []string
	sqlite   []string
	// leave names what a store that maintains it in WriteBatch's own
	// statements (store.StructureLeaver) is told to leave out.
	leave []string
}

// readStructures lists what ingestion maintains beyond the findings' heap
// and their primary key (and, on SQLite, the natural key the upsert
// resolves conflicts on). findings_uid is not among them: the merge into
// the current state probes each new finding's uid through it, and without
// it read the tenant's findings once per finding (an ingestion of 100,000
// findings did not end in 20 minutes).
func readStructures() []readStructure {
	idx := func(name, serves string) readStructure {
		return readStructure{name: "index " + name, serves: serves,
			postgres: []string{"DROP INDEX " + name}, sqlite: []string{"DROP INDEX " + name}}
	}
	all := []readStructure{
		{name: "search text (trigram index)", serves: "filter[search]",
			postgres: []string{"DROP INDEX findings_search"},
			leave:    []string{store.StructureSearch}},
		{name: "finding summary by tenant", serves: "counts, a listing's count",
			postgres: dropTriggers("findings", "finding_counts_update", "finding_counts_delete"),
			leave:    []string{store.StructureSummary}},
		{name: "finding summary by scan", serves: "counts of a scan and of the latest view",
			postgres: dropTriggers("findings", "scan_finding_counts_update", "scan_finding_counts_delete"),
			leave:    []string{store.StructureScanSummary}},
		{name: "latest scans' spans", serves: "pages of the latest view by check, severity, time",
			postgres: dropTriggers("findings", "scan_bounds_update"),
			leave:    []string{store.StructureSpans}},
		{name: "index findings_scan", serves: "filter[scan], the latest view",
			// SQLite reads a scan through the natural key, which the upsert needs.
			postgres: []string{"DROP INDEX findings_scan"}},
		idx("findings_facets", "filters on the count dimensions"),
		idx("findings_check_order", "sort=check_id, filter[check_id]"),
		idx("findings_default_order", "sort=severity_id"),
		idx("findings_ingestion", "filter[ingestion]"),
		idx("findings_time", "sort=time"),
		idx("findings_inserted", "sort=inserted_at (the default)"),
	}
	every := readStructure{name: "every one of them", serves: "-"}
	for _, s := range all {
		every.postgres = append(every.postgres, s.postgres...)
		every.sqlite = append(every.sqlite, s.sqlite...)
		every.leave = append(every.leave, s.leave...)
	}
	return append(all, every)
}

func dropTriggers(table string, names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "DROP TRIGGER " + n
		if table != "" {
			out[i] += " ON " + table
		}
	}
	return out
}

func (s readStructure) statements(engine string) []string {
	if engine == "postgres" {
		return s.postgres
	}
	return s.sqlite
}

// leaverEngines are the engines whose stores maintain some structures in
// WriteBatch's own statements (store.StructureLeaver).
var leaverEngines = map[string]bool{"postgres": true, "sqlite": true}

func (s readStructure) applies(engine string) bool {
	return len(s.statements(engine)) > 0 || (leaverEngines[engine] && len(s.leave) > 0)
}

// leaveOutRun is one timed ingestion of the leave-out mode.
type leaveOutRun struct {
	wall, serverCPU, processCPU time.Duration
}

// runLeaveOut measures, for each structure matching only (all when empty),
// pairs of ingestions of the report at path (records records) with every
// structure and without that one, and prints the medians of the pairs'
// differences, per 100,000 records.
func runLeaveOut(ctx context.Context, o options, engines []string, path string, records int, only string) error {
	for _, engine := range engines {
		var pg *pgServer
		if engine == "postgres" {
			var err error
			// pg_stat_statements, nested statements included, times what
			// the server does for each statement of the worker and of the
			// triggers it fires.
			if pg, err = startPostgres(o.pgSharedBuffers, append(o.serverSettings(), "shared_preload_libraries=pg_stat_statements",
				"pg_stat_statements.track=all")...); err != nil {
				return err
			}
		}
		err := leaveOutEngine(ctx, o, engine, pg, path, records, only)
		if pg != nil {
			pg.stop()
		}
		if err != nil {
			return fmt.Errorf("leave-out, %s: %w", engine, err)
		}
	}
	return nil
}

func leaveOutEngine(ctx context.Context, o options, engine string, pg *pgServer, path string, records int, only string) error {
	dir, err := os.MkdirTemp("", "posture-bench-leave-out-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b := func() *bench { return &bench{engine: engine, pg: pg, dir: dir} }
	if pg != nil {
		// A new server has yet to fault in its shared memory and create its
		// WAL files: one untimed run, whose statements are then listed.
		wb := b()
		wb.statements = true
		if _, err := wb.leaveOutRun(ctx, path, records, readStructure{}); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	per := func(d time.Duration) float64 { return d.Seconds() * 100_000 / float64(records) }
	type row struct {
		s                        readStructure
		with, without            leaveOutRun
		dWall, dServer, dProcess float64
		dWalls, dServers, dProcs []float64
	}
	if only == "none" {
		// Every structure kept: the ingestion alone, -repeat times, to set
		// one build against another.
		var runs []leaveOutRun
		for range o.repeat {
			r, err := b().leaveOutRun(ctx, path, records, readStructure{})
			if err != nil {
				return err
			}
			fmt.Printf("%s with every structure: %.2fs (server CPU %.2fs, worker CPU %.2fs)\n", engine, r.wall.Seconds(), r.serverCPU.Seconds(), r.processCPU.Seconds())
			runs = append(runs, r)
		}
		m := medianRun(runs)
		fmt.Printf("%s with every structure, median of %d: %.2fs (server CPU %.2fs, worker CPU %.2fs) per 100,000 records\n", engine, len(runs),
			per(m.wall), per(m.serverCPU), per(m.processCPU))
		return nil
	}
	var rows []row
	for _, s := range readStructures() {
		if !s.applies(engine) || (only != "all" && !strings.Contains(s.name, only)) {
			continue
		}
		r := row{s: s}
		var withs, withouts []leaveOutRun
		for i := range o.repeat {
			var with, without leaveOutRun
			sides := []func() error{
				func() (err error) { with, err = b().leaveOutRun(ctx, path, records, readStructure{}); return err },
				func() (err error) {
					without, err = b().leaveOutRun(ctx, path, records, s)
					return err
				},
			}
			if i%2 == 1 {
				slices.Reverse(sides)
			}
			for _, side := range sides {
				if err := side(); err != nil {
					return fmt.Errorf("%s: %w", s.name, err)
				}
			}
			fmt.Printf("%s without %s: %.2fs (server CPU %.2fs, worker CPU %.2fs), with it %.2fs (server CPU %.2fs, worker CPU %.2fs)\n",
				engine, s.name, without.wall.Seconds(), without.serverCPU.Seconds(), without.processCPU.Seconds(),
				with.wall.Seconds(), with.serverCPU.Seconds(), with.processCPU.Seconds())
			withs, withouts = append(withs, with), append(withouts, without)
			r.dWalls = append(r.dWalls, per(with.wall-without.wall))
			r.dServers = append(r.dServers, per(with.serverCPU-without.serverCPU))
			r.dProcs = append(r.dProcs, per(with.processCPU-without.processCPU))
		}
		r.with, r.without = medianRun(withs), medianRun(withouts)
		r.dWall, r.dServer, r.dProcess = medianFloat(r.dWalls), medianFloat(r.dServers), medianFloat(r.dProcs)
		rows = append(rows, r)
	}
	fmt.Printf("\nWhat each read structure costs ingestion on %s, per 100,000 records: the median of %d pairs' differences (with it − without it), ingest.Worker in process, %d records.\n\n",
		engine, o.repeat, records)
	fmt.Println("| structure | serves | worker s with / without | Δ worker s | Δ server CPU s | Δ worker CPU s |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range rows {
		server := "-"
		if engine == "postgres" {
			server = fmt.Sprintf("%+.2f", r.dServer)
		}
		fmt.Printf("| %s | %s | %.2f / %.2f | %+.2f | %s | %+.2f |\n", r.s.name, r.s.serves,
			per(r.with.wall), per(r.without.wall), r.dWall, server, r.dProcess)
	}
	return nil
}

func medianFloat(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianRun(runs []leaveOutRun) leaveOutRun {
	mid := func(get func(leaveOutRun) time.Duration) time.Duration {
		v := make([]time.Duration, len(runs))
		for i, r := range runs {
			v[i] = get(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return leaveOutRun{
		wall:       mid(func(r leaveOutRun) time.Duration { return r.wall }),
		serverCPU:  mid(func(r leaveOutRun) time.Duration { return r.serverCPU }),
		processCPU: mid(func(r leaveOutRun) time.Duration { return r.processCPU }),
	}
}

// leaveOutRun ingests the report at path into a new database without the
// structure s (none when zero), and times the worker.
func (b *bench) leaveOutRun(ctx context.Context, path string, records int, s readStructure) (leaveOutRun, error) {
	if err := b.open(ctx); err != nil {
		return leaveOutRun{}, err
	}
	defer b.close()
	if err := b.exec(ctx, s.statements(b.engine)); err != nil {
		return leaveOutRun{}, err
	}
	if l, ok := b.st.(store.StructureLeaver); ok && len(s.leave) > 0 {
		l.LeaveOut(s.leave...)
	}
	if b.statements {
		if err := b.exec(ctx, []string{"CREATE EXTENSION IF NOT EXISTS pg_stat_statements", "SELECT pg_stat_statements_reset()"}); err != nil {
			return leaveOutRun{}, err
		}
	}
	r, err := b.ingest(ctx, path, records)
	if err != nil {
		return leaveOutRun{}, err
	}
	if b.statements {
		if err := b.printStatements(ctx, records); err != nil {
			return leaveOutRun{}, err
		}
	}
	return r, nil
}

// ingest stores the report at path as a blob and runs ingest.Worker on it
// in process, timing the worker alone; the run must succeed with every
// record valid.
func (b *bench) ingest(ctx context.Context, path string, records int) (leaveOutRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return leaveOutRun{}, err
	}
	blob, err := b.st.PutBlob(ctx, tenant, f)
	f.Close()
	if err != nil {
		return leaveOutRun{}, err
	}
	id := fmt.Sprintf("leave-out-%d", dbSeq.Load())
	w := &ingest.Worker{Store: b.st, Log: logr.Discard()}
	var r leaveOutRun
	cpu := processCPU()
	r.serverCPU, err = b.onServer(func() error {
		start := time.Now()
		err := w.Run(ctx, ingest.Job{Tenant: tenant, Namespace: "tenant-" + tenant, IngestionID: id, BlobID: blob.ID,
			Attempt: 1, Total: records, ReportSHA256: blob.SHA256})
		r.wall = time.Since(start)
		return err
	})
	r.processCPU = processCPU() - cpu
	if err != nil {
		return leaveOutRun{}, err
	}
	run, err := b.st.GetRun(ctx, tenant, id)
	if err != nil {
		return leaveOutRun{}, err
	}
	if run.Status != store.RunSucceeded || run.Processed != records || run.Invalid != 0 {
		return leaveOutRun{}, fmt.Errorf("run ended %s with %d processed, %d invalid (%s); want %d valid", run.Status, run.Processed, run.Invalid, run.Message, records)
	}
	return r, nil
}

// printStatements lists what the server spent on each statement of the
// run (pg_stat_statements, nested statements included: a trigger's own
// statements are listed apart and are also inside the time of the
// statement that fired them), per 100,000 records.
func (b *bench) printStatements(ctx context.Context, records int) error {
	// A backend reports its tables' and indexes' counters when it exits:
	// the store's connections are closed (and the store opened again for
	// the bench to close) before they are read.
	_ = b.st.Close()
	var err error
	if b.st, err = engines.Open(ctx, b.engine, b.dsn); err != nil {
		return err
	}
	time.Sleep(time.Second)
	conn, err := pgx.Connect(ctx, b.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
SELECT toplevel, calls, total_exec_time, rows, wal_bytes, regexp_replace(left(query, 110), '\s+', ' ', 'g')
FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY total_exec_time DESC LIMIT 20`)
	if err != nil {
		return err
	}
	defer rows.Close()
	scale := 100_000 / float64(records)
	fmt.Printf("\nStatements of one ingestion of %d records on PostgreSQL (pg_stat_statements), per 100,000 records:\n\n", records)
	fmt.Println("| level | calls | ms | rows | WAL MB | statement |")
	fmt.Println("|---|---|---|---|---|---|")
	for rows.Next() {
		var (
			top      bool
			calls, n int64
			ms       float64
			wal      pgtype.Numeric
			query    string
		)
		if err := rows.Scan(&top, &calls, &ms, &n, &wal, &query); err != nil {
			return err
		}
		level := "nested"
		if top {
			level = "top"
		}
		walBytes, _ := wal.Float64Value()
		fmt.Printf("| %s | %.0f | %.0f | %.0f | %.1f | `%s` |\n", level, float64(calls)*scale, ms*scale, float64(n)*scale,
			walBytes.Float64*scale/1e6, strings.ReplaceAll(query, "|", "\\|"))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()
	// Buffer accesses per index: each insert's descent, and its page
	// splits, in pages; the size is what it holds after the ingestion.
	fmt.Println("\n| index | buffers hit | read | MB |")
	fmt.Println("|---|---|---|---|")
	rows, err = conn.Query(ctx, `
SELECT relname || '.' || indexrelname, idx_blks_hit, idx_blks_read, pg_relation_size(indexrelid)
FROM pg_statio_user_indexes
WHERE relname IN ('findings', 'finding_counts', 'scan_finding_counts', 'scan_bounds', 'scans')
ORDER BY idx_blks_hit DESC`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		var hit, read, size int64
		if err := rows.Scan(&name, &hit, &read, &size); err != nil {
			return err
		}
		fmt.Printf("| %s | %.0f | %.0f | %.1f |\n", name, float64(hit)*scale, float64(read)*scale, float64(size)/1e6)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows.Close()
	// Row versions: an update that stays on its page (HOT) takes no new
	// index entries.
	fmt.Println("\n| table | inserted | updated | of which HOT | dead | MB |")
	fmt.Println("|---|---|---|---|---|---|")
	rows, err = conn.Query(ctx, `
SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_dead_tup, pg_total_relation_size(relid)
FROM pg_stat_user_tables WHERE n_tup_ins + n_tup_upd > 0 ORDER BY n_tup_ins + n_tup_upd DESC`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		var ins, upd, hot, dead, size int64
		if err := rows.Scan(&name, &ins, &upd, &hot, &dead, &size); err != nil {
			return err
		}
		fmt.Printf("| %s | %d | %d | %d | %d | %.1f |\n", name, ins, upd, hot, dead, float64(size)/1e6)
	}
	fmt.Println()
	return rows.Err()
}

// exec runs statements on the bench's database, outside the store.
func (b *bench) exec(ctx context.Context, statements []string) error {
	if len(statements) == 0 {
		return nil
	}
	switch b.engine {
	case "postgres":
		conn, err := pgx.Connect(ctx, b.dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		for _, s := range statements {
			if _, err := conn.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
	default:
		db, err := sql.Open("sqlite", b.dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		for _, s := range statements {
			if _, err := db.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
	}
	return nil
}

// processCPU is the CPU time this process has used: the in-process
// worker's, as nothing else runs while it does.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// leaveOut runs the leave-out mode on the first size of -records.
func leaveOut(o options) error {
	return withFirstReport(o, "-leave-out", func(engines []string, path string, records int) error {
		return runLeaveOut(context.Background(), o, engines, path, records, o.leaveOut)
	})
}

// withFirstReport generates the report of the first size of -records and
// hands it, with the engines of -engines, to run.
func withFirstReport(o options, mode string, run func(engines []string, path string, records int) error) error {
	sizes, err := parseSizes("-records", o.sizes)
	if err != nil || len(sizes) == 0 {
		return fmt.Errorf("%s needs a size in -records (%v)", mode, err)
	}
	gen, err := reportgen.New()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "posture-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, fmt.Sprintf("report-%d.ocsf.json", sizes[0]))
	if _, err := gen.WriteFile(path, sizes[0]); err != nil {
		return err
	}
	var engines []string
	for _, e := range strings.Split(o.engines, ",") {
		if e = strings.TrimSpace(e); e != "" {
			engines = append(engines, e)
		}
	}
	return run(engines, path, sizes[0])
}
