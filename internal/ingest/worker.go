// Package ingest is the worker: it streams one stored OCSF report, validates
// every record, and writes findings, scans and error rows in batches, reporting
// progress and the outcome through the store. The same code runs inside a
// batch/v1 Job pod (manager worker) and in the manager's in-process pool.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/store"
)

// Defaults for Worker fields left zero.
const (
	// DefaultBatchSize applies unless the store prefers another size (see
	// BatchSizer).
	DefaultBatchSize        = 1000
	DefaultProgressInterval = 500 * time.Millisecond
	DefaultMaxErrorRows     = 10000
	DefaultMaxInflight      = 2
)

// Error codes the worker adds to the parser's.
const (
	CodeProviderLimit = "provider_limit_exceeded"
	CodeScanAccount   = "scan_account_conflict"
	CodeNoRecords     = "no_records"
	CodeUnreadable    = "source_unreadable"
	CodeMalformed     = "malformed_file"
	CodeStorage       = "storage_error"
	CodeTruncated     = "errors_truncated"
	// CodeWorkerFailed: the worker stopped without a result of its own, on
	// a fault of its own (a panic) or, as the controller records it, by
	// dying or timing out attempt after attempt.
	CodeWorkerFailed = "worker_failed"
)

// scanNamespace derives scan ids for records that carry no unmapped.scan_id,
// so that re-running an ingestion lands on the same scan.
var scanNamespace = uuid.MustParse("6f0c7a55-3b8e-4f43-9d0e-4b1e2f6a7c01")

// Attempt is one try of an ingestion: what a worker must do, once. A
// retry after a lost worker is a new Attempt of the same ingestion, which
// rewrites the same rows.
type Attempt struct {
	Tenant string
	// Namespace of the Ingestion object; only used to notify its controller.
	Namespace   string
	IngestionID string
	BlobID      string
	// Attempt is this attempt's number, from 1: the store refuses the
	// writes of an attempt older than the one its run row records.
	Attempt int
	Total   int
	// ReportSHA256 is the content hash of the report. Records without
	// unmapped.scan_id land on a scan derived from it and the provider, so
	// uploading the same report again rewrites the same findings instead of
	// adding copies. Empty: the scan is derived from the ingestion id.
	ReportSHA256 string
	// AllowedAccounts, when non-nil, lists "type/uid" accounts that may be
	// billed; records of other accounts are invalid (provider_limit_exceeded).
	AllowedAccounts map[string]bool
}

// Job is the name Attempt had; internal/store's tests still use it.
//
// Deprecated: use Attempt.
type Job = Attempt

// Key identifies an attempt.
func (a Attempt) Key() string { return fmt.Sprintf("%s/%s#%d", a.Tenant, a.IngestionID, a.Attempt) }

// Worker runs attempts against a store.
type Worker struct {
	// Store is where the worker reads the report and writes the run.
	Store interface {
		store.Blobs
		store.Runs
	}
	Log              logr.Logger
	BatchSize        int
	ProgressInterval time.Duration
	MaxErrorRows     int
	// MaxInflight bounds the batch writes running side by side (default 2).
	MaxInflight int
	// RecordsPerSecond, when positive, paces each run to at most that many
	// records a second. A run of the 1,500-record example then lasts long
	// enough to kill the process under it and watch the next attempt finish
	// (make dev, hack/devenv's test); zero, the default, never waits.
	RecordsPerSecond float64
	// Now is injectable for tests.
	Now func() time.Time
}

// ErrSuperseded means a newer attempt owns the run; the caller should stop quietly.
var ErrSuperseded = errors.New("run superseded by a newer attempt")

// Run processes one attempt to its outcome. The outcome (succeeded or failed) is
// always recorded in the store unless the attempt was superseded or ctx ended;
// the returned error is for logs and exit codes only.
func (w *Worker) Run(ctx context.Context, attempt Attempt) error {
	log := w.Log.WithValues("tenant", attempt.Tenant, "ingestion", attempt.IngestionID, "attempt", attempt.Attempt)
	if err := w.Store.StartRun(ctx, attempt.Tenant, attempt.IngestionID, attempt.Attempt, attempt.Total); err != nil {
		if errors.Is(err, store.ErrStaleAttempt) {
			return ErrSuperseded
		}
		return fmt.Errorf("start run: %w", err)
	}
	r := &run{w: w, attempt: attempt, log: log, seenScans: map[string]bool{}, scanOwners: map[string]scanOwner{}, derivedScans: map[account]string{}, lastProgress: w.now()}
	outcome := r.processCaught(ctx)
	if ctx.Err() != nil {
		// Stopped from outside (shutdown): leave the run open so the controller
		// starts a new attempt rather than recording a failure nobody caused.
		return ctx.Err()
	}
	if r.superseded {
		return ErrSuperseded
	}
	if err := w.Store.FinishRun(ctx, attempt.Tenant, attempt.IngestionID, attempt.Attempt, outcome); err != nil {
		if errors.Is(err, store.ErrStaleAttempt) {
			return ErrSuperseded
		}
		return fmt.Errorf("finish run: %w", err)
	}
	log.Info("ingestion run finished", "status", outcome.Status, "processed", outcome.Processed, "invalid", outcome.Invalid)
	if outcome.Status == store.RunFailed {
		return &FailedError{Message: outcome.Message}
	}
	if f, ok := w.Store.(store.SearchIndexFlusher); ok {
		// The run is recorded; a flush that fails only leaves searches
		// reading the pending entries until the next one.
		if err := f.FlushSearchIndex(ctx); err != nil {
			log.Error(err, "search index not flushed after the ingestion")
		}
	}
	return nil
}

// FailedError means the run ended failed and that outcome is recorded: the
// worker did its job, the report was the problem.
type FailedError struct{ Message string }

func (e *FailedError) Error() string { return "ingestion failed: " + e.Message }

func (w *Worker) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// BatchSizer is implemented by stores that write more efficiently in
// batches of another size than DefaultBatchSize.
type BatchSizer interface {
	PreferredBatchSize() int
}

// RecordsPerBatch is how many records a batch write carries: BatchSize,
// else the store's preferred size, else DefaultBatchSize.
func (w *Worker) RecordsPerBatch() int {
	if w.BatchSize > 0 {
		return w.BatchSize
	}
	if bs, ok := w.Store.(BatchSizer); ok {
		if n := bs.PreferredBatchSize(); n > 0 {
			return n
		}
	}
	return DefaultBatchSize
}

func (w *Worker) progressInterval() time.Duration {
	if w.ProgressInterval > 0 {
		return w.ProgressInterval
	}
	return DefaultProgressInterval
}

func (w *Worker) maxInflight() int {
	if w.MaxInflight > 0 {
		return w.MaxInflight
	}
	return DefaultMaxInflight
}

func (w *Worker) maxErrorRows() int {
	if w.MaxErrorRows > 0 {
		return w.MaxErrorRows
	}
	return DefaultMaxErrorRows
}

// run is the state of one attempt.
type run struct {
	w       *Worker
	attempt Attempt
	log     logr.Logger

	progress  store.Progress
	batch     store.Batch
	errorRows int
	truncated bool
	seenScans map[string]bool
	// scanOwners holds the account of each scan id the report names: a scan
	// covers one account, the first record's or the stored scan's.
	scanOwners map[string]scanOwner
	// derivedScans caches the scan id of records without one, per account.
	derivedScans map[account]string
	// raw holds the raw records of the pending batch.
	raw          rawArena
	lastProgress time.Time
	superseded   bool
	// inflight are the batch writes handed out and not yet reaped, oldest
	// first: parsing overlaps writing.
	inflight []inflightWrite
}

// inflightWrite is one background batch write and the progress it completes.
type inflightWrite struct {
	done     chan error
	progress store.Progress
	// raw are the arena blocks the batch's records live in, reused once the
	// write is done.
	raw [][]byte
}

// account is a provider account: the key of derived scan ids.
type account struct{ providerType, providerUID string }

func (a account) String() string { return a.providerType + "/" + a.providerUID }

// scanOwner is the account a scan id belongs to, and the record of the
// report that made it so (-1: a scan stored before this run).
type scanOwner struct {
	account
	record int
}

func (r *run) process(ctx context.Context) store.Outcome {
	rc, err := r.w.Store.OpenBlob(ctx, r.attempt.Tenant, r.attempt.BlobID)
	if err != nil {
		return r.fail(ctx, CodeUnreadable, fmt.Sprintf("the uploaded report (blob %s) cannot be read: %v", r.attempt.BlobID, err))
	}
	defer rc.Close()

	reader := ocsf.NewReader(rc)
	validator := ocsf.NewValidator()
	batchSize := r.w.RecordsPerBatch()
	var pace *rate.Limiter
	if r.w.RecordsPerSecond > 0 {
		pace = rate.NewLimiter(rate.Limit(r.w.RecordsPerSecond), 1)
	}
	for {
		if pace != nil {
			if err := pace.Wait(ctx); err != nil {
				// Only a stop from outside ends a wait for one token; like
				// any shutdown, it leaves the run open for the next attempt.
				return store.Outcome{}
			}
		}
		// The record's bytes are borrowed; addFinding copies what it keeps.
		rec, err := reader.NextBorrowed()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				return store.Outcome{}
			}
			// Uploads are checked whole before they are accepted, so this means
			// the stored blob differs from what was accepted.
			if ferr := r.drain(ctx); ferr != nil {
				return r.storageFailure(ctx, ferr)
			}
			return r.fail(ctx, CodeMalformed, fmt.Sprintf("the stored report cannot be parsed after %d records: %v", r.progress.Processed, err))
		}
		finding, problems := validator.Check(rec)
		if len(problems) == 0 && r.attempt.AllowedAccounts != nil {
			account := finding.ProviderType + "/" + finding.ProviderUID
			if !r.attempt.AllowedAccounts[account] {
				problems = []ocsf.Problem{{
					Code:    CodeProviderLimit,
					Detail:  fmt.Sprintf("account %s would exceed the subscription's provider limit", account),
					Pointer: finding.AccountPointer,
					Value:   ocsf.ValueText(finding.ProviderUID),
				}}
			}
		}
		if len(problems) == 0 && finding.ScanID != "" {
			if problems, err = r.scanAccount(ctx, rec, finding); err != nil {
				return r.storageFailure(ctx, err)
			}
		}
		if len(problems) > 0 {
			r.progress.Invalid++
			r.addErrors(rec, finding.UID, problems)
		} else {
			r.addFinding(rec, finding)
		}
		r.progress.Processed++
		if len(r.batch.Findings)+len(r.batch.Errors) >= batchSize {
			if err := r.flush(ctx); err != nil {
				return r.storageFailure(ctx, err)
			}
		}
	}
	if err := r.drain(ctx); err != nil {
		return r.storageFailure(ctx, err)
	}
	if r.progress.Processed == 0 {
		return r.fail(ctx, CodeNoRecords, "the report contains no Detection Finding records (an empty array)")
	}
	if r.progress.Processed == r.progress.Invalid {
		return r.fail(ctx, CodeNoRecords, fmt.Sprintf("none of the %d records is a valid Detection Finding; see the record errors", r.progress.Processed))
	}
	return store.Outcome{Status: store.RunSucceeded, Progress: r.progress}
}

// processCaught is process with its faults caught: a panic, in the parse or
// in a batch's write, fails this ingestion instead of ending the process,
// which with the in-process executor is the manager, every tenant's
// ingestions with it, and again at each retry of the same report.
func (r *run) processCaught(ctx context.Context) (outcome store.Outcome) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		r.log.Error(fmt.Errorf("panic: %v", v), "ingestion stopped on an internal error", "record", r.progress.Processed, "stack", string(debug.Stack()))
		// The writes under way end before the outcome is recorded.
		for _, w := range r.inflight {
			<-w.done
		}
		r.inflight = nil
		outcome = r.internalFailure(ctx)
	}()
	return r.process(ctx)
}

// internalFailure fails the run on a fault of the worker's own.
func (r *run) internalFailure(ctx context.Context) store.Outcome {
	return r.fail(ctx, CodeWorkerFailed, fmt.Sprintf("the worker stopped on an internal error at record %d; its log has the details", r.progress.Processed))
}

// errPanicked is a batch write's panic, caught on the goroutine it ran on.
type errPanicked struct{ value any }

func (e errPanicked) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// scanAccount holds a record to the account of the scan it names: a record
// of another account would otherwise be counted in that scan, and in that
// account's latest findings.
func (r *run) scanAccount(ctx context.Context, rec ocsf.Record, f ocsf.Finding) ([]ocsf.Problem, error) {
	acct := account{f.ProviderType, f.ProviderUID}
	owner, ok := r.scanOwners[f.ScanID]
	if !ok {
		owner = scanOwner{acct, rec.Index}
		pt, pu, err := r.w.Store.ScanAccount(ctx, r.attempt.Tenant, f.ScanID)
		switch {
		case err == nil:
			owner = scanOwner{account{pt, pu}, -1}
		case !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
		r.scanOwners[f.ScanID] = owner
	}
	if owner.account == acct {
		return nil, nil
	}
	from := "a scan stored earlier"
	if owner.record >= 0 {
		from = fmt.Sprintf("record %d", owner.record)
	}
	return []ocsf.Problem{{
		Code: CodeScanAccount,
		Detail: fmt.Sprintf("unmapped.scan_id %s is the scan of account %s (%s), and this record is of account %s; a scan covers one account",
			f.ScanID, owner.account, from, acct),
		Pointer: "/unmapped/scan_id",
		Value:   ocsf.ValueText(f.ScanID),
	}}, nil
}

func (r *run) addFinding(rec ocsf.Record, f ocsf.Finding) {
	scanID := f.ScanID
	if scanID == "" {
		scanID = r.derivedScanID(account{f.ProviderType, f.ProviderUID})
	}
	if !r.seenScans[scanID] {
		r.seenScans[scanID] = true
		r.batch.Scans = append(r.batch.Scans, store.Scan{
			ID:           scanID,
			ProviderType: f.ProviderType,
			ProviderUID:  f.ProviderUID,
			Trigger:      "imported",
			IngestionID:  r.attempt.IngestionID,
		})
	}
	r.batch.Findings = append(r.batch.Findings, store.Finding{
		UID:          f.UID,
		ScanID:       scanID,
		IngestionID:  r.attempt.IngestionID,
		CheckID:      f.CheckID,
		Title:        f.Title,
		Severity:     f.Severity,
		SeverityID:   f.SeverityID,
		StatusCode:   f.StatusCode,
		Status:       f.Status,
		Region:       f.Region,
		ProviderType: f.ProviderType,
		ProviderUID:  f.ProviderUID,
		ResourceUID:  f.ResourceUID,
		Time:         f.Time,
		Raw:          r.raw.keep(rec.Raw),
	})
}

// derivedScanID is the scan of records of acct that carry no scan id.
func (r *run) derivedScanID(acct account) string {
	if id, ok := r.derivedScans[acct]; ok {
		return id
	}
	seed := r.attempt.IngestionID
	if r.attempt.ReportSHA256 != "" {
		seed = "sha256:" + r.attempt.ReportSHA256
	}
	id := uuid.NewSHA1(scanNamespace, []byte(seed+"\x00"+acct.providerType+"\x00"+acct.providerUID)).String()
	r.derivedScans[acct] = id
	return id
}

func (r *run) addErrors(rec ocsf.Record, uid string, problems []ocsf.Problem) {
	for _, p := range problems {
		if r.truncated {
			return
		}
		if r.errorRows >= r.w.maxErrorRows()-1 {
			r.truncated = true
			r.batch.Errors = append(r.batch.Errors, store.IngestionError{
				Code:   CodeTruncated,
				Detail: fmt.Sprintf("more problems were found from record %d on; only the first %d are recorded, but every invalid record is counted", rec.Index, r.errorRows),
			})
			r.errorRows++
			return
		}
		idx := rec.Index
		r.batch.Errors = append(r.batch.Errors, store.IngestionError{
			RecordIndex: &idx,
			FindingUID:  uid,
			Code:        p.Code,
			Detail:      p.Detail,
			Pointer:     p.Pointer,
			Value:       truncate(p.Value, 100),
		})
		r.errorRows++
	}
}

// flush hands the pending batch to a background write and returns at once,
// so parsing goes on while the store works. Up to maxInflight writes run side
// by side (PostgreSQL serves each on its own connection and core); when that
// many are out, flush first waits for the oldest. The error is that of a
// finished write.
func (r *run) flush(ctx context.Context) error {
	if len(r.inflight) >= r.w.maxInflight() {
		if err := r.waitOldest(ctx); err != nil {
			return err
		}
	}
	b := r.batch
	r.batch = store.Batch{}
	w := inflightWrite{done: make(chan error, 1), progress: r.progress, raw: r.raw.take()}
	r.inflight = append(r.inflight, w)
	go func() {
		var err error
		if len(b.Findings)+len(b.Errors)+len(b.Scans) > 0 {
			// A panic here is on a goroutine of its own: out of
			// processCaught's reach, it would end the process.
			err = r.caught("batch write", func() error {
				return r.withRetry(ctx, func() error {
					return r.w.Store.WriteBatch(ctx, r.attempt.Tenant, r.attempt.IngestionID, r.attempt.Attempt, b)
				})
			})
		}
		w.done <- err
	}()
	return nil
}

// drain flushes what is pending and waits until everything is written.
func (r *run) drain(ctx context.Context) error {
	if err := r.flush(ctx); err != nil {
		return err
	}
	for len(r.inflight) > 0 {
		if err := r.waitOldest(ctx); err != nil {
			return err
		}
	}
	return nil
}

// waitOldest waits for the oldest write in flight. Writes are reaped in the
// order they were handed out, so the progress reported afterwards counts
// only records whose batches are all stored; it is throttled so that a fast
// run does not turn every batch into a progress write.
func (r *run) waitOldest(ctx context.Context) error {
	w := r.inflight[0]
	r.inflight = r.inflight[1:]
	if err := <-w.done; err != nil {
		// Let the other writes end before the run reports its outcome.
		for _, other := range r.inflight {
			<-other.done
		}
		r.inflight = nil
		if errors.Is(err, store.ErrStaleAttempt) {
			r.superseded = true
		}
		return err
	}
	r.raw.giveBack(w.raw)
	if now := r.w.now(); now.Sub(r.lastProgress) >= r.w.progressInterval() {
		r.lastProgress = now
		err := r.withRetry(ctx, func() error {
			return r.w.Store.UpdateRun(ctx, r.attempt.Tenant, r.attempt.IngestionID, r.attempt.Attempt, w.progress)
		})
		if errors.Is(err, store.ErrStaleAttempt) {
			r.superseded = true
		}
		return err
	}
	return nil
}

// withRetry retries transient storage errors; a superseded attempt is final.
func (r *run) withRetry(ctx context.Context, op func() error) error {
	var err error
	delay := 100 * time.Millisecond
	for attempt := 0; attempt < 5; attempt++ {
		if err = op(); err == nil {
			return nil
		}
		if errors.Is(err, store.ErrStaleAttempt) {
			return err // final; wait() records it
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.log.Info("storage write failed, retrying", "error", err.Error(), "delay", delay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay *= 2
	}
	return err
}

func (r *run) storageFailure(ctx context.Context, err error) store.Outcome {
	if r.superseded || ctx.Err() != nil {
		return store.Outcome{}
	}
	if errors.As(err, new(errPanicked)) {
		return r.internalFailure(ctx)
	}
	return r.fail(ctx, CodeStorage, fmt.Sprintf("storing results failed after retries at record %d: %v", r.progress.Processed, err))
}

// fail records an ingestion-level error row and returns the failed outcome; progress
// reached so far is kept, as the spec asks a failed job to show it.
func (r *run) fail(ctx context.Context, code, detail string) store.Outcome {
	jobError := store.Batch{Errors: []store.IngestionError{{Code: code, Detail: detail}}}
	// fail runs after a fault too, when the store may be the part at fault.
	if err := r.caught("recording the ingestion's failure", func() error {
		return r.w.Store.WriteBatch(ctx, r.attempt.Tenant, r.attempt.IngestionID, r.attempt.Attempt, jobError)
	}); err != nil {
		if errors.Is(err, store.ErrStaleAttempt) {
			r.superseded = true
		}
		r.log.Error(err, "recording the ingestion-level error failed", "code", code)
	}
	return store.Outcome{Status: store.RunFailed, Progress: r.progress, Message: detail}
}

// caught runs op, its panic logged with the stack and returned as an
// errPanicked.
func (r *run) caught(what string, op func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = errPanicked{v}
			r.log.Error(err, what+" stopped on an internal error", "stack", string(debug.Stack()))
		}
	}()
	return op()
}

// truncate keeps at most n characters (runes) of s: the API promises values
// of at most 100 characters, and the validator's values already end in "…"
// when it cut them, which a cut by bytes would take off again.
func truncate(s string, n int) string {
	count := 0
	for i := range s {
		if count == n {
			return strings.Clone(s[:i])
		}
		count++
	}
	return s
}
