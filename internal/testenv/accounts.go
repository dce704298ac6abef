package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

// AccountsReport is a report of valid records made from the first record
// of aws_3_records.ocsf.json, record i naming account uids[i] under a
// finding uid of its own (a repeated one makes a record invalid).
func AccountsReport(t testing.TB, uids ...string) []byte {
	t.Helper()
	raw, err := os.ReadFile(Fixture("aws_3_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	if err := json.Unmarshal(raw, &recs); err != nil {
		t.Fatal(err)
	}
	rec := recs[0]
	var b bytes.Buffer
	b.WriteByte('[')
	for i, uid := range uids {
		if i > 0 {
			b.WriteByte(',')
		}
		rec["cloud"].(map[string]any)["account"].(map[string]any)["uid"] = uid
		rec["finding_info"].(map[string]any)["uid"] = fmt.Sprintf("finding-%d", i)
		enc, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(enc)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// DistinctAccounts is n account uids, each different.
func DistinctAccounts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%012d", i)
	}
	return out
}
