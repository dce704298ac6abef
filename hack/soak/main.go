// Command soak is make soak: the whole system, as make dev runs it but on
// PostgreSQL (the manager binary with its REST API, its aggregated API
// registered through kube-apiserver's aggregator and the in-process
// executor; the MCP server binary; three tenants with a subscription and
// one without), under mixed load for a while:
//
//   - uploads of several sizes from every tenant, through REST and
//     through kube-apiserver, with invalid records, re-uploads, malformed
//     files (400), over-size files (413) and refused callers (401, 402,
//     403);
//   - reads of every shape: ingestions (list, get, errors), findings (list,
//     filters, sorts, search, cursor, page numbers, latest, counts, one
//     finding), scans, providers, the tenant; sign-ins, some with a wrong
//     password, refreshes and sign-outs; MCP tool calls through the MCP
//     server over HTTP; kubectl's lists through kube-apiserver;
//   - another tenant's ids asked for through every door;
//   - kill -9 of the manager at random moments, restarted by make dev's
//     supervisor.
//
// It prints the throughput, p50/p95/p99 per operation, the answers by
// status and code, and the manager's RSS over time. Then it checks that
// every accepted record is stored exactly once, that every refused record
// and upload has its reason, and that no tenant saw another's data, and
// exits 1 if any check failed. make test runs a one-minute version
// (soak_test.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func main() {
	minutes := 10.0
	if v := os.Getenv("SOAK_MINUTES"); v != "" {
		m, err := strconv.ParseFloat(v, 64)
		if err != nil || m <= 0 {
			fmt.Fprintf(os.Stderr, "soak: SOAK_MINUTES=%q is not a positive number of minutes\n", v)
			os.Exit(2)
		}
		minutes = m
	}
	var cfg Config
	flag.Float64Var(&minutes, "minutes", minutes, "Minutes of mixed load (default: SOAK_MINUTES, else 10); the drain and the checks come after.")
	seed := flag.Uint64("seed", uint64(time.Now().UnixNano()), "Seed of the run's choices (kinds and sizes of uploads, reads, kill moments); the run prints it.")
	flag.StringVar(&cfg.BinDir, "bin", "bin", "Directory holding the manager and mcp-server binaries (make soak builds them).")
	flag.StringVar(&cfg.Dir, "dir", ".soak", "Directory for the system's log (soak.log), kubeconfig and pid files, each replaced.")
	flag.BoolVar(&cfg.Short, "short", false, "make test's version: smaller reports and upload limit, one kill.")
	flag.Parse()
	cfg.Load = time.Duration(minutes * float64(time.Minute))
	cfg.Seed = *seed
	cfg.Out = os.Stdout
	if abs, err := filepath.Abs(cfg.BinDir); err == nil {
		cfg.BinDir = abs
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	if len(res.Problems) > 0 {
		fmt.Fprintf(os.Stderr, "soak: FAILED (seed %d):\n", cfg.Seed)
		for _, p := range res.Problems {
			fmt.Fprintln(os.Stderr, "  "+p)
		}
		os.Exit(1)
	}
	fmt.Printf("soak: green (seed %d)\n", cfg.Seed)
}
