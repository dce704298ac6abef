package webhook_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/chromedp"
)

// axRows reads the table sel as Chromium's accessibility tree gives it to
// a screen reader: each row's cells (headers included), by their
// accessible names, in order.
func (p *page) axRows(sel string) [][]string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	nodes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSS(sel)))
	if err != nil || len(nodes) == 0 {
		p.t.Fatalf("find %s: %v", sel, err)
	}
	tree, err := chromedp.Call(ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		p.t.Fatalf("accessibility tree: %v", err)
	}
	byID := map[accessibility.NodeID]*accessibility.Node{}
	var table *accessibility.Node
	for _, n := range tree.Nodes {
		byID[n.NodeID] = n
		if n.BackendDOMNodeID == nodes[0].BackendNodeID && !n.Ignored {
			table = n
		}
	}
	if table == nil {
		p.t.Fatalf("%s is not in the accessibility tree", sel)
	}
	role := func(n *accessibility.Node) string {
		if n.Ignored || n.Role == nil {
			return ""
		}
		return strings.Trim(string(n.Role.Value), `"`)
	}
	name := func(n *accessibility.Node) string {
		if n.Name == nil {
			return ""
		}
		s, err := strconv.Unquote(string(n.Name.Value))
		if err != nil {
			s = string(n.Name.Value)
		}
		return strings.TrimSpace(s)
	}
	var rows [][]string
	var walk func(n *accessibility.Node)
	walk = func(n *accessibility.Node) {
		if role(n) == "row" {
			var cells []string
			for _, id := range n.ChildIDs {
				if c := byID[id]; c != nil && slices.Contains([]string{"cell", "gridcell", "columnheader", "rowheader"}, role(c)) {
					cells = append(cells, name(c))
				}
			}
			rows = append(rows, cells)
			return
		}
		for _, id := range n.ChildIDs {
			if c := byID[id]; c != nil {
				walk(c)
			}
		}
	}
	walk(table)
	return rows
}

// TestWebUIFindingsByCheck: the Findings page's grouped view shows each
// check's failing findings by severity, the worst check first, as the
// REST counts give them; it honours the list's filters and keeps them,
// and itself, in the URL; a check opens the list filtered to it; at 1280
// and at 390 px.
func TestWebUIFindingsByCheck(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	direct := te.as(t, te.key("demo-admin"))
	if _, status, _ := direct.ingest("aws_1500_records.ocsf.json", example(t, "aws_1500_records.ocsf.json")); status != "completed" {
		t.Fatalf("the 1,500-record import ended %s", status)
	}
	count := func(kv ...string) int {
		t.Helper()
		return direct.list("/api/v1/findings/latest", queryOf(append([]string{"page[size]", "1"}, kv...)...)).Meta.Pagination.Count
	}
	severities := []string{"critical", "high", "medium", "low", "informational"}
	// want is the table the grouped view must show under the filters kv,
	// counting the findings of status: the header, then one row per check
	// (check, its findings of status by severity, all of status, all its
	// findings), ranked by those critical, then high, … then by all
	// findings, then by name.
	want := func(status string, kv ...string) [][]string {
		t.Helper()
		var d struct {
			Data []struct{ Attributes map[string]any } `json:"data"`
		}
		decode(t, direct.get("/api/v1/findings/latest/counts", queryOf(append([]string{"group_by", "severity,check_id,status_code"}, kv...)...)), &d)
		type check struct {
			id           string
			sev          map[string]int
			failing, all int
		}
		checks := map[string]*check{}
		for _, g := range d.Data {
			a := g.Attributes
			id, sev, n := a["check_id"].(string), a["severity"].(string), int(a["count"].(float64))
			if !slices.Contains(severities, sev) {
				t.Fatalf("the fixture has a %s finding, which this test does not rank", sev)
			}
			c := checks[id]
			if c == nil {
				c = &check{id: id, sev: map[string]int{}}
				checks[id] = c
			}
			c.all += n
			if a["status_code"] == status {
				c.sev[sev] += n
				c.failing += n
			}
		}
		ranked := make([]*check, 0, len(checks))
		for _, c := range checks {
			ranked = append(ranked, c)
		}
		slices.SortFunc(ranked, func(x, y *check) int {
			for _, s := range severities {
				if d := y.sev[s] - x.sev[s]; d != 0 {
					return d
				}
			}
			return cmp.Or(y.all-x.all, strings.Compare(x.id, y.id))
		})
		word := map[bool]string{true: "Failing", false: status}[status == "FAIL"]
		rows := [][]string{{"Check", "Critical", "High", "Medium", "Low", "Informational", word, "Findings"}}
		for _, c := range ranked {
			row := []string{c.id}
			for _, s := range severities {
				row = append(row, strconv.Itoa(c.sev[s]))
			}
			rows = append(rows, append(row, strconv.Itoa(c.failing), strconv.Itoa(c.all)))
		}
		return rows
	}
	all := want("FAIL")
	// The ranking must be the test's subject: checks that tie on critical
	// are told apart by what follows.
	if len(all) < 10 || all[1][1] == all[len(all)-1][1] {
		t.Fatalf("the fixture's checks do not rank by severity: %v", all)
	}
	b := startBrowser(t, te.env.URL)
	admin := te.emails["demo-admin"]
	open := func(t *testing.T, width int64, hash string) *page {
		t.Helper()
		p := b.page(t)
		p.do(chromedp.EmulateViewport(width, 900))
		p.signIn(admin, te.pw[admin])
		p.do(chromedp.Navigate(b.base+"/"+hash), chromedp.WaitVisible(chromedp.ID("findings-view")))
		return p
	}
	// table waits for the grouped view to show rows (header included)
	// and reads it through the accessibility tree.
	table := func(p *page, rows int) [][]string {
		p.t.Helper()
		p.waitJS(fmt.Sprintf("%d checks shown", rows-1), fmt.Sprintf(`document.querySelectorAll('#checks-table tbody tr').length === %d && !document.querySelector('#checks-wrap').hidden`, rows-1))
		return p.axRows("#checks-table")
	}
	same := func(t *testing.T, what string, got, want [][]string) {
		t.Helper()
		if !slices.EqualFunc(got, want, slices.Equal[[]string]) {
			for i := range max(len(got), len(want)) {
				var g, w []string
				if i < len(got) {
					g = got[i]
				}
				if i < len(want) {
					w = want[i]
				}
				if !slices.Equal(g, w) {
					t.Errorf("%s: row %d reads %q, want %q", what, i, g, w)
				}
			}
		}
	}
	message := func(p *page, want string) {
		p.t.Helper()
		p.waitJS("the page says "+strconv.Quote(want), `document.querySelector('#findings-message').textContent === `+strconv.Quote(want))
	}
	findingsText := func(n int) string {
		return fmt.Sprintf("%d finding", n) + map[bool]string{true: "", false: "s"}[n == 1]
	}

	for _, width := range []int64{1280, 390} {
		t.Run(fmt.Sprintf("checks ranked worst first, and one opens its list, at %d px", width), func(t *testing.T) {
			p := open(t, width, "#/findings")
			message(p, findingsText(count()))
			// The switch from the list to the grouped view.
			p.do(chromedp.Click(chromedp.CSS(`#findings-layout input[value=check]`)))
			same(t, "by check", table(p, len(all)), all)
			if h, _ := p.eval(`location.hash`).(string); h != "#/findings?group=check" {
				t.Errorf("the grouped view's fragment is %q", h)
			}
			if p.visible("#findings-table") || p.visible("#findings-pager") {
				t.Error("the grouped view still shows the list of findings or its pager")
			}
			if wide, _ := p.eval(`document.documentElement.scrollWidth > window.innerWidth`).(bool); wide {
				t.Errorf("at %d px the page scrolls sideways", width)
			}
			if width == 1280 {
				p.screenshot("findings-by-check")
			} else {
				p.screenshot("findings-by-check-390")
			}
			// A check further down opens the current state's list of its findings.
			check := all[3][0]
			p.do(chromedp.Click(chromedp.CSS(`#checks-table tbody tr[data-check="` + check + `"] a`)))
			message(p, findingsText(count("filter[check_id]", check)))
			if h, _ := p.eval(`location.hash`).(string); h != "#/findings?check_id="+check {
				t.Errorf("the check's link opened %q", h)
			}
			if v := p.eval(fmt.Sprintf(`[...document.querySelectorAll('#findings-table tbody tr')].every(r => r.cells[3].textContent === %q)`, check)); v != true {
				t.Errorf("a listed finding is not of check %s", check)
			}
			if v, _ := p.eval(`document.querySelector('#findings-layout input[value=list]').checked && document.querySelector('input[name=findings-state][value=current]').checked`).(bool); !v {
				t.Error("the check did not open the current state's list")
			}
			// Back returns to the grouped view.
			p.do(chromedp.NavigateBack())
			same(t, "by check, back", table(p, len(all)), all)
		})
	}

	t.Run("severities the fixture lacks rank in OCSF's order", func(t *testing.T) {
		p := open(t, 1280, "#/findings?group=check")
		table(p, len(all))
		// Counts as the API answers them, ranked by the page's own code:
		// fatal is worse than critical, a severity outside OCSF's (purple)
		// ranks after all of OCSF's, and a check without
		// failing findings comes last whatever its other findings.
		got, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(async () => {
			const m = await import('/assets/findings.js');
			const g = (check_id, status_code, severity, count) => ({ check_id, status_code, severity, count });
			return m.rankChecks([
				g('a', 'FAIL', 'critical', 1), g('b', 'FAIL', 'fatal', 1), g('c', 'FAIL', 'critical', 1), g('c', 'FAIL', 'high', 2),
				g('d', 'PASS', 'critical', 9), g('e', 'FAIL', 'high', 1), g('e', 'PASS', 'low', 2), g('f', 'FAIL', 'high', 1),
				g('f', 'FAIL', 'purple', 1),
			], 'FAIL').map((c) => c.check_id + ':' + c.counted + '/' + c.total).join(' ') })()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if want := "b:1/1 c:3/3 a:1/1 f:2/2 e:1/3 d:0/9"; got != want {
			t.Errorf("ranked %q, want %q", got, want)
		}
	})

	t.Run("the grouped view honours the list's filters and keeps them in the URL", func(t *testing.T) {
		filters := []string{"filter[region]", "eu-west-1", "filter[provider_uid]", "123456789012"}
		inRegion := want("FAIL", filters...)
		if len(inRegion) < 3 || slices.EqualFunc(inRegion, all, slices.Equal[[]string]) {
			t.Fatalf("the region's checks are those of the whole state: the test would prove nothing")
		}
		p := open(t, 1280, "#/findings?group=check&region=eu-west-1&provider_uid=123456789012")
		same(t, "by check in eu-west-1", table(p, len(inRegion)), inRegion)
		p.do(chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("findings-view")))
		same(t, "by check in eu-west-1, reloaded", table(p, len(inRegion)), inRegion)
		if v, _ := p.eval(`document.querySelector('#findings-layout input[value=check]').checked && document.querySelector('#findings-filters').elements.region.value === 'eu-west-1'`).(bool); !v {
			t.Error("after a reload the page does not show By check in eu-west-1")
		}
		// A filter applied in the grouped view stays in it.
		p.do(chromedp.SetValue(chromedp.CSS(`#findings-filters select[name=status_code]`), "PASS"))
		p.eval(`document.querySelector('#findings-filters select[name=status_code]').dispatchEvent(new Event('change', { bubbles: true })) && true`)
		// With a status chosen, the counts are of that status.
		passing := want("PASS", append(filters, "filter[status_code]", "PASS")...)
		p.waitText("#checks-table thead", "PASS")
		same(t, "PASS by check in eu-west-1", table(p, len(passing)), passing)
		if h, _ := p.eval(`location.hash`).(string); h != "#/findings?group=check&status_code=PASS&region=eu-west-1&provider_uid=123456789012" {
			t.Errorf("after choosing PASS the fragment is %q", h)
		}
		check := passing[2][0]
		p.do(chromedp.Click(chromedp.CSS(`#checks-table tbody tr[data-check="` + check + `"] a`)))
		message(p, findingsText(count(append(filters, "filter[status_code]", "PASS", "filter[check_id]", check)...)))
		if h, _ := p.eval(`location.hash`).(string); h != "#/findings?status_code=PASS&check_id="+check+"&region=eu-west-1&provider_uid=123456789012" {
			t.Errorf("the check's link opened %q", h)
		}
	})
}
