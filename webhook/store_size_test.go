package webhook_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/posture-dev/posture/internal/apitest"
	"github.com/posture-dev/posture/internal/testenv"
)

// storeSize is what the store takes: the SQLite file and its WAL (and the
// WAL alone), or the PostgreSQL database and the part of it holding reports.
type storeSize struct{ total, part int64 }

func measureStore(tb testing.TB, env *apitest.Env, postgres, vacuum bool) storeSize {
	tb.Helper()
	ctx := context.Background()
	if !postgres {
		var s storeSize
		for _, p := range []string{env.StoreDSN, env.StoreDSN + "-wal"} {
			fi, err := os.Stat(p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				tb.Fatal(err)
			}
			s.total += fi.Size()
			s.part = fi.Size()
		}
		return s
	}
	conn, err := pgx.Connect(ctx, env.StoreDSN)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if vacuum {
		// What autovacuum does on its own schedule.
		if _, err := conn.Exec(ctx, `VACUUM`); err != nil {
			tb.Fatal(err)
		}
	}
	var s storeSize
	if err := conn.QueryRow(ctx, `SELECT pg_database_size(current_database()),
		pg_total_relation_size('blob_chunks') + pg_total_relation_size('blobs')`).Scan(&s.total, &s.part); err != nil {
		tb.Fatal(err)
	}
	return s
}

// BenchmarkStoreSize uploads 20 distinct reports of 1,500 findings (3.3 MB
// each) through the API, lets the in-process executor ingest them all, and
// reports the store's size before and after: with reports deleted once
// their ingestion ends (the default) and kept (--report-retention). On
// PostgreSQL "vacuumed" is after a VACUUM, as autovacuum would run.
//
//	go test -run '^$' -bench StoreSize -benchtime 1x ./webhook/
func BenchmarkStoreSize(b *testing.B) {
	report := fixture(b, "aws_1500_records.ocsf.json")
	for _, engine := range []string{"sqlite", "postgres"} {
		for _, keep := range []bool{false, true} {
			name := engine + "/delete"
			if keep {
				name = engine + "/keep"
			}
			b.Run(name, func(b *testing.B) {
				for range b.N {
					storeSizeRun(b, report, engine == "postgres", keep)
				}
			})
		}
	}
}

func storeSizeRun(b *testing.B, report []byte, postgres, keep bool) {
	opts := apitest.Options{Postgres: postgres}
	if keep {
		opts.ReportRetention = 1000 * time.Hour
	}
	env := apitest.Start(b, opts)
	a := newAPI(b, env)
	before := measureStore(b, env, postgres, false)
	const uploads = 20
	var ids []string
	for i := range uploads {
		// Distinct finding uids: twenty scans, not one scan twenty times.
		content := bytes.ReplaceAll(report, []byte(`"prowler-aws-`), fmt.Appendf(nil, `"prowler-aws-%02d-`, i))
		ids = append(ids, accepted(b, a.upload(fmt.Sprintf("scan-%02d.ocsf.json", i), content), 1500))
	}
	for _, id := range ids {
		if status, s := a.wait(id); status != "completed" || s.processed != 1500 {
			b.Fatalf("ingestion %s: %s %+v", id, status, s)
		}
	}
	wantBlobs := 0
	if keep {
		wantBlobs = uploads
	}
	testenv.Eventually(b, 30*time.Second, fmt.Sprintf("%d reports stored after every ingestion ended", wantBlobs), func() (bool, string) {
		n, _, err := env.Store.(blobCounter).CountBlobs(context.Background(), env.Tenant)
		if err != nil {
			b.Fatal(err)
		}
		return n == wantBlobs, fmt.Sprintf("%d stored", n)
	})
	after := measureStore(b, env, postgres, false)
	const mb = 1 << 20
	b.ReportMetric(float64(before.total)/mb, "MB-before")
	b.ReportMetric(float64(after.total)/mb, "MB-after")
	if !postgres {
		b.ReportMetric(float64(after.part)/mb, "MB-wal-after")
		return
	}
	vacuumed := measureStore(b, env, postgres, true)
	b.ReportMetric(float64(after.part)/mb, "MB-reports-after")
	b.ReportMetric(float64(vacuumed.total)/mb, "MB-vacuumed")
	b.ReportMetric(float64(vacuumed.part)/mb, "MB-reports-vacuumed")
}
