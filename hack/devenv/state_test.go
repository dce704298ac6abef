package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The kept data is a pair: kept whole, or wiped whole when half is missing,
// so the store never names objects the cluster lacks or the reverse.
func TestKeepOrWipe(t *testing.T) {
	for _, tc := range []struct {
		name            string
		etcd, store     bool
		wantKept        bool
		wantMessagePart string
	}{
		{"both kept", true, true, true, "keeping the data of the last run"},
		{"nothing yet", false, false, false, "starting with no data"},
		{"a store without its cluster", false, true, false, "found .dev/posture.db but no .dev/etcd"},
		{"a cluster without its store", true, false, false, "found .dev/etcd but no .dev/posture.db"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.etcd {
				if err := os.MkdirAll(filepath.Join(dir, etcdDirName, "member", "wal"), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if tc.store {
				for _, f := range storeFiles {
					if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			msg, err := keepOrWipe(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(msg, tc.wantMessagePart) {
				t.Errorf("message %q does not say %q", msg, tc.wantMessagePart)
			}
			gotEtcd, gotStore := exists(filepath.Join(dir, etcdDirName)), exists(filepath.Join(dir, storeName))
			if gotEtcd != tc.wantKept || gotStore != tc.wantKept {
				t.Errorf("afterwards etcd=%t store=%t, want both %t", gotEtcd, gotStore, tc.wantKept)
			}
			for _, f := range storeFiles[1:] {
				if !tc.wantKept && exists(filepath.Join(dir, f)) {
					t.Errorf("%s outlived the store it belongs to", f)
				}
			}
		})
	}
}

// One make dev owns .dev at a time; make dev-reset waits its turn too.
func TestDevDirLock(t *testing.T) {
	dir := t.TempDir()
	held, err := lockDevDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDevDir(dir); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("second lock: %v, want it refused", err)
	}
	if err := os.WriteFile(filepath.Join(dir, storeName), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := reset(dir); err == nil {
		t.Error("reset ran while make dev held .dev")
	}
	if !exists(filepath.Join(dir, storeName)) {
		t.Error("a refused reset removed the store")
	}
	held.release()
	if err := reset(dir); err != nil {
		t.Fatalf("reset after release: %v", err)
	}
	if exists(filepath.Join(dir, storeName)) {
		t.Error("reset left the store")
	}
}
