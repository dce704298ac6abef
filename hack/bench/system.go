package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/posture-dev/posture/internal/store/pgtest"
)

// What the bench reads from the system: a process's peak memory and CPU
// time from /proc, and a throwaway PostgreSQL server.

// samplePeak reports the highest value (KiB) of the /proc/<pid>/status field
// seen, sampling every period, until stop closes. For VmHWM that is the last
// high-water mark; for VmRSS, the peak among the samples.
func samplePeak(pid int, field string, period time.Duration, stop <-chan struct{}, peak chan<- int64) {
	var max int64
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		if v := procStatus(pid, field); v > max {
			max = v
		}
		select {
		case <-stop:
			peak <- max
			return
		case <-t.C:
		}
	}
}

func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	m := regexp.MustCompile(`(?m)^` + field + `:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return v
}

// pgServer is a throwaway PostgreSQL reached over its Unix socket.
type pgServer struct {
	dsn    string
	socket string
	stop   func()
	// postmaster is the server's process id: its CPU time and its
	// children's are the server's.
	postmaster int
}

// startPostgres starts the throwaway server, with sharedBuffers as its
// shared_buffers when set: pgtest's server keeps PostgreSQL's default,
// 128MB, which at millions of findings measures a server that reads its
// indexes from the page cache rather than one sized for its data.
func startPostgres(sharedBuffers string, settings ...string) (*pgServer, error) {
	if sharedBuffers != "" {
		settings = append(settings, "shared_buffers="+sharedBuffers)
		fmt.Println("PostgreSQL shared_buffers:", sharedBuffers)
	}
	if len(settings) > 0 {
		fmt.Println("PostgreSQL settings:", strings.Join(settings, " "))
	}
	dsn, stop, err := pgtest.Start(settings...)
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile(`host='([^']+)'`).FindStringSubmatch(dsn)
	if m == nil {
		stop()
		return nil, fmt.Errorf("cannot find the socket directory in %q", dsn)
	}
	// pgtest's DSN names dbname=postgres; later keywords win, so appending
	// dbname=<db> selects another database.
	// pgtest keeps the data directory beside the socket.
	pidFile, err := os.ReadFile(filepath.Join(m[1], "data", "postmaster.pid"))
	if err != nil {
		stop()
		return nil, err
	}
	postmaster, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(pidFile), "\n", 2)[0]))
	if err != nil {
		stop()
		return nil, fmt.Errorf("postmaster.pid: %w", err)
	}
	return &pgServer{dsn: dsn, socket: m[1], stop: stop, postmaster: postmaster}, nil
}

func (p *pgServer) psql(db, command string) error {
	cmd := exec.Command("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", p.socket, "-p", "5432", "-U", "postgres", "-d", db, "-c", command)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("psql %q: %w\n%s", command, err, out)
	}
	return nil
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "memory unknown"
	}
	m := regexp.MustCompile(`MemTotal:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return "memory unknown"
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return fmt.Sprintf("%.1f GiB RAM", float64(kb)/(1<<20))
}
