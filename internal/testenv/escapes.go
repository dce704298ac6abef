package testenv

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// HostileText is what a report may carry to act on the terminal of whoever
// lists it: an OSC sequence that sets the window title, an SGR colour and a
// right-to-left override.
const HostileText = "\x1b]0;pwned\x07\x1b[31mred\u202e"

// HostileShown is HostileText as termsafe shows it.
const HostileShown = `\x1b]0;pwned\x07\x1b[31mred\u202e`

// ActsOnTerminal reports whether out holds any part of HostileText raw.
func ActsOnTerminal(out string) bool {
	return bytes.ContainsAny([]byte(out), "\x1b\x07\u202e")
}

// EscapesReport is a report of three records whose fields that tables show
// hold HostileText: record 0 is valid and has it in its check id
// (metadata.event_code) and resource uid; record 1 names a member twice,
// a member whose name holds it, so its error's pointer and detail do too;
// record 2 has it in its finding uid and names no account to bill.
func EscapesReport(t testing.TB) []byte {
	t.Helper()
	raw, err := os.ReadFile(Fixture("aws_3_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	if err := json.Unmarshal(raw, &recs); err != nil {
		t.Fatal(err)
	}
	enc := func(rec map[string]any) []byte {
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rec := recs[0]
	rec["metadata"].(map[string]any)["event_code"] = "check" + HostileText
	rec["resources"].([]any)[0].(map[string]any)["uid"] = "arn:" + HostileText
	rec["finding_info"].(map[string]any)["uid"] = "hostile-0"
	valid := enc(rec)

	key, err := json.Marshal("k" + HostileText)
	if err != nil {
		t.Fatal(err)
	}
	rec["finding_info"].(map[string]any)["uid"] = "hostile-1"
	dup := enc(rec)
	dup = append([]byte("{"+string(key)+":1,"+string(key)+":2,"), dup[1:]...)

	rec["finding_info"].(map[string]any)["uid"] = "uid" + HostileText
	delete(rec, "cloud")
	delete(rec, "unmapped")
	noAccount := enc(rec)

	return bytes.Join([][]byte{[]byte("["), valid, []byte(","), dup, []byte(","), noAccount, []byte("]")}, nil)
}
