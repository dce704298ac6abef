package main

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/reportgen"
)

// TestReportsAreWhatTheModelSays holds the soak's model to the validator
// the worker runs: each broken record has exactly the one problem the model
// expects, every other record none, and the uids the model expects stored
// are those of the valid records. A validator change that breaks the model
// fails here in a second, not in the soak's minute.
func TestReportsAreWhatTheModelSays(t *testing.T) {
	g, err := reportgen.NewFor([]string{accountOf(0, 0), accountOf(0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	from := 0
	for round := range 40 {
		n := between(rng, 2, 200)
		s := mixedSpec(rng, from, n)
		if round%4 == 0 {
			s = allBadSpec(rng, from, n)
		}
		from += n
		var want []string
		s.validUIDs(g, func(uid string) { want = append(want, uid) })
		if len(want) != s.valid() {
			t.Fatalf("round %d: %d valid uids, valid() says %d", round, len(want), s.valid())
		}
		v := ocsf.NewValidator()
		rd := ocsf.NewReader(bytes.NewReader(s.bytes(g)))
		var stored []string
		for i := 0; ; i++ {
			rec, err := rd.Next()
			if errors.Is(err, io.EOF) {
				if i != s.n {
					t.Fatalf("round %d: %d records read, the spec has %d", round, i, s.n)
				}
				break
			}
			if err != nil {
				t.Fatalf("round %d, record %d: %v", round, i, err)
			}
			f, problems := v.Check(rec)
			bad, isBad := s.bad[i]
			switch {
			case isBad && (len(problems) != 1 || problems[0].Code != bad.code):
				t.Errorf("round %d, record %d broken as %s: problems %+v", round, i, bad.code, problems)
			case !isBad && len(problems) > 0:
				t.Errorf("round %d, record %d: problems %+v in a valid record", round, i, problems)
			case !isBad:
				stored = append(stored, f.UID)
			}
		}
		if !slices.Equal(stored, want) {
			t.Errorf("round %d: the valid records' uids are not those the model expects stored", round)
		}
		if rows := s.wantErrors(); len(rows) != len(s.bad)+boolInt(s.valid() == 0) {
			t.Errorf("round %d: %d error rows expected for %d broken records", round, len(rows), len(s.bad))
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
