package postgres

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/pgtest"
	"github.com/posture-dev/posture/internal/store/storetest"
	"github.com/posture-dev/posture/internal/testenv"
)

// openFresh opens the store on a new, empty database, closed when the test
// ends.
func openFresh(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), pgtest.FreshDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Replicas start together; the advisory lock must serialise their
// migrations.
func TestConcurrentOpen(t *testing.T) {
	dsn := pgtest.FreshDatabase(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			s, err := Open(context.Background(), dsn)
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRawCompressedWithLZ4(t *testing.T) {
	ctx := context.Background()
	s := openFresh(t)
	if !s.lz4 {
		t.Skip("server built without lz4")
	}
	if err := s.StartRun(ctx, "t", "ing", 1, 1); err != nil {
		t.Fatal(err)
	}
	// The second copy of the random hex is what compresses, always, and the
	// first keeps the value well over the 2 KB that TOAST moves out of line.
	// (Random hex alone does not reliably compress: lz4 has no entropy
	// coding, and when it saves nothing the value is stored uncompressed.)
	noise := make([]byte, 4000)
	rand.Read(noise)
	raw := fmt.Appendf(nil, `{"noise":"%x","again":"%x"}`, noise, noise)
	f := store.Finding{UID: "u", ScanID: "s", Raw: raw}
	if err := s.WriteBatch(ctx, "t", "ing", 1, store.Batch{Findings: []store.Finding{f}}); err != nil {
		t.Fatal(err)
	}
	var method string
	if err := s.pool.QueryRow(ctx, `SELECT pg_column_compression(raw) FROM findings`).Scan(&method); err != nil {
		t.Fatal(err)
	}
	if method != "lz4" {
		t.Fatalf("raw compressed with %q, want lz4", method)
	}
	// Re-writing an unchanged record keeps its stored (TOASTed) value.
	var before, after string
	s.pool.QueryRow(ctx, `SELECT pg_relation_size(reltoastrelid)::text FROM pg_class WHERE relname = 'findings'`).Scan(&before)
	for range 20 {
		if err := s.WriteBatch(ctx, "t", "ing", 1, store.Batch{Findings: []store.Finding{f}}); err != nil {
			t.Fatal(err)
		}
	}
	s.pool.QueryRow(ctx, `SELECT pg_relation_size(reltoastrelid)::text FROM pg_class WHERE relname = 'findings'`).Scan(&after)
	if before == "0" || before == "" {
		t.Fatal("raw was not TOASTed: the test proves nothing")
	}
	if before != after {
		t.Errorf("TOAST grew from %s to %s bytes re-writing an unchanged record", before, after)
	}
}

// Two ingestions of one report at once: the second one's existence probe runs
// before the first commits, so it tries the straight COPY, waits on the unique
// key, hits it once the first commits, and must run its batch again as an
// upsert.
func TestCopyFallsBackToUpsertOnARace(t *testing.T) {
	ctx := context.Background()
	s := openFresh(t)
	f := store.Finding{ID: store.FindingID("t", "scan", "u"), UID: "u", ScanID: "scan", Raw: []byte(`{"a":1}`), Title: "first"}
	second := f
	second.Title = "second"
	if err := s.StartRun(ctx, "t", "ing-2", 1, 1); err != nil {
		t.Fatal(err)
	}

	tx1 := holdFinding(ctx, t, s, "ing-1", f)
	defer tx1.Rollback(ctx)
	done := make(chan error, 1)
	go func() {
		done <- s.WriteBatch(ctx, "t", "ing-2", 1, store.Batch{
			Findings: []store.Finding{second},
			Errors:   []store.IngestionError{{Code: "kept", Detail: "written once"}},
		})
	}()
	// Commit the first only once the second is blocked on its row.
	waitForBlockedBackends(t, s, 1)
	if err := tx1.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the second writer failed instead of upserting: %v", err)
	}
	var n int
	var title, ing string
	if err := s.pool.QueryRow(ctx, `SELECT count(*), max(title), max(ingestion_id) FROM findings`).Scan(&n, &title, &ing); err != nil {
		t.Fatal(err)
	}
	if n != 1 || title != "second" || ing != "ing-2" {
		t.Errorf("findings: %d rows, title %q, ingestion %q; want the one row updated by the second writer", n, title, ing)
	}
	// The batch ran twice; the rest of it must be stored once.
	if _, total, err := s.ListIngestionErrors(ctx, "t", "ing-2", store.Page{Number: 1}); err != nil || total != 1 {
		t.Errorf("ingestion errors: %d (%v), want 1", total, err)
	}
}

// holdFinding inserts f, as a batch's straight COPY would, in a transaction
// it leaves open. The caller must end it before closing the store, whose
// Close waits for every connection.
func holdFinding(ctx context.Context, t *testing.T, s *Store, ingestionID string, f store.Finding) pgx.Tx {
	t.Helper()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := findingIDs([]store.Finding{f})
	if err == nil {
		err = writeFindings(ctx, tx, "t", ingestionID, time.Now(), []store.Finding{f}, ids, false, nil)
	}
	if err != nil {
		tx.Rollback(ctx)
		t.Fatal(err)
	}
	return tx
}

// A batch in flight holds a key share lock on its run's row. Progress must
// not wait for it (the worker records progress between batches, and waiting
// stalled its parse), while an outcome and a newer attempt must: no batch
// may commit after either.
func TestRunWritesAgainstABatchInFlight(t *testing.T) {
	tests := []struct {
		name  string
		write func(ctx context.Context, s *Store) error
		waits bool
	}{
		{"UpdateRun", func(ctx context.Context, s *Store) error {
			return s.UpdateRun(ctx, "t", "ing-1", 1, store.Progress{Processed: 1})
		}, false},
		{"FinishRun", func(ctx context.Context, s *Store) error {
			return s.FinishRun(ctx, "t", "ing-1", 1, store.Outcome{Status: store.RunSucceeded, Progress: store.Progress{Processed: 1}})
		}, true},
		{"StartRun of the next attempt", func(ctx context.Context, s *Store) error {
			return s.StartRun(ctx, "t", "ing-1", 2, 1)
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, err := Open(ctx, pgtest.FreshDatabase(t))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.StartRun(ctx, "t", "ing-1", 1, 1); err != nil {
				t.Fatal(err)
			}
			f := store.Finding{ID: store.FindingID("t", "scan", "u"), UID: "u", ScanID: "scan", Raw: []byte(`{"a":1}`)}

			// Another transaction inserts the batch's finding and stays
			// open, so the batch stops on the primary key inside its
			// transaction, after it has locked the run's row.
			blocker := holdFinding(ctx, t, s, "ing-0", f)
			defer blocker.Rollback(ctx)
			batch := make(chan error, 1)
			go func() { batch <- s.WriteBatch(ctx, "t", "ing-1", 1, store.Batch{Findings: []store.Finding{f}}) }()
			waitForBlockedBackends(t, s, 1)

			done := make(chan error, 1)
			go func() { done <- tc.write(ctx, s) }()
			if tc.waits {
				waitForBlockedBackends(t, s, 2)
				select {
				case err := <-done:
					t.Fatalf("returned (%v) while a batch was in flight", err)
				default:
				}
			} else {
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("still waiting for the batch in flight after 10s")
				}
			}

			if err := blocker.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-batch; err != nil {
				t.Fatalf("batch: %v", err)
			}
			if tc.waits {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.GetFinding(ctx, "t", f.ID); err != nil {
				t.Errorf("the batch's finding: %v", err)
			}
		})
	}
}

// waitForBlockedBackends waits until n lock requests in the database are
// waiting.
func waitForBlockedBackends(t *testing.T, s *Store, n int) {
	t.Helper()
	testenv.EventuallyEvery(t, 10*time.Second, 10*time.Millisecond, fmt.Sprintf("%d backends blocked on a lock", n), func() (bool, string) {
		var waiting int
		if err := s.pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND a.datname = current_database()`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting >= n, fmt.Sprintf("%d blocked", waiting)
	})
}

// The blob reader fetches the next chunk while the current one is read, and
// must not leave that fetch, or its connection, behind.
func TestBlobReaderPrefetches(t *testing.T) {
	ctx := context.Background()
	s := openFresh(t)
	const size = 3<<20 + 100
	content := make([]byte, size)
	if _, err := rand.Read(content); err != nil {
		t.Fatal(err)
	}
	b, err := s.PutBlob(ctx, "t", bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	open := func() *blobReader {
		t.Helper()
		rc, err := s.OpenBlob(ctx, "t", b.ID)
		if err != nil {
			t.Fatal(err)
		}
		return rc.(*blobReader)
	}

	t.Run("reads ahead and back in order", func(t *testing.T) {
		r := open()
		defer r.Close()
		first := make([]byte, 10)
		if _, err := io.ReadFull(r, first); err != nil {
			t.Fatal(err)
		}
		if r.pending == nil {
			t.Fatal("no fetch of the next chunk in flight after the first read")
		}
		rest, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(append(first, rest...), content) {
			t.Fatal("read back differs from what was written")
		}
	})

	t.Run("close with a fetch in flight", func(t *testing.T) {
		r := open()
		if _, err := io.ReadFull(r, make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		// A connection whose query was cancelled is destroyed in the
		// background, so give the pool a moment to count it out.
		testenv.EventuallyEvery(t, 5*time.Second, 10*time.Millisecond, "no connection acquired after Close", func() (bool, string) {
			n := s.pool.Stat().AcquiredConns()
			return n == 0, fmt.Sprintf("%d connections still acquired", n)
		})
		if _, err := r.Read(make([]byte, 1)); err == nil {
			t.Error("Read after Close succeeded")
		}
	})

	t.Run("deleted while reading", func(t *testing.T) {
		r := open()
		defer r.Close()
		if _, err := io.ReadFull(r, make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteBlob(ctx, "t", b.ID); err != nil {
			t.Fatal(err)
		}
		_, err := io.ReadAll(r)
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("reading on after the delete: %v, want ErrNotFound", err)
		}
	})
}

// The store turns JIT compilation off for its connections unless the DSN
// sets jit itself (see Open).
func TestJITOffUnlessTheDSNSetsIt(t *testing.T) {
	for _, tc := range []struct {
		name, jit, want string
	}{
		{name: "DSN without jit", want: "off"},
		{name: "DSN with jit=on", jit: "on", want: "on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pgtest.FreshDatabase(t)
			if tc.jit != "" {
				if strings.Contains(dsn, "://") {
					u, err := url.Parse(dsn)
					if err != nil {
						t.Fatal(err)
					}
					q := u.Query()
					q.Set("jit", tc.jit)
					u.RawQuery = q.Encode()
					dsn = u.String()
				} else {
					dsn += " jit=" + tc.jit
				}
			}
			s, err := Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var got string
			if err := s.pool.QueryRow(context.Background(), "SHOW jit").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("jit = %s, want %s", got, tc.want)
			}
		})
	}
}

// DeleteTenantData leaves no row of the tenant in any table, the derived
// ones (summaries, latest scans, scan bounds) included.
func TestDeleteTenantDataLeavesNoRows(t *testing.T) {
	s := openFresh(t)
	storetest.CheckDeleteTenantDataLeavesNoRows(t, s, func(tenant string) (map[string]int, error) {
		ctx := context.Background()
		rows, err := s.pool.Query(ctx, `SELECT table_name FROM information_schema.columns
WHERE table_schema = current_schema() AND column_name = 'tenant'`)
		if err != nil {
			return nil, err
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		counts := map[string]int{}
		for _, table := range tables {
			var n int
			if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()+` WHERE tenant = $1`, tenant).Scan(&n); err != nil {
				return nil, err
			}
			counts[table] = n
		}
		return counts, nil
	})
}
