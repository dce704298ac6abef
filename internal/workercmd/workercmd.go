// Package workercmd is the worker's command line: what an ingestion Job's
// pod runs (the manager binary's "worker" subcommand). It imports the
// ingestion engine, the store and the billing codec, and never the
// controllers: a pod that only parses a report carries no controller code.
package workercmd

import (
	"errors"
	"flag"
	"os"
	"runtime/debug"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/posture-dev/posture/internal/billing"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/store/engines"
)

// Main runs one ingestion attempt: what a Job pod does. It needs no
// Kubernetes credentials; the outcome goes to the store, where the controller
// reads it. Exit codes: 0 outcome recorded (completed or failed), 1 the run
// could not record an outcome (the Job retries the pod).
func Main(args []string) int {
	var attempt ingest.Attempt
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.StringVar(&attempt.Tenant, "tenant", "", "Tenant of the ingestion.")
	fs.StringVar(&attempt.IngestionID, "ingestion", "", "Ingestion id.")
	fs.StringVar(&attempt.BlobID, "blob", "", "Stored upload to parse.")
	fs.IntVar(&attempt.Attempt, "attempt", 1, "Attempt number given by the controller.")
	fs.IntVar(&attempt.Total, "total", 0, "Records counted at upload.")
	fs.StringVar(&attempt.ReportSHA256, "report-sha256", "", "SHA-256 of the report: the seed of scan ids for records without unmapped.scan_id.")
	fs.Func("allowed-accounts", `JSON array of "type/uid" accounts that may be billed; records of others are invalid (provider_limit_exceeded). Unset: no restriction.`, func(v string) error {
		allowed, err := billing.ParseAllowedAccounts(v)
		attempt.AllowedAccounts = allowed
		return err
	})
	driver := fs.String("store-driver", env("POSTURE_STORE_DRIVER", "postgres"), "Store engine.")
	opts := zap.Options{}
	opts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("worker")
	if attempt.Tenant == "" || attempt.IngestionID == "" || attempt.BlobID == "" {
		log.Error(nil, "--tenant, --ingestion and --blob are required")
		return 2
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// The worker's live data is two batches and one record, whatever the
		// report's size; a soft limit keeps the garbage collector from letting
		// the heap drift far above that (docs/performance.md).
		debug.SetMemoryLimit(64 << 20)
	}
	ctx := ctrl.SetupSignalHandler()
	st, err := engines.Open(ctx, *driver, os.Getenv("POSTURE_STORE_DSN"))
	if err != nil {
		log.Error(err, "open store")
		return 1
	}
	defer st.Close()
	w := &ingest.Worker{Store: st, Log: log}
	err = w.Run(ctx, attempt)
	var failed *ingest.FailedError
	switch {
	case err == nil, errors.Is(err, ingest.ErrSuperseded):
		return 0
	case errors.As(err, &failed):
		// The failure is recorded: the pod did its task, the report was the problem.
		log.Info("ingestion failed", "reason", failed.Message)
		return 0
	}
	log.Error(err, "ingestion run could not record an outcome")
	return 1
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
