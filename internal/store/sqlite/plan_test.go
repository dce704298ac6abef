package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/store/internal/engine"
	"github.com/posture-dev/posture/internal/store/storetest"
)

// TestQueryPlans asks SQLite for the plan of every statement the store
// issues for each documented findings query shape, and fails when one
// reads every finding (see storetest.PlanProblems). The table holds two
// tenants' findings; the store runs no ANALYZE, so neither does the test:
// these are the plans a deployed store gets.
func TestQueryPlans(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "plans.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fs := storetest.PlanFindings(3000)
	for _, tenant := range []string{"tenant-a", "tenant-b"} {
		if err := s.StartRun(ctx, tenant, "ing-1", 1, len(fs)); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteBatch(ctx, tenant, "ing-1", 1, store.Batch{Findings: fs}); err != nil {
			t.Fatal(err)
		}
	}
	explain := func(t *testing.T, st engine.Statement) []string {
		t.Helper()
		rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+st.SQL, st.Args...)
		if err != nil {
			t.Fatalf("explain %s: %v", st.SQL, err)
		}
		defer rows.Close()
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return plan
	}
	type stmt struct {
		st   engine.Statement
		page bool
	}
	for _, shape := range storetest.QueryShapes() {
		t.Run(shape.Name, func(t *testing.T) {
			shape, err := shape.Placed(ctx, s, "tenant-a")
			if err != nil {
				t.Fatal(err)
			}
			var stmts []stmt
			if shape.By != nil {
				st, err := engine.FindingCounts(engine.SQLite, "tenant-a", shape.Query, shape.By)
				if err != nil {
					t.Fatal(err)
				}
				stmts = append(stmts, stmt{st, false})
			} else {
				count, page, err := engine.FindingList(engine.SQLite, "tenant-a", shape.Query)
				if err != nil {
					t.Fatal(err)
				}
				stmts = append(stmts, stmt{count, false}, stmt{page, true})
			}
			for _, x := range stmts {
				plan := explain(t, x.st)
				if p := storetest.PlanProblems(shape, x.page, plan); len(p) > 0 {
					t.Errorf("%s\n%s\nplan:\n  %s", strings.Join(p, "; "), x.st.SQL, strings.Join(plan, "\n  "))
				}
			}
		})
	}
}
