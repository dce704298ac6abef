package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/posture-dev/posture/internal/store/engines"
)

// Where probes write (-probe-into).
const (
	// probeIntoNew writes each pair's probes to a new tenant: what the
	// table's size costs an ingestion, whatever tenants hold it. Probes
	// that all went to one tenant of their own measured a mix of that and
	// of their tenant's growth: at 10M findings, the ratio rose from 1.29×
	// to 1.48× as that tenant reached 400,000 findings.
	probeIntoNew = "new"
	// probeIntoLoaded writes them to the loaded tenant: what an ingestion
	// costs a tenant that already holds the findings, the case of one
	// tenant that re-scans into a growing history.
	probeIntoLoaded = "loaded"
)

// probePairs measures ingestion into the database rb holds against
// ingestion into an empty one, in pairs run back to back: each pair
// ingests a probe report of probeRecords records through the worker into
// rb's database and into a new, empty database of the same engine (on the
// same PostgreSQL server, in the same directory for SQLite), both into
// the tenant rb.probeInto names, the order alternating from pair to pair.
// This machine's speed drifts by up to 2× within minutes, so one probe at
// each size, compared with one made before the load, measured mostly the
// drift; the two sides of a pair see the same machine. It returns the
// median of the pairs' ratios (full over empty) and prints every pair.
func (rb *readBench) probePairs(ctx context.Context, pairs int) (float64, error) {
	ratios := make([]float64, 0, pairs)
	for i := range pairs {
		empty, drop, err := rb.emptyDatabase(ctx, i)
		if err != nil {
			return 0, err
		}
		rb.pairs++
		tn := fmt.Sprintf("bench-probe-%s%d", rb.runTag, rb.pairs)
		if rb.probeInto == probeIntoLoaded {
			tn = tenant
		}
		loaded := rb.loaded
		var full, bare time.Duration
		sides := []func() error{
			func() (err error) { full, err = rb.timedProbe(ctx, tn); return err },
			func() (err error) { bare, err = empty.timedProbe(ctx, tn); return err },
		}
		if i%2 == 1 {
			slices.Reverse(sides)
		}
		for _, side := range sides {
			if err = side(); err != nil {
				break
			}
		}
		if derr := drop(); err == nil {
			err = derr
		}
		if err != nil {
			return 0, fmt.Errorf("probe pair %d: %w", i+1, err)
		}
		ratios = append(ratios, full.Seconds()/bare.Seconds())
		fmt.Printf("%s probe pair %d: %d records into tenant %q in %.2fs beside %d findings of tenant %q, %.2fs into an empty database: %.2f×\n",
			rb.engine, i+1, probeRecords, tn, full.Seconds(), loaded, tenant, bare.Seconds(), ratios[i])
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2], nil
}

// timedProbe ingests one probe report into tenant tn of rb's database,
// after a checkpoint on PostgreSQL, so that the probe does not pay for
// writing out pages an earlier step dirtied.
func (rb *readBench) timedProbe(ctx context.Context, tn string) (time.Duration, error) {
	if rb.engine == "postgres" {
		conn, err := pgx.Connect(ctx, rb.dsn)
		if err != nil {
			return 0, err
		}
		_, err = conn.Exec(ctx, "CHECKPOINT")
		_ = conn.Close(ctx)
		if err != nil {
			return 0, err
		}
	}
	return rb.ingest(ctx, tn, probeRecords)
}

// emptyDatabase opens a new, migrated, empty database beside rb's and
// returns it with the function that removes it.
func (rb *readBench) emptyDatabase(ctx context.Context, i int) (*readBench, func() error, error) {
	name := fmt.Sprintf("bench_empty_%d_%d", os.Getpid(), i)
	var dsn string
	var remove func() error
	switch rb.engine {
	case "postgres":
		admin, err := pgx.Connect(ctx, rb.dsn)
		if err != nil {
			return nil, nil, err
		}
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			_ = admin.Close(ctx)
			return nil, nil, err
		}
		// In keyword/value form the last dbname given wins.
		dsn = rb.dsn + " dbname=" + name
		remove = func() error {
			defer func() { _ = admin.Close(ctx) }()
			_, err := admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)")
			return err
		}
	case "sqlite":
		dsn = filepath.Join(filepath.Dir(rb.dsn), name+".db")
		remove = func() error {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				if err := os.Remove(dsn + suffix); err != nil && !os.IsNotExist(err) {
					return err
				}
			}
			return nil
		}
	default:
		return nil, nil, fmt.Errorf("unknown engine %q", rb.engine)
	}
	st, err := engines.Open(ctx, rb.engine, dsn)
	if err != nil {
		_ = remove()
		return nil, nil, err
	}
	empty := &readBench{bench: &bench{engine: rb.engine, ns: rb.ns, dsn: dsn, st: st}, gen: rb.gen}
	return empty, func() error {
		_ = st.Close()
		return remove()
	}, nil
}
