package apitest

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/posture-dev/posture/internal/testenv"
)

// CurrentStep is one upload of CurrentScenario and what every door must
// then show: the current state and the resolved findings, each as
// "uid status_code delta" (delta left out when none), sorted, and u1's
// first_seen_at.
type CurrentStep struct {
	Name          string
	Report        []byte
	Current       []string
	Resolved      []string
	FirstSeenOfU1 time.Time
}

// CurrentScenario is the reports of one account that pin the current
// state by account and check: a full report, a partial one an hour later
// (it replaces only its check: u3 passes now, u4 is gone, u6 is new), a
// report a day older (it changes nothing but u1's first sighting) and a
// newer run of one check (u5 passes). The expectations follow the rule:
// for each check, the findings of its newest run. Records are the
// scanner fixture's first one with the uid, check, status and time set.
func CurrentScenario(t testing.TB) []CurrentStep {
	t.Helper()
	raw, err := os.ReadFile(testenv.Fixture("aws_3_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var base []json.RawMessage
	if err := json.Unmarshal(raw, &base); err != nil {
		t.Fatal(err)
	}
	type rec struct{ uid, check, status string }
	report := func(at time.Time, rs ...rec) []byte {
		var out []map[string]any
		for _, r := range rs {
			var m map[string]any
			if err := json.Unmarshal(base[0], &m); err != nil {
				t.Fatal(err)
			}
			m["time"] = at.Unix()
			m["time_dt"] = at.Format(time.RFC3339)
			m["status_code"] = r.status
			m["metadata"].(map[string]any)["event_code"] = r.check
			m["finding_info"].(map[string]any)["uid"] = r.uid
			out = append(out, m)
		}
		b, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	return []CurrentStep{
		{"a full report", report(t0,
			rec{"u1", "c1", "FAIL"}, rec{"u2", "c1", "PASS"}, rec{"u3", "c2", "FAIL"}, rec{"u4", "c2", "FAIL"}, rec{"u5", "c3", "FAIL"}),
			[]string{"u1 FAIL new", "u2 PASS new", "u3 FAIL new", "u4 FAIL new", "u5 FAIL new"}, nil, t0},
		{"a partial report an hour later", report(t0.Add(time.Hour),
			rec{"u3", "c2", "PASS"}, rec{"u6", "c2", "FAIL"}),
			[]string{"u1 FAIL new", "u2 PASS new", "u3 PASS changed", "u5 FAIL new", "u6 FAIL new"},
			[]string{"u3 FAIL resolved", "u4 FAIL resolved"}, t0},
		{"a report a day older", report(t0.Add(-24*time.Hour),
			rec{"u1", "c1", "PASS"}, rec{"u3", "c2", "FAIL"}, rec{"u5", "c3", "PASS"}),
			[]string{"u1 FAIL new", "u2 PASS new", "u3 PASS changed", "u5 FAIL new", "u6 FAIL new"},
			[]string{"u3 FAIL resolved", "u4 FAIL resolved"}, t0.Add(-24 * time.Hour)},
		{"a newer run of one check", report(t0.Add(2*time.Hour), rec{"u5", "c3", "PASS"}),
			[]string{"u1 FAIL new", "u2 PASS new", "u3 PASS changed", "u5 PASS changed", "u6 FAIL new"},
			[]string{"u3 FAIL resolved", "u4 FAIL resolved", "u5 FAIL resolved"}, t0.Add(-24 * time.Hour)},
	}
}
