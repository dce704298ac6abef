package localcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/posture-dev/posture/internal/store/pgtest"
)

// startPostgres runs PostgreSQL on the node, outside Kubernetes, the way many
// private clouds run their database: pods reach it at the node IP with a
// password, as the chart's store Secret says. Durability is off; the cluster
// is throwaway.
func (c *Cluster) startPostgres(ctx context.Context) error {
	bindir, err := pgtest.ServerBinDir()
	if err != nil {
		return err
	}
	cred, uid, gid, err := pgtest.ServerUser()
	if err != nil {
		return err
	}
	dir := c.path("postgres")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return err
	}
	pw := make([]byte, 16)
	rand.Read(pw)
	password := hex.EncodeToString(pw)
	pwFile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Chown(pwFile, uid, gid); err != nil {
		return err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bindir, "initdb"), "-D", data, "-U", "postgres",
		"--pwfile="+pwFile, "--auth-local=trust", "--auth-host=scram-sha-256",
		"--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v: %s", err, out)
	}
	os.Remove(pwFile)
	// Pods (the pod range) and the node itself may connect, with the password.
	hba := fmt.Sprintf("local all all trust\nhost all all %s scram-sha-256\nhost all all %s/32 scram-sha-256\n", c.State.PodCIDR, c.State.NodeIP)
	if err := os.WriteFile(filepath.Join(data, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return err
	}
	if err := os.Chown(filepath.Join(data, "pg_hba.conf"), uid, gid); err != nil {
		return err
	}
	if err := c.spawn(proc{name: "postgres", uid: uid, gid: gid, argv: []string{
		filepath.Join(bindir, "postgres"), "-D", data, "-k", dir,
		"-c", "listen_addresses=" + c.State.NodeIP,
		"-c", "port=5432",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200",
		"-c", "shared_buffers=256MB",
		"-c", "log_min_messages=warning",
	}}); err != nil {
		return err
	}
	local := fmt.Sprintf("host='%s' port=5432 user=postgres dbname=postgres sslmode=disable", dir)
	if err := c.waitFor(ctx, "postgres", time.Minute, []string{"postgres"}, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, local)
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	}); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, local)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE posture LOGIN PASSWORD '%s'", password),
		"CREATE DATABASE posture OWNER posture",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q[:20], err)
		}
	}
	c.State.PostgresDSN = fmt.Sprintf("postgres://posture:%s@%s:5432/posture?sslmode=disable", password, c.State.NodeIP)
	return c.save()
}
