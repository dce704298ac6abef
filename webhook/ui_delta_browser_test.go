package webhook_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/posture-dev/posture/internal/apitest"
)

// TestWebUIFindingsDelta: after a second report of an account, uploaded
// and ingested as any other, the Findings page's Change column shows what
// the API tells of each current finding (new, changed), and its Change
// filter lists the new, the changed, and the resolved findings: those that
// failed in the run the current one replaced and now pass or are gone.
// The reports are apitest.CurrentScenario's first two, which REST, MCP and
// kubectl are tested with: an hour later, one check is run again, where
// u3 passes now (changed), u6 appears (new) and the failing u4 is gone.
func TestWebUIFindingsDelta(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	direct := te.as(t, te.key("demo-admin"))
	steps := apitest.CurrentScenario(t)[:2]
	for i, step := range steps {
		// The table names a finding by its title: each record's title is
		// its uid's, so that a row tells which finding it is.
		var recs []map[string]any
		if err := json.Unmarshal(step.Report, &recs); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			info := r["finding_info"].(map[string]any)
			info["title"] = "Finding " + info["uid"].(string)
		}
		report, _ := json.Marshal(recs)
		if _, status, _ := direct.ingest(fmt.Sprintf("report-%d.ocsf.json", i+1), report); status != "completed" {
			t.Fatalf("%s: the import ended %s", step.Name, status)
		}
	}
	step := steps[1]
	withDelta := func(d string) []string {
		var out []string
		for _, c := range step.Current {
			if strings.HasSuffix(c, " "+d) {
				out = append(out, c)
			}
		}
		return out
	}
	// The scenario holds each kind of change, and not only one kind.
	if len(withDelta("new")) == 0 || len(withDelta("changed")) == 0 || len(step.Resolved) == 0 || len(withDelta("new")) == len(step.Current) {
		t.Fatalf("%s: the scenario's current state %v and resolved %v do not show every delta", step.Name, step.Current, step.Resolved)
	}

	b := startBrowser(t, te.env.URL)
	admin := te.emails["demo-admin"]
	p := b.page(t)
	p.signIn(admin, te.pw[admin])
	// shown waits for the list to say it holds want's findings, then
	// reads its rows through the accessibility tree as "uid status_code
	// delta" (the delta when the Change cell starts with one), sorted.
	shown := func(want []string) []string {
		t.Helper()
		text := fmt.Sprintf("%d finding", len(want)) + map[bool]string{true: "", false: "s"}[len(want) == 1]
		p.waitJS("the list says "+strconv.Quote(text), `document.querySelector('#findings-message').textContent === `+strconv.Quote(text)+
			fmt.Sprintf(` && document.querySelectorAll('#findings-table tbody tr').length === %d`, len(want)))
		rows := p.axRows("#findings-table")
		if len(rows) == 0 || !slices.Equal(rows[0], []string{"Severity", "Status", "Change", "Check", "Title", "Region", "Resource", "Time"}) {
			t.Fatalf("the table's header reads %q", rows)
		}
		var out []string
		for _, r := range rows[1:] {
			if len(r) != 8 {
				t.Fatalf("a row has %d cells: %q", len(r), r)
			}
			line := strings.TrimPrefix(r[4], "Finding ") + " " + r[1]
			if d, _, _ := strings.Cut(r[2], " "); slices.Contains([]string{"new", "changed", "resolved"}, d) {
				line += " " + d
			}
			out = append(out, line)
		}
		slices.Sort(out)
		return out
	}
	p.do(chromedp.Navigate(b.base+"/#/findings"), chromedp.WaitVisible(chromedp.ID("findings-view")))
	if got := shown(step.Current); !slices.Equal(got, step.Current) {
		t.Errorf("the current state shows %q, want %q", got, step.Current)
	}
	for _, tc := range []struct {
		delta string
		want  []string
	}{
		{"new", withDelta("new")},
		{"changed", withDelta("changed")},
		{"resolved", step.Resolved},
	} {
		p.do(chromedp.SetValue(chromedp.CSS(`#findings-filters select[name=delta]`), tc.delta))
		p.eval(`document.querySelector('#findings-filters select[name=delta]').dispatchEvent(new Event('change', { bubbles: true })) && true`)
		if got := shown(tc.want); !slices.Equal(got, tc.want) {
			t.Errorf("Change %s lists %q, want %q", tc.delta, got, tc.want)
		}
		if !p.sentPrefix(http.MethodGet, "/api/v1/findings/latest?filter%5Bdelta%5D="+tc.delta+"&") {
			t.Errorf("Change %s: the page did not ask the current state for filter[delta]=%s", tc.delta, tc.delta)
		}
		h, _ := p.eval(`location.hash`).(string)
		if _, q, _ := strings.Cut(h, "?"); q != "delta="+url.QueryEscape(tc.delta) {
			t.Errorf("Change %s: the fragment is %q", tc.delta, h)
		}
	}
	// Any again shows the whole current state.
	p.do(chromedp.SetValue(chromedp.CSS(`#findings-filters select[name=delta]`), ""))
	p.eval(`document.querySelector('#findings-filters select[name=delta]').dispatchEvent(new Event('change', { bubbles: true })) && true`)
	if got := shown(step.Current); !slices.Equal(got, step.Current) {
		t.Errorf("Change Any shows %q, want %q", got, step.Current)
	}
	p.screenshot("findings-delta")
}
