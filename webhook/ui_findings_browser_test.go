package webhook_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/posture-dev/posture/internal/export"
	"github.com/posture-dev/posture/webhook"
)

// longTitle and longResource are a title and a resource ARN longer than
// their columns, with and without places to break.
var (
	longTitle    = strings.Repeat("A title far longer than its column ", 5) + strings.Repeat("x", 150)
	longResource = "arn:aws:s3:::" + strings.Repeat("bucket-name-segment-", 12)
)

// TestWebUIFindingsDoors: the Findings page shows the current state that
// REST's /findings/latest, MCP and kubectl posture read, beside the
// history; its overview counts what its list shows; its view and filters
// live in the URL; and its table fits the page at 1280 px.
func TestWebUIFindingsDoors(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	direct := te.as(t, te.key("demo-admin"))
	big := example(t, "aws_1500_records.ocsf.json")
	if _, status, _ := direct.ingest("aws_1500_records.ocsf.json", big); status != "completed" {
		t.Fatalf("the 1,500-record import ended %s", status)
	}
	// A later, smaller scan of the same account is its current state: the
	// first 60 records again, and one with a long title and resource.
	var records []map[string]any
	if err := json.Unmarshal(big, &records); err != nil {
		t.Fatal(err)
	}
	var long map[string]any
	raw, _ := json.Marshal(records[0])
	_ = json.Unmarshal(raw, &long)
	long["finding_info"].(map[string]any)["uid"] = "long-title-finding"
	long["finding_info"].(map[string]any)["title"] = longTitle
	long["resources"].([]any)[0].(map[string]any)["uid"] = longResource
	second, _ := json.Marshal(append(records[:60:60], long))
	if _, status, _ := direct.ingest("current.ocsf.json", second); status != "completed" {
		t.Fatalf("the second import ended %s", status)
	}
	count := func(path string, kv ...string) int {
		t.Helper()
		return direct.list(path, queryOf(append([]string{"page[size]", "20"}, kv...)...)).Meta.Pagination.Count
	}
	history, current := count("/api/v1/findings"), count("/api/v1/findings/latest")
	if current == 0 || current == history {
		t.Fatalf("current state %d of %d findings: the test would prove nothing", current, history)
	}
	findingsText := func(n int) string {
		return fmt.Sprintf("%d finding", n) + map[bool]string{true: "", false: "s"}[n == 1]
	}
	b := startBrowser(t, te.env.URL)
	admin := te.emails["demo-admin"]
	open := func(t *testing.T, hash string) *page {
		t.Helper()
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.do(chromedp.Navigate(b.base+"/"+hash), chromedp.WaitVisible(chromedp.ID("findings-view")))
		return p
	}
	// message waits for the list's line to read want.
	message := func(p *page, want string) {
		p.t.Helper()
		p.waitJS("the list says "+strconv.Quote(want), `document.querySelector('#findings-message').textContent === `+strconv.Quote(want))
	}
	hash := func(p *page) url.Values {
		p.t.Helper()
		h, _ := p.eval(`location.hash`).(string)
		_, q, _ := strings.Cut(h, "?")
		v, err := url.ParseQuery(q)
		if err != nil {
			p.t.Fatalf("fragment %q: %v", h, err)
		}
		return v
	}

	t.Run("opens on the current state, with a switch to the history", func(t *testing.T) {
		p := open(t, "#/findings")
		message(p, findingsText(current))
		if v, _ := p.eval(`document.querySelector('input[name=findings-state][value=current]').checked`).(bool); !v {
			t.Error("Current state is not the chosen view")
		}
		if !p.sentPrefix(http.MethodGet, "/api/v1/findings/latest?") || !p.sentPrefix(http.MethodGet, "/api/v1/findings/latest/counts?") {
			t.Error("the page did not read /api/v1/findings/latest and its counts")
		}
		p.do(chromedp.Click(chromedp.CSS(`#findings-state input[value=history]`)))
		message(p, findingsText(history))
		if got := hash(p).Get("view"); got != "history" {
			t.Errorf("the fragment's view is %q after switching to the history", got)
		}
		p.waitText("#findings-state-note", "every finding ever stored")
		if p.visible("#findings-delta") {
			t.Error("the history offers the Change filter, which only the current state has")
		}
		p.do(chromedp.Click(chromedp.CSS(`#findings-state input[value=current]`)))
		message(p, findingsText(current))
	})

	t.Run("the overview counts what the list shows, and a bar filters the list", func(t *testing.T) {
		p := open(t, "#/findings?region=us-east-1")
		message(p, findingsText(count("/api/v1/findings/latest", "filter[region]", "us-east-1")))
		groups := func(by string, kv ...string) map[string]int {
			t.Helper()
			var d struct {
				Data []struct{ Attributes map[string]any } `json:"data"`
			}
			decode(t, direct.get("/api/v1/findings/latest/counts", queryOf(append([]string{"group_by", by}, kv...)...)), &d)
			out := map[string]int{}
			for _, g := range d.Data {
				out[g.Attributes[by].(string)] = int(g.Attributes["count"].(float64))
			}
			return out
		}
		bars := func(chart string) map[string]int {
			t.Helper()
			v, _ := p.eval(`JSON.stringify(Object.fromEntries([...document.querySelectorAll('` + chart + ` .bar-row')].map(r => [r.dataset.value, Number(r.querySelector('.bar-count').textContent)])))`).(string)
			out := map[string]int{}
			_ = json.Unmarshal([]byte(v), &out)
			return out
		}
		check := func(chart string, want map[string]int) {
			t.Helper()
			p.waitJS(chart+" drawn", `document.querySelectorAll('`+chart+` .bar-row').length > 0`)
			got := bars(chart)
			for k, n := range want {
				if got[k] != n {
					t.Errorf("%s: %s = %d, want the API's %d (bars %v)", chart, k, got[k], n, got)
				}
			}
			for k, n := range got {
				if n != want[k] {
					t.Errorf("%s: %s = %d, the API counts %d", chart, k, n, want[k])
				}
			}
		}
		// Failing findings by severity, under the list's filters; every
		// status as a breakdown of its own.
		failing := groups("severity", "filter[region]", "us-east-1", "filter[status_code]", "FAIL")
		check("#by-severity", failing)
		check("#by-status", groups("status_code", "filter[region]", "us-east-1"))
		if got := p.text("#by-severity-title"); got != "Failing by severity" {
			t.Errorf("the severity chart is titled %q", got)
		}
		sev := ""
		for _, s := range []string{"critical", "high", "medium", "low", "informational"} {
			if failing[s] > 0 {
				sev = s
				break
			}
		}
		if sev == "" {
			t.Fatalf("no failing finding in us-east-1: %v", failing)
		}
		p.do(chromedp.Click(chromedp.CSS(`#by-severity [data-value="` + sev + `"]`)))
		message(p, findingsText(failing[sev]))
		if q := hash(p); q.Get("severity") != sev || q.Get("status_code") != "FAIL" || q.Get("region") != "us-east-1" {
			t.Errorf("after a click on the %s bar the fragment holds %v", sev, q)
		}
		p.waitJS("the bar shown as chosen", `document.querySelector('#by-severity [data-value="`+sev+`"]')?.getAttribute('aria-pressed') === 'true'`)
		if v := p.eval(fmt.Sprintf(`[...document.querySelectorAll('#findings-table tbody tr')].every(r => r.cells[0].textContent === %q && r.cells[1].textContent === 'FAIL')`, sev)); v != true {
			t.Errorf("a listed finding is not %s FAIL", sev)
		}
		p.screenshot("findings")
		// The same bar again takes its filters off; the others stay.
		p.do(chromedp.Click(chromedp.CSS(`#by-severity [data-value="` + sev + `"]`)))
		message(p, findingsText(count("/api/v1/findings/latest", "filter[region]", "us-east-1")))
		if q := hash(p); q.Has("severity") || q.Has("status_code") || q.Get("region") != "us-east-1" {
			t.Errorf("a second click left the fragment at %v", q)
		}
		// A status bar filters to its status, and severity then counts it.
		p.do(chromedp.Click(chromedp.CSS(`#by-status [data-value="PASS"]`)))
		message(p, findingsText(count("/api/v1/findings/latest", "filter[region]", "us-east-1", "filter[status_code]", "PASS")))
		p.waitText("#by-severity-title", "PASS by severity")
		check("#by-severity", groups("severity", "filter[region]", "us-east-1", "filter[status_code]", "PASS"))
	})

	t.Run("filters live in the URL: a reload and a shared link keep them", func(t *testing.T) {
		link := "#/findings?view=history&severity=critical&status_code=FAIL&sort=-severity_id"
		want := findingsText(count("/api/v1/findings", "filter[severity]", "critical", "filter[status_code]", "FAIL"))
		p := open(t, link)
		for _, step := range []string{"opened", "reloaded"} {
			message(p, want)
			got, _ := p.eval(`(() => { const f = document.querySelector('#findings-filters').elements;
				return [document.querySelector('#findings-state input:checked').value, f.severity.value, f.status_code.value, f.sort.value].join(' ') })()`).(string)
			if got != "history critical FAIL -severity_id" {
				t.Errorf("%s: the page shows %q, want the link's history critical FAIL -severity_id", step, got)
			}
			p.do(chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("findings-view")))
		}
		// Another person's session opens the same link on the same list.
		message(open(t, link), want)
		// What the form applies goes into the URL.
		p.eval(`document.querySelector('#findings-filters').elements.search.value = 'accessanalyzer'`)
		p.click("findings-apply")
		message(p, findingsText(count("/api/v1/findings", "filter[severity]", "critical", "filter[status_code]", "FAIL", "filter[search]", "accessanalyzer")))
		if q := hash(p); q.Get("search") != "accessanalyzer" || q.Get("severity") != "critical" || q.Get("view") != "history" {
			t.Errorf("after Apply the fragment holds %v", q)
		}
	})

	t.Run("Export downloads the list with its filters", func(t *testing.T) {
		p := open(t, "#/findings?status_code=FAIL&severity=high&sort=check_id")
		want := count("/api/v1/findings/latest", "filter[status_code]", "FAIL", "filter[severity]", "high")
		if want == 0 {
			t.Fatal("no high failure in the current state: the export would prove nothing")
		}
		message(p, findingsText(want))
		href, _ := p.eval(`document.querySelector('#findings-export-csv').getAttribute('href')`).(string)
		u, err := url.Parse(href)
		if err != nil || u.Path != webhook.PathLatestFindingsExport || u.Query().Get("format") != "csv" ||
			u.Query().Get("filter[status_code]") != "FAIL" || u.Query().Get("filter[severity]") != "high" || u.Query().Get("sort") != "check_id" {
			t.Fatalf("Export CSV links to %q; want the current state's export with the list's filters and order", href)
		}
		dir := t.TempDir()
		done := make(chan string, 1)
		listen := func(ev any) {
			if e, ok := ev.(*cdpbrowser.EventDownloadProgress); ok && e.State == cdpbrowser.DownloadProgressStateCompleted {
				select {
				case done <- e.GUID:
				default:
				}
			}
		}
		_ = chromedp.Listen(p.ctx, listen)
		_ = chromedp.ListenBrowser(p.ctx, listen)
		events := true
		if _, err := chromedp.Call(p.ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllowAndName, BrowserContextID: chromedp.FromContext(p.ctx).BrowserContextID,
			DownloadPath: dir, EventsEnabled: &events,
		}); err != nil {
			t.Fatal(err)
		}
		p.do(chromedp.Click(chromedp.ID("findings-export-csv")))
		var guid string
		select {
		case guid = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("clicking Export CSV downloaded nothing in 30 s")
		}
		f, err := os.Open(filepath.Join(dir, guid))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rows := readCSVExport(t, f, export.CurrentColumns)
		if len(rows) != want {
			t.Fatalf("the download holds %d rows; the list shows %d", len(rows), want)
		}
		for i, r := range rows {
			if r["status_code"] != "FAIL" || r["severity"] != "high" || (i > 0 && r["check_id"] < rows[i-1]["check_id"]) {
				t.Fatalf("row %d = %v: not a high failure in check order", i+1, r)
			}
		}
		// The history's export follows the switch.
		p.do(chromedp.Click(chromedp.CSS(`#findings-state input[value=history]`)))
		p.waitJS("the export links follow the history", `document.querySelector('#findings-export-ocsf').getAttribute('href').startsWith('`+webhook.PathFindingsExport+`?')`)
	})

	t.Run("Check and Region offer the values that exist", func(t *testing.T) {
		p := open(t, "#/findings")
		message(p, findingsText(current))
		for _, dim := range []string{"check_id", "region"} {
			var d struct {
				Data []struct{ Attributes map[string]any } `json:"data"`
			}
			decode(t, direct.get("/api/v1/findings/latest/counts", "group_by="+dim), &d)
			var want []string
			for _, g := range d.Data {
				want = append(want, fmt.Sprintf("%s (%d)", g.Attributes[dim], int(g.Attributes["count"].(float64))))
			}
			sel := `#findings-filters select[name=` + dim + `]`
			p.waitJS(dim+" options", `document.querySelectorAll('`+sel+` option').length > 1`)
			got, _ := p.eval(`[...document.querySelectorAll('` + sel + ` option')].slice(1).map(o => o.textContent).join('|')`).(string)
			if got != strings.Join(want, "|") {
				t.Errorf("%s offers %q, want the API's values %q", dim, got, strings.Join(want, "|"))
			}
		}
		// Choosing one filters the list to it.
		check, _ := p.eval(`document.querySelector('#findings-filters select[name=check_id]').options[1].value`).(string)
		p.do(chromedp.SetValue(chromedp.CSS(`#findings-filters select[name=check_id]`), check))
		p.eval(`document.querySelector('#findings-filters select[name=check_id]').dispatchEvent(new Event('change', { bubbles: true })) && true`)
		message(p, findingsText(count("/api/v1/findings/latest", "filter[check_id]", check)))
		if got := hash(p).Get("check_id"); got != check {
			t.Errorf("the fragment's check_id is %q, want %q", got, check)
		}
	})

	t.Run("an empty result says so and names the filters", func(t *testing.T) {
		for _, tc := range []struct{ hash, want string }{
			{"#/findings?severity=critical&search=no-such-finding-anywhere", "No findings in the current state match severity critical, search no-such-finding-anywhere."},
			{"#/findings?view=history&check_id=no_such_check&region=mars-1", "No findings in the history match check no_such_check, region mars-1."},
		} {
			p := open(t, tc.hash)
			message(p, tc.want)
			if !p.visible("#findings-clear") {
				t.Errorf("%s: no Clear filters", tc.hash)
			}
		}
		p := open(t, "#/findings?severity=critical&search=no-such-finding-anywhere")
		message(p, "No findings in the current state match severity critical, search no-such-finding-anywhere.")
		p.click("findings-clear")
		message(p, findingsText(current))
		if h, _ := p.eval(`location.hash`).(string); h != "#/findings" {
			t.Errorf("after Clear filters the fragment is %q", h)
		}
	})

	t.Run("the Change column and filter show the current state's delta", func(t *testing.T) {
		p := open(t, "#/findings")
		message(p, findingsText(current))
		// A finding as the current state answers it, drawn by the page's own code.
		for _, tc := range []struct {
			attrs map[string]any
			want  string
		}{
			{map[string]any{"delta": "new", "first_seen_at": "2026-01-02T03:04:05Z"}, "newfirst seen "},
			{map[string]any{"delta": "changed"}, "changed"},
			{map[string]any{"first_seen_at": "2026-01-02T03:04:05Z"}, "first seen "},
			{map[string]any{}, "—"},
		} {
			attrs := map[string]any{"uid": "u", "title": "t", "severity": "high", "status_code": "FAIL", "check_id": "c", "region": "r", "resource_uid": "x", "time": "2026-01-02T03:04:05Z"}
			for k, v := range tc.attrs {
				attrs[k] = v
			}
			js, _ := json.Marshal(map[string]any{"id": "f", "attributes": attrs})
			got, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(async () => {
				const m = await import('/assets/findings.js');
				const row = m.findingRow(`+string(js)+`);
				return row.cells[2].textContent + '|' + document.querySelector('#findings-table thead tr').cells[2].textContent })()`, chromedp.EvalAwaitPromise))
			if err != nil {
				t.Fatal(err)
			}
			cell, header, _ := strings.Cut(got, "|")
			if header != "Change" || !strings.HasPrefix(cell, tc.want) {
				t.Errorf("%v: the %s column reads %q, want %q…", tc.attrs, header, cell, tc.want)
			}
		}
		// The filter asks the current state for filter[delta] and keeps it in the URL.
		p.do(chromedp.SetValue(chromedp.CSS(`#findings-filters select[name=delta]`), "new"))
		p.eval(`document.querySelector('#findings-filters select[name=delta]').dispatchEvent(new Event('change', { bubbles: true })) && true`)
		p.waitFor("a request with filter[delta]=new", func() bool {
			return p.sentPrefix(http.MethodGet, "/api/v1/findings/latest?filter%5Bdelta%5D=new")
		})
		if got := hash(p).Get("delta"); got != "new" {
			t.Errorf("the fragment's delta is %q", got)
		}
		// The history has no delta: a link's is dropped, not sent.
		p.do(chromedp.Navigate(b.base + "/#/findings?view=history&delta=new"))
		message(p, findingsText(history))
		if p.sentPrefix(http.MethodGet, "/api/v1/findings?filter%5Bdelta%5D") {
			t.Error("the history was asked for filter[delta]")
		}
	})

	t.Run("the table fits 1280 px and long values wrap in their columns", func(t *testing.T) {
		for _, tc := range []struct {
			hash  string
			width int64
		}{
			{"#/findings?search=long-title-finding", 1280},
			{"#/findings?sort=-severity_id", 1280},
			{"#/findings?view=history&sort=check_id", 1280},
			{"#/findings?search=long-title-finding", 390},
			{"#/findings?view=history", 390}, // Check offers every check id
		} {
			p := b.page(t)
			p.do(chromedp.EmulateViewport(tc.width, 900))
			p.signIn(admin, te.pw[admin])
			p.do(chromedp.Navigate(b.base+"/"+tc.hash), chromedp.WaitVisible(chromedp.ID("findings-view")))
			p.waitJS("findings listed", `document.querySelectorAll('#findings-table tbody tr').length > 0`)
			p.waitJS("the checks offered", `document.querySelectorAll('#findings-filters select[name=check_id] option').length > 1`)
			if strings.Contains(tc.hash, "long-title") {
				p.waitText("#findings-table tbody", longResource)
			}
			if got, _ := p.eval(`document.documentElement.scrollWidth <= window.innerWidth`).(bool); !got {
				t.Errorf("%s at %d px: the page scrolls sideways", tc.hash, tc.width)
			}
			if tc.width < 1280 {
				continue // the table scrolls inside its frame
			}
			if got, _ := p.eval(`(() => { const w = document.querySelector('#findings-table').closest('.table-wrap'); return w.scrollWidth + '/' + w.clientWidth })()`).(string); func() bool {
				var sw, cw int
				_, err := fmt.Sscanf(got, "%d/%d", &sw, &cw)
				return err != nil || sw > cw
			}() {
				t.Errorf("%s at 1280 px: the table is wider than its frame (%s): columns are cut off", tc.hash, got)
			}
			over, _ := p.eval(`[...document.querySelectorAll('#findings-table th, #findings-table td')]
				.filter(c => c.scrollWidth > c.clientWidth + 1 || c.getBoundingClientRect().right > window.innerWidth)
				.slice(0, 5).map(c => c.cellIndex + ': ' + c.textContent.slice(0, 40)).join('; ')`).(string)
			if over != "" {
				t.Errorf("%s at 1280 px: cells overflow their column or the window: %s", tc.hash, over)
			}
			if strings.Contains(tc.hash, "long-title") {
				// The long title wraps inside its column rather than widening it.
				got, _ := p.eval(`(() => { const c = document.querySelector('#findings-table tbody td.c-title');
					return c.textContent.length + ' chars, ' + c.getBoundingClientRect().width + 'x' + c.getBoundingClientRect().height + ' px, line ' + getComputedStyle(c).lineHeight })()`).(string)
				var n int
				var w, h float64
				if _, err := fmt.Sscanf(got, "%d chars, %gx%g px", &n, &w, &h); err != nil || n != len(longTitle) || h < 64 {
					t.Errorf("%s: the long title's cell is %s: it did not wrap", tc.hash, got)
				}
			}
		}
	})
}
