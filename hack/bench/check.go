package main

// make bench-check (-check): the bounds a change to the store must keep,
// judged on one run, so that the two sides of every bound share the
// machine. The ratios survive this machine's swings; absolute figures do
// not, which is why SQLite's bound is set low.

import (
	"errors"
	"fmt"
	"strings"
)

const (
	// checkCopyRatio bounds PostgreSQL's worker time over the COPY floor's,
	// the median of the runs' own ratios.
	checkCopyRatio = 3.0
	// checkSQLiteRate bounds SQLite's worker, in records a second (the
	// median run).
	checkSQLiteRate = 3000.0
	// checkReadRatio bounds each read shape's p95 at the largest size over
	// its p95 at the smallest.
	checkReadRatio = 3.0
)

// check prints each bound with what the run measured and fails when one
// is not kept.
func check(results []result, reads []readOutcome) error {
	var failed []string
	verdict := func(ok bool, what string) {
		mark := "ok  "
		if !ok {
			mark = "FAIL"
			failed = append(failed, what)
		}
		fmt.Printf("%s %s\n", mark, what)
	}
	fmt.Println("\n== make bench-check ==")
	engines := map[string]bool{}
	for _, r := range results {
		if r.records != 100_000 {
			continue
		}
		engines[r.engine] = true
		switch r.engine {
		case "postgres":
			verdict(r.medRatio <= checkCopyRatio, fmt.Sprintf("postgres, %d records: worker / COPY %.2f× (runs %.2f–%.2f; bound %.0f×); worker %.0f records/s, server CPU %.2f s against the COPY's %.2f s",
				r.records, r.medRatio, r.minRatio, r.maxRatio, checkCopyRatio, float64(r.records)/r.worker.Seconds(), r.serverCPU.Seconds(), r.copyCPU.Seconds()))
		case "sqlite":
			rate := float64(r.records) / r.worker.Seconds()
			verdict(rate >= checkSQLiteRate, fmt.Sprintf("sqlite, %d records: worker %.0f records/s (bound %.0f)", r.records, rate, checkSQLiteRate))
		}
	}
	for _, e := range []string{"postgres", "sqlite"} {
		if !engines[e] {
			verdict(false, e+": no 100,000-record ingestion was run")
		}
	}
	for _, o := range reads {
		if len(o.sizes) < 2 {
			verdict(false, o.engine+": the read phase ran one size; the check compares two")
			continue
		}
		last := o.sizes[len(o.sizes)-1]
		worst, worstShape := 0.0, ""
		n := 0
		for _, sh := range o.shapes {
			r := o.ratio(sh.name)
			if sh.exception != "" {
				fmt.Printf("     %s, %s: %.1f× at %s (not bound: %s)\n", o.engine, sh.name, r, humanCount(last), sh.exception)
				continue
			}
			n++
			if r > worst {
				worst, worstShape = r, sh.name
			}
			if r > checkReadRatio {
				verdict(false, fmt.Sprintf("%s, %s: p95 %s ms at %s, %s ms at %s: %.1f× (bound %.0f×)", o.engine, sh.name,
					ms(o.results[last][sh.name].p95), humanCount(last), ms(o.results[o.sizes[0]][sh.name].p95), humanCount(o.sizes[0]), r, checkReadRatio))
			}
		}
		verdict(worst <= checkReadRatio, fmt.Sprintf("%s: %d read shapes, the worst p95 ratio %s / %s %.1f× (%s; bound %.0f×)",
			o.engine, n, humanCount(last), humanCount(o.sizes[0]), worst, worstShape, checkReadRatio))
	}
	if len(failed) > 0 {
		return errors.New("bench-check failed:\n  " + strings.Join(failed, "\n  "))
	}
	fmt.Println("bench-check passed")
	return nil
}
