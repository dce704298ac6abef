package main

// The index-cost mode (-index-costs): what each index of the findings table
// costs a write, measured at the database alone. The leave-out mode times
// whole ingestions, whose worker shares the machine's two cores with the
// server, and its single structures' differences scatter by seconds; here
// the same findings are written again and again by plain statements, in the
// worker's batches and order, into a table with nothing else on it, so the
// one thing that changes between runs is the index built on that table.
//
// One ingestion fills a database. Its findings are copied into a source
// table numbered in the order they were written; each run then creates an
// empty table shaped like findings, builds one configuration of indexes on
// it (none, each alone, all), and copies the source in, a batch a
// transaction. Rounds take the configurations in a rotated order, so none
// always runs first. The indexes are read from the catalogue, so a new one
// is measured without a change here.

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/posture-dev/posture/internal/ingest"
)

// costConfig is one set of indexes built on the copy of findings.
type costConfig struct {
	name string
	// build creates the indexes on costTable (and, for SQLite's search
	// text, its FTS5 table).
	build []string
	// search marks the search text; on SQLite its FTS5 table is written
	// with each batch.
	search bool
	// after builds the indexes once every batch is in, inside the timing:
	// what indexing an ingestion's findings in bulk would cost.
	after bool
}

const (
	costTable  = "cost_findings"
	costSource = "cost_source"
	costSearch = "cost_search"
)

// costRun is one timed copy.
type costRun = leaveOutRun

func indexCosts(o options) error {
	return withFirstReport(o, "-index-costs", func(engines []string, path string, records int) error {
		for _, engine := range engines {
			if err := indexCostsEngine(context.Background(), o, engine, path, records); err != nil {
				return fmt.Errorf("index costs, %s: %w", engine, err)
			}
		}
		return nil
	})
}

func indexCostsEngine(ctx context.Context, o options, engine, path string, records int) error {
	dir, err := os.MkdirTemp("", "posture-bench-index-costs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b := &bench{engine: engine, dir: dir}
	if engine == "postgres" {
		if b.pg, err = startPostgres(o.pgSharedBuffers, o.serverSettings()...); err != nil {
			return err
		}
		defer b.pg.stop()
	}
	if err := b.open(ctx); err != nil {
		return err
	}
	defer b.close()
	if _, err := b.ingest(ctx, path, records); err != nil {
		return fmt.Errorf("filling the database: %w", err)
	}
	batch := (&ingest.Worker{Store: b.st}).RecordsPerBatch()
	var c costCopier
	if engine == "postgres" {
		c, err = newPGCopier(ctx, b)
	} else {
		c, err = newSQLiteCopier(ctx, b.dsn)
	}
	if err != nil {
		return err
	}
	defer c.close()
	configs, err := c.configs(ctx)
	if err != nil {
		return err
	}
	runs := make([][]costRun, len(configs))
	var floors []costRun
	for round := range o.repeat {
		for k := range configs {
			i := (k + round) % len(configs)
			r, err := c.run(ctx, configs[i], records, batch)
			if err != nil {
				return fmt.Errorf("%s: %w", configs[i].name, err)
			}
			fmt.Printf("%s, round %d, %s: %.2fs (server CPU %.2fs, process CPU %.2fs)\n", engine, round+1, configs[i].name,
				r.wall.Seconds(), r.serverCPU.Seconds(), r.processCPU.Seconds())
			runs[i] = append(runs[i], r)
		}
		if engine == "postgres" {
			var r costRun
			if err := b.pg.psql(b.db(), "DROP TABLE IF EXISTS copy_floor"); err != nil {
				return err
			}
			r.serverCPU, err = b.onServer(func() (err error) { r.wall, err = b.copyFloor(path); return err })
			if err != nil {
				return fmt.Errorf("COPY floor: %w", err)
			}
			fmt.Printf("%s, round %d, COPY floor: %.2fs (server CPU %.2fs)\n", engine, round+1, r.wall.Seconds(), r.serverCPU.Seconds())
			floors = append(floors, r)
		}
	}
	per := func(d time.Duration) float64 { return d.Seconds() * 100_000 / float64(records) }
	// On PostgreSQL the server does the work; on SQLite this process does.
	cost := func(r costRun) time.Duration {
		if engine == "postgres" {
			return r.serverCPU
		}
		return r.processCPU
	}
	heap := medianRun(runs[0])
	fmt.Printf("\nWhat each index of findings costs a write on %s, at the database alone: %d findings copied in batches of %d into a table with the indexes named, medians of %d rounds, per 100,000 records.\n",
		engine, records, batch, o.repeat)
	what := "the server's CPU"
	if engine == "sqlite" {
		what = "this process's CPU (SQLite runs in it)"
	}
	fmt.Printf("CPU is %s; Δ is over the table with no index.\n\n", what)
	var floor costRun
	if len(floors) > 0 {
		floor = medianRun(floors)
		fmt.Printf("The COPY floor of the same records: %.2fs, server CPU %.2fs.\n\n", per(floor.wall), per(floor.serverCPU))
		fmt.Println("| indexes | s | CPU s | Δ CPU s | CPU / COPY floor's |")
		fmt.Println("|---|---|---|---|---|")
	} else {
		fmt.Println("| indexes | s | CPU s | Δ CPU s |")
		fmt.Println("|---|---|---|---|")
	}
	for i, cfg := range configs {
		m := medianRun(runs[i])
		line := fmt.Sprintf("| %s | %.2f | %.2f | %+.2f |", cfg.name, per(m.wall), per(cost(m)), per(cost(m)-cost(heap)))
		if len(floors) > 0 {
			line += fmt.Sprintf(" %.1f× |", cost(m).Seconds()/floor.serverCPU.Seconds())
		}
		fmt.Println(line)
	}
	return nil
}

// costCopier copies the filled database's findings into costTable under one
// configuration of indexes.
type costCopier interface {
	configs(ctx context.Context) ([]costConfig, error)
	run(ctx context.Context, cfg costConfig, records, batch int) (costRun, error)
	close()
}

// configsOf lists the configurations: none, each index alone, every one
// but the search text, every one.
func configsOf(indexes []costConfig) []costConfig {
	all := costConfig{name: "every one"}
	btrees := costConfig{name: "every one but the search text"}
	for _, ix := range indexes {
		all.build = append(all.build, ix.build...)
		all.search = all.search || ix.search
		if !ix.search {
			btrees.build = append(btrees.build, ix.build...)
		}
	}
	bulk := all
	bulk.name, bulk.after = "every one, built once the batches are in", true
	out := []costConfig{{name: "none (the heap alone)"}}
	out = append(out, indexes...)
	return append(out, btrees, all, bulk)
}

type pgCopier struct {
	b    *bench
	conn *pgx.Conn
	cols string
}

// pgIndexName matches an index definition as pg_indexes gives it.
var pgIndexName = regexp.MustCompile(`^CREATE (UNIQUE )?INDEX \S+ ON public\.findings `)

func newPGCopier(ctx context.Context, b *bench) (*pgCopier, error) {
	conn, err := pgx.Connect(ctx, b.dsn)
	if err != nil {
		return nil, err
	}
	c := &pgCopier{b: b, conn: conn}
	if err := conn.QueryRow(ctx, `
SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
WHERE attrelid = 'findings'::regclass AND attnum > 0 AND NOT attisdropped`).Scan(&c.cols); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	// A sequential scan reads the findings in the order they were written.
	for _, s := range []string{
		"CREATE TABLE " + costSource + " AS SELECT row_number() OVER () AS n, " + c.cols + " FROM findings",
		"CREATE UNIQUE INDEX ON " + costSource + " (n)",
		"VACUUM ANALYZE " + costSource,
	} {
		if _, err := conn.Exec(ctx, s); err != nil {
			conn.Close(ctx)
			return nil, fmt.Errorf("%s: %w", s, err)
		}
	}
	return c, nil
}

func (c *pgCopier) configs(ctx context.Context) ([]costConfig, error) {
	rows, err := c.conn.Query(ctx, `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = 'findings' ORDER BY indexname`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var indexes []costConfig
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			return nil, err
		}
		if !pgIndexName.MatchString(def) {
			return nil, fmt.Errorf("index %s: cannot read its definition %q", name, def)
		}
		indexes = append(indexes, costConfig{name: name, search: name == "findings_search",
			build: []string{pgIndexName.ReplaceAllString(def, "CREATE ${1}INDEX ON "+costTable+" ")}})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return configsOf(indexes), nil
}

func (c *pgCopier) run(ctx context.Context, cfg costConfig, records, batch int) (costRun, error) {
	setup := []string{
		"DROP TABLE IF EXISTS " + costTable,
		"CREATE TABLE " + costTable + " (LIKE findings INCLUDING DEFAULTS INCLUDING COMPRESSION)",
	}
	if !cfg.after {
		setup = append(setup, cfg.build...)
	}
	for _, s := range setup {
		if _, err := c.conn.Exec(ctx, s); err != nil {
			return costRun{}, fmt.Errorf("%s: %w", s, err)
		}
	}
	insert := "INSERT INTO " + costTable + " (" + c.cols + ") SELECT " + c.cols + " FROM " + costSource + " WHERE n > $1 AND n <= $2"
	var r costRun
	cpu := processCPU()
	var err error
	r.serverCPU, err = c.b.onServer(func() error {
		start := time.Now()
		defer func() { r.wall = time.Since(start) }()
		for from := 0; from < records; from += batch {
			if _, err := c.conn.Exec(ctx, insert, from, from+batch); err != nil {
				return err
			}
		}
		if cfg.after {
			for _, s := range cfg.build {
				if _, err := c.conn.Exec(ctx, s); err != nil {
					return fmt.Errorf("%s: %w", s, err)
				}
			}
		}
		return nil
	})
	r.processCPU = processCPU() - cpu
	return r, err
}

func (c *pgCopier) close() { c.conn.Close(context.Background()) }

type sqliteCopier struct {
	db   *sql.DB
	cols string
	// searchDef creates costSearch over costTable; searchCols are its
	// columns.
	searchDef, searchCols string
}

var (
	sqliteIndexName  = regexp.MustCompile(`^CREATE (UNIQUE )?INDEX (\S+) ON findings\b`)
	sqliteSearchName = regexp.MustCompile(`\bfindings_search\b`)
	sqliteContent    = regexp.MustCompile(`content\s*=\s*'findings'`)
)

func newSQLiteCopier(ctx context.Context, path string) (*sqliteCopier, error) {
	// The store's writer's settings: WAL, NORMAL, a 64 MiB page cache.
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=cache_size(-65536)&_pragma=temp_store(memory)&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	c := &sqliteCopier{db: db}
	if err := db.QueryRowContext(ctx, `SELECT group_concat(name, ', ') FROM (SELECT name FROM pragma_table_info('findings') ORDER BY cid)`).Scan(&c.cols); err != nil {
		db.Close()
		return nil, err
	}
	var search string
	if err := db.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE name = 'findings_search'`).Scan(&search); err != nil {
		db.Close()
		return nil, fmt.Errorf("the search text's table: %w", err)
	}
	c.searchDef = sqliteContent.ReplaceAllString(sqliteSearchName.ReplaceAllString(search, costSearch), "content = '"+costTable+"'")
	if err := db.QueryRowContext(ctx, `SELECT group_concat(name, ', ') FROM (SELECT name FROM pragma_table_info('findings_search') ORDER BY cid)`).Scan(&c.searchCols); err != nil {
		db.Close()
		return nil, err
	}
	// The source's rowids number the findings in the order they were written.
	s := "CREATE TABLE " + costSource + " AS SELECT " + c.cols + " FROM findings ORDER BY rowid"
	if _, err := db.ExecContext(ctx, s); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", s, err)
	}
	return c, nil
}

func (c *sqliteCopier) configs(ctx context.Context) ([]costConfig, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'findings' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	type index struct {
		name string
		def  sql.NullString
	}
	var found []index
	for rows.Next() {
		var ix index
		if err := rows.Scan(&ix.name, &ix.def); err != nil {
			rows.Close()
			return nil, err
		}
		found = append(found, ix)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var indexes []costConfig
	for _, ix := range found {
		if ix.def.Valid {
			if !sqliteIndexName.MatchString(ix.def.String) {
				return nil, fmt.Errorf("index %s: cannot read its definition %q", ix.name, ix.def.String)
			}
			indexes = append(indexes, costConfig{name: ix.name,
				build: []string{sqliteIndexName.ReplaceAllString(ix.def.String, "CREATE ${1}INDEX cost_${2} ON "+costTable)}})
			continue
		}
		// A constraint's index (the primary key, the natural key) has no
		// statement of its own: its columns, unique.
		var cols []string
		r, err := c.db.QueryContext(ctx, `SELECT name FROM pragma_index_info(?) ORDER BY seqno`, ix.name)
		if err != nil {
			return nil, err
		}
		for r.Next() {
			var col string
			if err := r.Scan(&col); err != nil {
				r.Close()
				return nil, err
			}
			cols = append(cols, col)
		}
		r.Close()
		indexes = append(indexes, costConfig{name: ix.name + " (" + strings.Join(cols, ", ") + ")",
			build: []string{"CREATE UNIQUE INDEX cost_" + ix.name + " ON " + costTable + " (" + strings.Join(cols, ", ") + ")"}})
	}
	indexes = append(indexes, costConfig{name: "findings_search (FTS5)", build: []string{c.searchDef}, search: true})
	return configsOf(indexes), nil
}

func (c *sqliteCopier) run(ctx context.Context, cfg costConfig, records, batch int) (costRun, error) {
	setup := []string{
		"DROP TABLE IF EXISTS " + costSearch,
		"DROP TABLE IF EXISTS " + costTable,
		"CREATE TABLE " + costTable + " AS SELECT " + c.cols + " FROM findings WHERE 0",
	}
	if !cfg.after {
		setup = append(setup, cfg.build...)
	}
	setup = append(setup, "PRAGMA wal_checkpoint(TRUNCATE)")
	for _, s := range setup {
		if _, err := c.db.ExecContext(ctx, s); err != nil {
			return costRun{}, fmt.Errorf("%s: %w", s, err)
		}
	}
	insert := "INSERT INTO " + costTable + " (rowid, " + c.cols + ") SELECT rowid, " + c.cols + " FROM " + costSource + " WHERE rowid > ?1 AND rowid <= ?2"
	index := "INSERT INTO " + costSearch + " (rowid, " + c.searchCols + ") SELECT rowid, " + c.searchCols + " FROM " + costTable + " WHERE rowid > ?1 AND rowid <= ?2"
	var r costRun
	cpu := processCPU()
	start := time.Now()
	for from := 0; from < records; from += batch {
		tx, err := c.db.BeginTx(ctx, nil)
		if err != nil {
			return costRun{}, err
		}
		if _, err := tx.ExecContext(ctx, insert, from, from+batch); err != nil {
			tx.Rollback()
			return costRun{}, err
		}
		if cfg.search && !cfg.after {
			if _, err := tx.ExecContext(ctx, index, from, from+batch); err != nil {
				tx.Rollback()
				return costRun{}, err
			}
		}
		if err := tx.Commit(); err != nil {
			return costRun{}, err
		}
	}
	if cfg.after {
		// The indexes, then the search text over every row at once.
		bulk := slices.Clone(cfg.build)
		if cfg.search {
			bulk = append(bulk, "INSERT INTO "+costSearch+" ("+costSearch+") VALUES ('rebuild')")
		}
		for _, s := range bulk {
			if _, err := c.db.ExecContext(ctx, s); err != nil {
				return costRun{}, fmt.Errorf("%s: %w", s, err)
			}
		}
	}
	r.wall = time.Since(start)
	r.processCPU = processCPU() - cpu
	return r, nil
}

func (c *sqliteCopier) close() { c.db.Close() }
