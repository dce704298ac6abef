package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"

	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/reportgen"
)

// A report is records from..from+n of its tenant's generator, some of them
// broken on purpose. It is a pure function of its spec, so a re-upload
// sends the very same bytes and the model knows every record's fate.
type spec struct {
	from, n int
	// bad are the broken records by position in the file.
	bad map[int]badRecord
}

// badRecord is how one record is broken: code is the error the worker must
// record for it. A duplicate repeats the record at position dupOf.
type badRecord struct {
	code  string
	dupOf int
}

// breakages are the ways a record is made invalid, each with exactly one
// problem, so each gets exactly one error row.
var breakages = []string{
	ocsf.CodeUnsupportedClass, ocsf.CodeMissingField, ocsf.CodeInvalidType,
	ocsf.CodeInvalidValue, ocsf.CodeMissingAccount, ocsf.CodeDuplicateUID,
}

// mixedSpec breaks about one record in eight, at least one.
func mixedSpec(rng *rand.Rand, from, n int) spec {
	s := spec{from: from, n: n, bad: map[int]badRecord{}}
	k := max(1, n/8)
	for len(s.bad) < k {
		p := 1 + rng.IntN(n-1)
		if _, taken := s.bad[p]; taken {
			continue
		}
		code := breakages[rng.IntN(len(breakages))]
		b := badRecord{code: code}
		if code == ocsf.CodeDuplicateUID {
			// A copy of an earlier valid record: the first one seen is
			// stored, the copy refused.
			b.dupOf = rng.IntN(p)
			if _, bad := s.bad[b.dupOf]; bad {
				continue
			}
			if isDupTarget(s, p) {
				continue
			}
		} else if isDupTarget(s, p) {
			continue
		}
		s.bad[p] = b
	}
	return s
}

// isDupTarget tells whether a duplicate copies the record at p (which must
// then stay valid).
func isDupTarget(s spec, p int) bool {
	for _, b := range s.bad {
		if b.code == ocsf.CodeDuplicateUID && b.dupOf == p {
			return true
		}
	}
	return false
}

// allBadSpec breaks every record (never by duplication, which needs a valid
// original).
func allBadSpec(rng *rand.Rand, from, n int) spec {
	s := spec{from: from, n: n, bad: map[int]badRecord{}}
	for p := range n {
		s.bad[p] = badRecord{code: breakages[rng.IntN(len(breakages)-1)]}
	}
	return s
}

func (s spec) valid() int { return s.n - len(s.bad) }

// validUIDs calls f with the finding uid of each record that must be
// stored.
func (s spec) validUIDs(g *reportgen.Generator, f func(uid string)) {
	for p := range s.n {
		if _, bad := s.bad[p]; !bad {
			f(g.UID(s.from + p))
		}
	}
}

// errorRow is a row GET /ingestions/{id}/errors must list.
type errorRow struct {
	index int // -1: job-level
	code  string
}

// wantErrors are the error rows of the report's ingestion, in the order
// the API lists them: job-level first, then by record.
func (s spec) wantErrors() []errorRow {
	var rows []errorRow
	if s.valid() == 0 {
		rows = append(rows, errorRow{-1, ingest.CodeNoRecords})
	}
	idx := make([]int, 0, len(s.bad))
	for p := range s.bad {
		idx = append(idx, p)
	}
	sort.Ints(idx)
	for _, p := range idx {
		rows = append(rows, errorRow{p, s.bad[p].code})
	}
	return rows
}

// write renders the report.
func (s spec) write(w io.Writer, g *reportgen.Generator) error {
	if len(s.bad) == 0 {
		return g.WriteRange(w, s.from, s.n)
	}
	var b bytes.Buffer
	b.WriteByte('[')
	for p := range s.n {
		if p > 0 {
			b.WriteByte(',')
		}
		bad, isBad := s.bad[p]
		switch {
		case !isBad:
			b.Write(g.Record(s.from + p))
		case bad.code == ocsf.CodeDuplicateUID:
			b.Write(g.Record(s.from + bad.dupOf))
		default:
			rec, err := broken(g.Record(s.from+p), bad.code)
			if err != nil {
				return err
			}
			b.Write(rec)
		}
		if b.Len() > 1<<20 {
			if _, err := w.Write(b.Bytes()); err != nil {
				return err
			}
			b.Reset()
		}
	}
	b.WriteByte(']')
	_, err := w.Write(b.Bytes())
	return err
}

func (s spec) bytes(g *reportgen.Generator) []byte {
	var b bytes.Buffer
	if err := s.write(&b, g); err != nil {
		panic(err) // rendering generated records cannot fail
	}
	return b.Bytes()
}

// broken is rec with one problem that the validator reports as code.
func broken(rec []byte, code string) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(rec, &m); err != nil {
		return nil, err
	}
	obj := func(k string) map[string]any { return m[k].(map[string]any) }
	switch code {
	case ocsf.CodeUnsupportedClass:
		m["class_uid"] = 2003
	case ocsf.CodeMissingField:
		delete(obj("finding_info"), "uid")
	case ocsf.CodeInvalidType:
		m["severity_id"] = "high"
	case ocsf.CodeInvalidValue:
		m["severity_id"] = 42
	case ocsf.CodeMissingAccount:
		delete(obj("cloud")["account"].(map[string]any), "uid")
	default:
		return nil, fmt.Errorf("no way to break a record with %s", code)
	}
	return json.Marshal(m)
}
