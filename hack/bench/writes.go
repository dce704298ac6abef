package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/reportgen"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/engines"
	"github.com/posture-dev/posture/webhook"
)

// bench runs one report against one engine in a fresh database.
type bench struct {
	k8s     client.Client
	ns      string
	manager string
	dir     string
	engine  string
	pg      *pgServer

	dsn string
	st  store.Store
	// statements lists the server's statements after a leave-out run.
	statements bool
}

var dbSeq atomic.Int64

// close ends a run and removes its database, so that the next run's files
// reuse the memory this one's filled instead of claiming more: on a virtual
// machine, page cache that the host has yet to back costs far more to write
// than reused pages, whichever step happens to allocate them.
func (b *bench) close() {
	_ = b.st.Close()
	switch b.engine {
	case "postgres":
		if err := b.pg.psql("postgres", "DROP DATABASE "+b.db()+" WITH (FORCE)"); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	case "sqlite":
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(b.dsn + suffix)
		}
	}
}

func (b *bench) open(ctx context.Context) error {
	switch b.engine {
	case "postgres":
		name := fmt.Sprintf("bench_%d", dbSeq.Add(1))
		if err := b.pg.psql("postgres", "CREATE DATABASE "+name); err != nil {
			return err
		}
		b.dsn = b.pg.dsn + " dbname=" + name
	case "sqlite":
		b.dsn = filepath.Join(b.dir, fmt.Sprintf("bench-%d.db", dbSeq.Add(1)))
	default:
		return fmt.Errorf("unknown engine %q", b.engine)
	}
	st, err := engines.Open(ctx, b.engine, b.dsn)
	b.st = st
	return err
}

// onServer runs a timed step and returns the CPU time PostgreSQL spent
// during it (zero on SQLite). It first lets the server finish the work
// earlier steps left behind: a CHECKPOINT writes out the pages they dirtied
// (the upload dirties some 200 MB), so the checkpointer does not spend the
// step's CPU on them.
func (b *bench) onServer(step func() error) (time.Duration, error) {
	if b.engine != "postgres" {
		return 0, step()
	}
	if err := b.pg.psql(b.db(), "CHECKPOINT"); err != nil {
		return 0, err
	}
	before := b.pg.cpu()
	err := step()
	return b.pg.cpu() - before, err
}

func (b *bench) db() string {
	return strings.TrimPrefix(b.dsn[strings.LastIndex(b.dsn, "dbname="):], "dbname=")
}

func (b *bench) runFile(ctx context.Context, path string, records int) (result, error) {
	if err := b.open(ctx); err != nil {
		return result{}, err
	}
	defer b.close()
	fi, err := os.Stat(path)
	if err != nil {
		return result{}, err
	}
	r := result{engine: b.engine, records: records, bytes: fi.Size()}
	f, err := os.Open(path)
	if err != nil {
		return result{}, err
	}
	defer f.Close()
	ing, up, peak, err := b.upload(ctx, filepath.Base(path), f)
	if err != nil {
		return result{}, err
	}
	r.upload, r.uploadPeakRSS = up, peak
	if r.serverCPU, err = b.onServer(func() (err error) {
		r.worker, r.workerRSS, r.workerCPU, err = b.work(ctx, ing)
		return err
	}); err != nil {
		return result{}, err
	}
	if err := b.verify(ctx, ing, records); err != nil {
		return result{}, err
	}
	if b.engine == "postgres" {
		if r.copyCPU, err = b.onServer(func() (err error) {
			r.copyFloor, err = b.copyFloor(path)
			return err
		}); err != nil {
			return result{}, err
		}
	}
	return r, nil
}

// runBig streams a generated report of about size bytes straight into the
// upload (no file), then parses it.
func (b *bench) runBig(ctx context.Context, gen *reportgen.Generator, size int64) (result, error) {
	if err := b.open(ctx); err != nil {
		return result{}, err
	}
	defer b.close()
	pr, pw := io.Pipe()
	var records atomic.Int64
	var written atomic.Int64
	go func() {
		n, err := gen.Write(countingWriter{pw, &written}, -1, size, &records)
		_ = n
		pw.CloseWithError(err)
	}()
	ing, up, peak, err := b.upload(ctx, "big.ocsf.json", pr)
	if err != nil {
		return result{}, err
	}
	r := result{engine: b.engine + " (large)", records: int(records.Load()), bytes: written.Load(), upload: up, uploadPeakRSS: peak}
	if r.worker, r.workerRSS, r.workerCPU, err = b.work(ctx, ing); err != nil {
		return result{}, err
	}
	if err := b.verify(ctx, ing, r.records); err != nil {
		return result{}, err
	}
	return r, nil
}

type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// upload POSTs the report through the real API handler over loopback HTTP,
// streaming the multipart body, and samples this process's RSS meanwhile
// (the API server runs in this process).
func (b *bench) upload(ctx context.Context, name string, content io.Reader) (*posturev1.Ingestion, time.Duration, int64, error) {
	key := "pk_bench.0123456789abcdef0123456789abcdef0123456789"
	srv := &webhook.Server{
		Client: b.k8s, APIReader: b.k8s, Store: b.st, Log: logr.Discard(), MaxUploadBytes: 4 << 30,
		Auth: auth.StaticKey{KeyHash: auth.HashKey(key), Principal: auth.Principal{
			Tenant: tenant, Namespace: b.ns, User: "bench", KeyPrefix: "pk_bench",
			Permissions: auth.AllPermissions(), Subscribed: true,
		}},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, 0, 0, err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()

	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		w, err := mw.CreateFormFile("file", name)
		if err == nil {
			_, err = io.CopyBuffer(w, content, make([]byte, 256<<10))
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ln.Addr().String()+"/api/v1/ingestions", pr)
	if err != nil {
		return nil, 0, 0, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Api-Key "+key)

	runtime.GC()
	debug.FreeOSMemory()
	stop := make(chan struct{})
	peak := make(chan int64)
	go samplePeak(os.Getpid(), "VmRSS", 20*time.Millisecond, stop, peak)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	elapsed := time.Since(start)
	close(stop)
	maxRSS := <-peak
	if err != nil {
		return nil, 0, 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return nil, 0, 0, fmt.Errorf("upload: %d %s", resp.StatusCode, body)
	}
	var doc struct {
		Data struct{ ID string } `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, 0, 0, err
	}
	var ing posturev1.Ingestion
	if err := b.k8s.Get(ctx, client.ObjectKey{Namespace: b.ns, Name: doc.Data.ID}, &ing); err != nil {
		return nil, 0, 0, err
	}
	return &ing, elapsed, maxRSS, nil
}

// work runs `manager worker` for the ingestion as a Job pod would and
// returns its wall time, peak RSS (KiB) and CPU time.
func (b *bench) work(ctx context.Context, ing *posturev1.Ingestion) (time.Duration, int64, time.Duration, error) {
	up := ing.Spec.Source.Upload
	logPath := filepath.Join(b.dir, "worker-"+ing.Name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return 0, 0, 0, err
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, b.manager, "worker",
		"--tenant="+tenant, "--ingestion="+ing.Name, "--blob="+up.BlobID, "--attempt=1",
		"--total="+strconv.FormatInt(ing.Spec.RecordCount, 10), "--report-sha256="+up.SHA256,
		"--store-driver="+b.engine)
	cmd.Env = append(os.Environ(), "POSTURE_STORE_DSN="+b.dsn)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	// Peak RSS is read from the child's own VmHWM while it runs: rusage's
	// ru_maxrss is no good here, as exec folds the parent's high-water mark
	// into the child's (Go forks with CLONE_VM), so it reports this process.
	// The kernel keeps the high-water mark, so the period only bounds how
	// late a rise can be seen, and the sampler shares the two cores with
	// the run it measures.
	stop := make(chan struct{})
	peak := make(chan int64)
	go samplePeak(cmd.Process.Pid, "VmHWM", 20*time.Millisecond, stop, peak)
	err = cmd.Wait()
	elapsed := time.Since(start)
	close(stop)
	hwm := <-peak
	if err != nil {
		log, _ := os.ReadFile(logPath)
		return 0, 0, 0, fmt.Errorf("manager worker: %w\n%s", err, log)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return elapsed, hwm, time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// verify checks that the worker's run succeeded and that every record
// became a finding. It runs after the timed step: counting the findings
// reads the whole ingestion back, which is no part of ingesting it.
func (b *bench) verify(ctx context.Context, ing *posturev1.Ingestion, records int) error {
	run, err := b.st.GetRun(ctx, tenant, ing.Name)
	if err != nil {
		return err
	}
	if run.Status != store.RunSucceeded || run.Processed != records || run.Invalid != 0 {
		return fmt.Errorf("run ended %s with %d processed, %d invalid (%s); want %d valid", run.Status, run.Processed, run.Invalid, run.Message, records)
	}
	_, count, err := b.st.ListFindings(ctx, tenant, store.FindingQuery{IngestionID: ing.Name, Page: store.Page{Number: 1, Size: 1}})
	if err != nil {
		return err
	}
	if count != records {
		return fmt.Errorf("%d findings stored, want %d", count, records)
	}
	return nil
}

// copyFloor times psql's \copy of the same records, one per row, into a
// one-column table compressed like findings.raw: the least any ingestion of
// these bytes into this server can cost.
func (b *bench) copyFloor(reportPath string) (time.Duration, error) {
	rows := reportPath + ".copy"
	if err := copyRows(reportPath, rows); err != nil {
		return 0, err
	}
	defer os.Remove(rows)
	db := b.db()
	if err := b.pg.psql(db, "CREATE TABLE copy_floor (raw text COMPRESSION lz4)"); err != nil {
		if err := b.pg.psql(db, "CREATE TABLE copy_floor (raw text)"); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	if err := b.pg.psql(db, `\copy copy_floor FROM '`+rows+`'`); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// copyRows writes each record of a report on its own line in COPY's text
// format (backslashes doubled; records hold no raw control characters).
func copyRows(reportPath, out string) error {
	in, err := os.Open(reportPath)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	rd := ocsf.NewReader(bufio.NewReader(in))
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		_, _ = w.Write(bytes.ReplaceAll(rec.Raw, []byte(`\`), []byte(`\\`)))
		_ = w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}
