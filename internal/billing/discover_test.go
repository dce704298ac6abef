package billing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/posture-dev/posture/internal/billing"
	"github.com/posture-dev/posture/internal/testenv"
)

// record is a valid record of the real fixture, naming account uid.
func record(t *testing.T, uid string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(testenv.Fixture("aws_3_records.ocsf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	if err := json.Unmarshal(raw, &recs); err != nil {
		t.Fatal(err)
	}
	rec := recs[0]
	rec["cloud"].(map[string]any)["account"].(map[string]any)["uid"] = uid
	return rec
}

// report is a JSON array of valid records naming each uid.
func report(t *testing.T, uids ...string) []byte { return testenv.AccountsReport(t, uids...) }

// collect feeds data to a Collector in small writes, as an intake does.
func collect(t *testing.T, data []byte) ([]billing.Account, error) {
	t.Helper()
	c := billing.NewCollector(context.Background())
	defer c.Abort()
	if _, err := io.Copy(c, iotest.OneByteReader(bytes.NewReader(data[:min(len(data), 4096)]))); err != nil {
		return nil, err
	}
	if _, err := io.CopyBuffer(c, bytes.NewReader(data[min(len(data), 4096):]), make([]byte, 32<<10)); err != nil {
		return nil, err
	}
	return c.Finish()
}

// TestCollectorFindsWhatDiscoverFinds: intake's accounts are exactly those
// DiscoverAccounts finds in the stored report, the rule billing used before.
func TestCollectorFindsWhatDiscoverFinds(t *testing.T) {
	fixture := func(name string) []byte {
		b, err := os.ReadFile(testenv.Fixture(name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	invalid := record(t, "444444444444")
	delete(invalid, "finding_info")
	invalidJSON, _ := json.Marshal(invalid)
	mixed := report(t, "111111111111", "222222222222", "111111111111")
	mixed = append(append(append(mixed[:len(mixed)-1], ','), invalidJSON...), ']')
	tests := []struct {
		name string
		data []byte
		want []billing.Account // nil: as DiscoverAccounts says, checked below
	}{
		{"aws fixture", fixture("aws_1500_records.ocsf.json"), nil},
		{"azure fixture", fixture("example_output_azure.ocsf.json"), nil},
		{"gcp fixture", fixture("example_output_gcp.ocsf.json"), nil},
		{"kubernetes fixture", fixture("example_output_kubernetes.ocsf.json"), nil},
		{"first appearance order, invalid records skipped", mixed,
			[]billing.Account{{Type: "aws", UID: "111111111111"}, {Type: "aws", UID: "222222222222"}}},
		{"empty report", []byte("[]"), []billing.Account{}},
		{"malformed after an account", append(report(t, "555555555555")[:10], []byte("}{]")...), nil},
		{"not an array", []byte(`{"a":1}`), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := collect(t, tc.data)
			if err != nil {
				t.Fatalf("collect: %v", err)
			}
			want, err := billing.DiscoverAccounts(context.Background(), bytes.NewReader(tc.data))
			if err != nil {
				t.Fatalf("DiscoverAccounts: %v", err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("collector found %v, DiscoverAccounts %v", got, want)
			}
			if tc.want != nil && !slices.Equal(got, tc.want) {
				t.Fatalf("accounts = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCollectorBoundsAccounts: a report may name MaxAccounts accounts, and
// one more fails the write that carries it, naming the limit and the record.
func TestCollectorBoundsAccounts(t *testing.T) {
	uids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			// Repeats do not count: every account appears twice.
			out[i] = fmt.Sprintf("%012d", i/2)
		}
		return out
	}
	tests := []struct {
		name    string
		records int
		tooMany bool
	}{
		{"at the limit", 2 * billing.MaxAccounts, false},
		{"one past the limit", 2*billing.MaxAccounts + 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := collect(t, report(t, uids(tc.records)...))
			var tma *billing.TooManyAccountsError
			if tc.tooMany {
				if !errors.As(err, &tma) || tma.Limit != billing.MaxAccounts || tma.Record != 2*billing.MaxAccounts {
					t.Fatalf("error = %v, want a TooManyAccountsError at record %d", err, 2*billing.MaxAccounts)
				}
				if want := fmt.Sprintf("at most %d distinct accounts", billing.MaxAccounts); !bytes.Contains([]byte(err.Error()), []byte(want)) {
					t.Fatalf("error %q does not name the limit (%q)", err, want)
				}
				return
			}
			if err != nil || len(got) != billing.MaxAccounts {
				t.Fatalf("collect = %d accounts, %v; want %d", len(got), err, billing.MaxAccounts)
			}
		})
	}
}

// TestCollectorAbort: an intake that fails midway ends its collector, and
// the collector refuses further bytes.
func TestCollectorAbort(t *testing.T) {
	c := billing.NewCollector(context.Background())
	data := report(t, "111111111111", "222222222222")
	if _, err := c.Write(data[:len(data)/2]); err != nil {
		t.Fatal(err)
	}
	c.Abort()
	if _, err := c.Write(data[len(data)/2:]); err == nil {
		t.Fatal("a write after Abort succeeded")
	}
	c.Abort()
}

// BenchmarkCollector is what finding the accounts adds to an intake: the
// 1,500-record fixture fed through a Collector as an upload feeds it.
func BenchmarkCollector(b *testing.B) {
	data, err := os.ReadFile(testenv.Fixture("aws_1500_records.ocsf.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		c := billing.NewCollector(context.Background())
		if _, err := io.CopyBuffer(c, bytes.NewReader(data), make([]byte, 32<<10)); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Finish(); err != nil {
			b.Fatal(err)
		}
	}
}
