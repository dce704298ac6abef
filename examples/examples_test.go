// Package examples holds the example reports README.md and make dev point
// people at; its test keeps examples/README.md true about them.
package examples

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/ocsf"
)

// listed is one row of the table in README.md.
type listed struct {
	file             string
	records, invalid int
}

// readmeTable reads the rows of README.md's table: | `file` | records | invalid | what |.
func readmeTable(t *testing.T) []listed {
	t.Helper()
	f, err := os.Open("README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []listed
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		cells := strings.Split(sc.Text(), "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		records, err1 := strconv.Atoi(strings.TrimSpace(cells[2]))
		invalid, err2 := strconv.Atoi(strings.TrimSpace(cells[3]))
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("README.md:%d: records and invalid must be numbers: %v", line, err)
		}
		rows = append(rows, listed{strings.Trim(strings.TrimSpace(cells[1]), "`"), records, invalid})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// check counts a report's records and invalid records the way the worker
// does: every record through the same reader and validator.
func check(path string) (records, invalid int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	r := ocsf.NewReader(f)
	v := ocsf.NewValidator()
	for {
		rec, err := r.NextBorrowed()
		if errors.Is(err, io.EOF) {
			return records, invalid, nil
		}
		if err != nil {
			return records, invalid, err
		}
		records++
		if _, problems := v.Check(rec); len(problems) > 0 {
			invalid++
		}
	}
}

func TestReadmeDescribesEveryExample(t *testing.T) {
	rows := readmeTable(t)
	onDisk, err := filepath.Glob("*.ocsf.json")
	if err != nil {
		t.Fatal(err)
	}
	described := map[string]bool{}
	for _, row := range rows {
		described[row.file] = true
		t.Run(row.file, func(t *testing.T) {
			records, invalid, err := check(row.file)
			if err != nil {
				t.Fatalf("examples/%s: %v", row.file, err)
			}
			if records != row.records || invalid != row.invalid {
				t.Errorf("examples/%s has %d records, %d invalid; README.md says %d and %d", row.file, records, invalid, row.records, row.invalid)
			}
		})
	}
	for _, f := range onDisk {
		if !described[f] {
			t.Errorf("examples/%s is not described in examples/README.md's table", f)
		}
	}
	if len(rows) == 0 {
		t.Error("examples/README.md has no table of examples")
	}
}
