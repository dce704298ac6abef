// Package pgtest runs a throwaway PostgreSQL server for tests, from the
// server binaries installed on the machine (no container, no network).
//
// Typical use in a package's tests:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		dsn := pgtest.FreshDatabase(t) // a new empty database, dropped after t
//		...
//	}
//
// One server is started per test binary, on first use. If
// POSTURE_TEST_POSTGRES_DSN is set, that server is used instead and none is
// started (FreshDatabase then needs the right to CREATE DATABASE there).
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names the variable that points tests at an existing server.
const EnvDSN = "POSTURE_TEST_POSTGRES_DSN"

// dirPrefix marks our temporary directories so that leftovers of killed test
// binaries can be recognised and removed.
const dirPrefix = "posture-pgtest-"

// Start initialises a new cluster in a temporary directory and runs a
// PostgreSQL server on a Unix socket inside it, with trust authentication and
// durability switched off (tests never need their data after a crash). It
// returns the DSN of the "postgres" database as superuser "postgres", and a
// stop function that kills the server and removes the directory.
//
// Each of settings, "name=value", is passed to the server as -c name=value
// after the defaults above, which it may override (the benchmark gives the
// server a production-sized shared_buffers this way).
//
// When running as root the server runs as the "postgres" OS user, because
// PostgreSQL refuses to run as root. The server dies with the test binary even
// if the binary is killed without running stop.
func Start(settings ...string) (dsn string, stop func(), err error) {
	for _, s := range settings {
		if name, _, ok := strings.Cut(s, "="); !ok || name == "" {
			return "", nil, fmt.Errorf("pgtest: server setting %q is not name=value", s)
		}
	}
	bindir, err := ServerBinDir()
	if err != nil {
		return "", nil, err
	}
	removeStaleDirs()
	cred, uid, gid, err := ServerUser()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return "", nil, fmt.Errorf("pgtest: %w", err)
	}
	cleanup := func() { os.RemoveAll(dir) }
	if cred != nil {
		if err := os.Chown(dir, uid, gid); err != nil {
			cleanup()
			return "", nil, fmt.Errorf("pgtest: chown %s to postgres: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")

	initdb := exec.Command(filepath.Join(bindir, "initdb"),
		"-D", data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}

	logPath := filepath.Join(dir, "postgres.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		cleanup()
		return "", nil, fmt.Errorf("pgtest: %w", err)
	}
	defer logFile.Close()
	const port = 5432 // only names the socket file; nothing listens on TCP
	args := []string{
		"-D", data,
		"-k", dir,
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=200",
		"-c", "log_min_messages=warning",
	}
	// The server applies its options in order, so a later -c wins.
	for _, s := range settings {
		args = append(args, "-c", s)
	}
	srv := exec.Command(filepath.Join(bindir, "postgres"), args...)
	srv.Dir = dir
	srv.Stdout, srv.Stderr = logFile, logFile
	// Credential rather than runuser: Go sets the parent-death signal after
	// switching user, whereas runuser's own setuid would clear it, leaving
	// the server behind when a test binary is killed.
	srv.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := srv.Start(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("pgtest: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { srv.Wait(); close(exited) }()

	var once sync.Once
	stop = func() {
		once.Do(func() {
			// SIGQUIT is an immediate shutdown: no checkpoint, nothing to keep.
			srv.Process.Signal(syscall.SIGQUIT)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				srv.Process.Kill()
				<-exited
			}
			cleanup()
		})
	}

	dsn = fmt.Sprintf("host='%s' port=%d user=postgres dbname=postgres sslmode=disable", dir, port)
	if err := waitReady(dsn, exited); err != nil {
		stop()
		log, _ := os.ReadFile(logPath)
		return "", nil, fmt.Errorf("pgtest: %w\nserver log:\n%s", err, log)
	}
	return dsn, stop, nil
}

func waitReady(dsn string, exited <-chan struct{}) error {
	deadline := time.Now().Add(60 * time.Second)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("postgres exited during start-up")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		lastErr = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("postgres not ready after 60s: %v", lastErr)
}

// ServerBinDir locates initdb and postgres: pg_config's answer first, then the
// Debian layout (postgresql-NN packages do not put them on PATH). The local
// node (internal/localcluster) runs its database from the same binaries.
func ServerBinDir() (string, error) {
	var tried []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if hasServer(dir) {
			return dir, nil
		}
		tried = append(tried, dir)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, dir := range dirs {
		if hasServer(dir) {
			return dir, nil
		}
		tried = append(tried, dir)
	}
	if p, err := exec.LookPath("initdb"); err == nil && hasServer(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("pgtest: PostgreSQL server binaries (initdb, postgres) not found "+
		"(looked in pg_config --bindir, /usr/lib/postgresql/*/bin and PATH; tried %v). "+
		"Install the server package (e.g. apt-get install postgresql-15) or set %s to an existing server",
		tried, EnvDSN)
}

func pgVersion(bindir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bindir)))
	return n
}

func hasServer(dir string) bool {
	for _, b := range []string{"initdb", "postgres"} {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() {
			return false
		}
	}
	return true
}

// ServerUser returns the credentials to run the server with: none when not
// root, the postgres OS user when root.
func ServerUser() (cred *syscall.Credential, uid, gid int, err error) {
	if os.Geteuid() != 0 {
		return nil, 0, 0, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("pgtest: running as root, and PostgreSQL refuses to run as root, "+
			"but there is no \"postgres\" OS user to run it as: %w", err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, uid, gid, nil
}

// removeStaleDirs deletes the directories of servers whose test binary was
// killed. A directory counts as stale when its server is gone, or when it
// never got a server and is old enough not to be one starting right now.
func removeStaleDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		pidFile, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
		if err != nil {
			if fi, err := os.Stat(dir); err == nil && time.Since(fi.ModTime()) > time.Hour {
				os.RemoveAll(dir)
			}
			continue
		}
		line, _, _ := bytes.Cut(pidFile, []byte("\n"))
		pid, err := strconv.Atoi(strings.TrimSpace(string(line)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(dir)
		}
	}
}

var shared struct {
	once sync.Once
	dsn  string
	stop func()
	err  error
	mu   sync.Mutex
}

// DSN returns the DSN of the test binary's server (the "postgres" database),
// starting the server on first use, or the value of POSTURE_TEST_POSTGRES_DSN
// if set. It fails t if no server can be had: a missing PostgreSQL is a broken
// test environment, not a reason to skip.
func DSN(t testing.TB) string {
	t.Helper()
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn
	}
	shared.once.Do(func() {
		shared.mu.Lock()
		defer shared.mu.Unlock()
		shared.dsn, shared.stop, shared.err = Start()
	})
	if shared.err != nil {
		t.Fatalf("%v", shared.err)
	}
	return shared.dsn
}

// Stop stops the server DSN started, if any. Main calls it; call it yourself
// from a TestMain that cannot use Main.
func Stop() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.stop != nil {
		shared.stop()
		shared.stop = nil
	}
}

// Main runs the tests and then stops the server, for use as
// func TestMain(m *testing.M) { pgtest.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// FreshDatabase creates a new empty database (test_<random>) on the DSN
// server and returns its DSN, so tests never see each other's rows. The
// database is dropped when t ends, after the cleanups registered later (such
// as closing a store opened on it).
func FreshDatabase(t testing.TB) string {
	t.Helper()
	admin := DSN(t)
	var b [8]byte
	rand.Read(b[:])
	name := "test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := adminExec(ctx, admin, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// FORCE ends connections a test forgot to close.
		if err := adminExec(ctx, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	dsn, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

func adminExec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase points dsn, in URL or keyword/value form, at database name.
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse DSN: %w", err)
		}
		u.Path = "/" + name
		q := u.Query()
		q.Del("dbname")
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	// In keyword/value form the last occurrence of a keyword wins.
	return dsn + " dbname=" + name, nil
}
