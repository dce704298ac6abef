package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The data make dev keeps between runs, under .dev: the control plane's etcd
// and the SQLite store. They describe the same system (an Ingestion in etcd,
// its report and findings in the store), so they are kept or wiped together.
const (
	etcdDirName = "etcd"
	storeName   = "posture.db"
	lockName    = "lock"
)

// storeFiles are the SQLite database and the files WAL mode keeps beside it.
var storeFiles = []string{storeName, storeName + "-wal", storeName + "-shm"}

// devLock is held by the make dev (or make dev-reset) that owns .dev, so a
// second one cannot start a second etcd on the same data or wipe it under a
// running system.
type devLock struct{ f *os.File }

// lockDevDir takes .dev's lock or says which process holds it.
func lockDevDir(devDir string) (*devLock, error) {
	if err := os.MkdirAll(devDir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(devDir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("make dev is already running on %s (pid %s): stop it first", devDir, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &devLock{f: f}, nil
}

// release lets the next make dev in; the kernel does the same if we die.
func (l *devLock) release() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// keepOrWipe decides whether the last run's data is kept. Both halves present:
// kept. One half only (a store from before make dev kept its cluster, or a
// file removed by hand): both are wiped, since a store without its objects, or
// objects without their store, would show ingestions whose findings are
// missing. It returns what it did, for the log.
func keepOrWipe(devDir string) (string, error) {
	// etcd's data directory counts once etcd has written its member directory.
	hasEtcd := exists(filepath.Join(devDir, etcdDirName, "member"))
	hasStore := exists(filepath.Join(devDir, storeName))
	switch {
	case hasEtcd && hasStore:
		return "keeping the data of the last run (.dev/etcd, .dev/posture.db); make dev-reset wipes it", nil
	case !hasEtcd && !hasStore:
		return "starting with no data (.dev/etcd and .dev/posture.db are created)", nil
	}
	if err := wipeData(devDir); err != nil {
		return "", err
	}
	if hasStore {
		return "found .dev/posture.db but no .dev/etcd: the store would name objects that do not exist, so both start empty", nil
	}
	return "found .dev/etcd but no .dev/posture.db: the objects would name findings that do not exist, so both start empty", nil
}

// wipeData removes the kept data: the etcd directory and the store.
func wipeData(devDir string) error {
	if err := os.RemoveAll(filepath.Join(devDir, etcdDirName)); err != nil {
		return err
	}
	for _, f := range storeFiles {
		if err := os.Remove(filepath.Join(devDir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// reset is make dev-reset: it wipes what make dev keeps, refusing while make
// dev runs.
func reset(devDir string) error {
	lock, err := lockDevDir(devDir)
	if err != nil {
		return err
	}
	defer lock.release()
	if err := wipeData(devDir); err != nil {
		return fmt.Errorf("wipe %s: %w", devDir, err)
	}
	step("wiped " + filepath.Join(devDir, etcdDirName) + " and " + filepath.Join(devDir, storeName) + ": the next make dev starts empty")
	return nil
}
