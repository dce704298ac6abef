package reportgen

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestGeneratedUIDs checks that generated uids are unique, end in 12 hex
// digits and keep their fixture record's uid: the scanner's prefix in the
// record's own account, so a search for one meets the trigrams real uids
// share and no counter's.
func TestGeneratedUIDs(t *testing.T) {
	g, err := New()
	if err != nil {
		t.Fatal(err)
	}
	shape := regexp.MustCompile(`^prowler-aws-[a-z0-9_]+-(\d{12})-[a-z0-9-]+-[0-9a-f]{12}$`)
	ranges := []struct {
		name     string
		from, to int
	}{
		{"the load's", 0, 300_000},
		{"the probes'", 900_000_000, 900_020_000},
	}
	seen := map[string]int{}
	var buf []byte
	for _, r := range ranges {
		for i := r.from; i < r.to; i++ {
			buf = g.record(buf, i)
			var rec struct {
				FindingInfo struct {
					UID string `json:"uid"`
				} `json:"finding_info"`
			}
			if i < r.from+3000 { // every template, in every account, decoded
				if err := json.Unmarshal(buf, &rec); err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				if rec.FindingInfo.UID != g.UID(i) {
					t.Fatalf("record %d has uid %q, uid(%d) says %q", i, rec.FindingInfo.UID, i, g.UID(i))
				}
			}
			uid := g.UID(i)
			m := shape.FindStringSubmatch(uid)
			if m == nil {
				t.Fatalf("%s record %d: uid %q is not a scanner's uid ending in 12 hex digits", r.name, i, uid)
			}
			if want := Accounts[i%len(Accounts)]; m[1] != want {
				t.Fatalf("record %d: uid %q names account %s, want %s", i, uid, m[1], want)
			}
			if j, dup := seen[uid]; dup {
				t.Fatalf("records %d and %d share uid %q", j, i, uid)
			}
			seen[uid] = i
		}
	}
	// Neighbours share no long prefix of their suffixes: a counter's would.
	a, b := g.UID(1000), g.UID(1000+len(g.templates)*len(Accounts))
	if a[:len(a)-12] != b[:len(b)-12] || strings.HasPrefix(b[len(b)-12:], a[len(a)-12:len(a)-6]) {
		t.Fatalf("uids %q and %q: same template, want suffixes that differ early", a, b)
	}
}

// TestGeneratedTimes checks that a record's time is its own and never
// earlier than an earlier record's, so that ingestion appends to an index
// in time order, as a scanner's next scan does.
func TestGeneratedTimes(t *testing.T) {
	g, err := New()
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	timeOf := func(i int) int64 {
		t.Helper()
		buf = g.record(buf, i)
		var rec struct {
			Time int64 `json:"time"`
		}
		if err := json.Unmarshal(buf, &rec); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if rec.Time != RecordTime(i) {
			t.Fatalf("record %d has time %d, RecordTime(%d) says %d", i, rec.Time, i, RecordTime(i))
		}
		return rec.Time
	}
	for _, tc := range []struct{ earlier, later int }{
		{0, RecordsPerSecond - 1},
		{0, RecordsPerSecond},
		{86_399, 86_400},
		{9_999_999, 10_000_000},
		{10_000_000, 900_000_000},
	} {
		if a, b := timeOf(tc.earlier), timeOf(tc.later); b < a {
			t.Errorf("record %d has time %d, before record %d's %d", tc.later, b, tc.earlier, a)
		}
	}
	if a, b := timeOf(0), timeOf(RecordsPerSecond); b != a+1 {
		t.Errorf("record %d has time %d, want one second after record 0's %d", RecordsPerSecond, b, a)
	}
}

// TestAccountsOfTheirOwn: a generator over other accounts names only
// those, in the record's cloud.account.uid, in its uid and in its
// resources, so a tenant's findings show whose they are.
func TestAccountsOfTheirOwn(t *testing.T) {
	accounts := []string{"700000000001", "700000000002"}
	g, err := NewFor(accounts)
	if err != nil {
		t.Fatal(err)
	}
	for i := 5_000_000; i < 5_000_000+3000; i++ {
		raw := g.Record(i)
		var rec struct {
			Cloud struct {
				Account struct {
					UID string `json:"uid"`
				} `json:"account"`
			} `json:"cloud"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		want := accounts[i%len(accounts)]
		if rec.Cloud.Account.UID != want || g.Account(i) != want || !strings.Contains(g.UID(i), "-"+want+"-") {
			t.Fatalf("record %d: account %q, Account %q, uid %q; want account %s throughout", i, rec.Cloud.Account.UID, g.Account(i), g.UID(i), want)
		}
		for _, other := range Accounts {
			if strings.Contains(string(raw), other) {
				t.Fatalf("record %d names account %s of the default set:\n%s", i, other, raw)
			}
		}
	}
	if _, err := NewFor(nil); err == nil {
		t.Error("NewFor(nil) made a generator with no account to name")
	}
}
