package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

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
	storetest.WritePlanFindings(t, s)
	storetest.CheckPlans(t, s, engine.SQLite, func(t *testing.T, st engine.Statement) []string { return explainPlan(t, s, st) })
	t.Run("observations", func(t *testing.T) {
		storetest.CheckObservationPlans(t, engine.SQLite, func(t *testing.T, st engine.Statement) []string { return explainPlan(t, s, st) })
	})
	t.Run("merge", func(t *testing.T) {
		storetest.CheckMergePlans(t, engine.SQLite, func(t *testing.T, st engine.Statement) []string { return explainPlan(t, s, st) })
	})
}

// explainPlan returns SQLite's plan of st, a line per node, each indented
// by its depth in the plan's tree, as PostgreSQL's are, so that a rule can
// tell what a node belongs to.
func explainPlan(t *testing.T, s *Store, st engine.Statement) []string {
	t.Helper()
	rows, err := s.r.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+st.SQL, st.Args...)
	if err != nil {
		t.Fatalf("explain %s: %v", st.SQL, err)
	}
	defer rows.Close()
	var plan []string
	depth := map[int]int{}
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		depth[id] = depth[parent] + 1
		plan = append(plan, strings.Repeat("  ", depth[id]-1)+detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}
