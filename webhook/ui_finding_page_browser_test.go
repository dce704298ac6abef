package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
)

// hostileMarkdown is a description written to break out of its page: a
// script, handlers, javascript: and data: links, raw HTML; with the
// formatting a real one has around it.
const hostileMarkdown = "## Why it matters\n\n- first point\n- second **point**\n\n" +
	"<script>window.pwned = 1</script>\n\n" +
	`<img src=x onerror="window.pwned = 2">` + "\n\n" +
	"[bad link](javascript:window.pwned=3) and [good link](https://docs.example.org/guide)\n\n" +
	`<div onclick="window.pwned = 4">raw block</div>` + "\n\n" +
	`Inline <b onmouseover="window.pwned = 5">raw</b> <a href="javascript:window.pwned=6">raw anchor</a>` + "\n"

// findingPageReport is one record of the mixed example with hostile
// Markdown in its description, risk and remediation, found again a day
// later (a second scan) passing: upload the two in turn.
func findingPageReport(t *testing.T) (first, second []byte, uid string) {
	t.Helper()
	var records []map[string]any
	if err := json.Unmarshal(example(t, "aws_mixed_7_records.ocsf.json"), &records); err != nil {
		t.Fatal(err)
	}
	r := records[0]
	info := r["finding_info"].(map[string]any)
	info["uid"] = "finding-page-hostile"
	info["desc"] = hostileMarkdown
	r["risk_details"] = "Risk is **high**\n\n" + `<iframe src="javascript:window.pwned=7"></iframe>` + "\n\n" + `<svg onload="window.pwned=8"></svg>`
	r["remediation"] = map[string]any{
		"desc":       "1. step one\n2. step two\n\n[data link](data:text/html;base64,PHNjcmlwdD53aW5kb3cucHduZWQ9OTwvc2NyaXB0Pg==)",
		"references": []any{"https://docs.example.org/fix", "javascript:window.pwned=10", "aws s3api put-public-access-block --bucket b"},
	}
	r["unmapped"].(map[string]any)["related_url"] = "https://related.example.org/page"
	res := r["resources"].([]any)[0].(map[string]any)
	res["labels"] = []any{"env=prod", "team=payments"}
	enc := func(v any) []byte {
		var out bytes.Buffer
		e := json.NewEncoder(&out)
		e.SetEscapeHTML(false) // the markup reaches the server as markup
		if err := e.Encode(v); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	first = enc([]any{r})
	r["status_code"] = "PASS"
	r["time"] = r["time"].(float64) + 86400
	delete(r, "time_dt")
	second = enc([]any{r})
	return first, second, "finding-page-hostile"
}

type axNode struct{ role, name string }

// axNodes lists the accessibility tree's nodes of the elements inside sel,
// by role and accessible name: what a screen reader offers there.
func (p *page) axNodes(sel string) []axNode {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	nodes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(sel+" *"), chromedp.AtLeast(0)))
	if err != nil {
		p.t.Fatalf("find the elements in %s: %v", sel, err)
	}
	inside := map[cdp.BackendNodeID]bool{}
	for _, n := range nodes {
		inside[n.BackendNodeID] = true
	}
	tree, err := chromedp.Call(ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		p.t.Fatalf("accessibility tree: %v", err)
	}
	var out []axNode
	for _, n := range tree.Nodes {
		if n.Ignored || n.Role == nil || !inside[n.BackendDOMNodeID] {
			continue
		}
		name := ""
		if n.Name != nil {
			// The value is JSON: a name such as "Mute…" arrives escaped.
			if json.Unmarshal(n.Name.Value, &name) != nil {
				name = strings.Trim(string(n.Name.Value), `"`)
			}
		}
		out = append(out, axNode{strings.Trim(string(n.Role.Value), `"`), name})
	}
	return out
}

// TestWebUIFindingPage: a finding's page shows its description, risk and
// remediation rendered from Markdown, and nothing in them runs or opens
// anything but an http(s) link; its references, resource and account;
// and the same finding across scans.
func TestWebUIFindingPage(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	direct := te.as(t, te.key("demo-admin"))
	first, second, uid := findingPageReport(t)
	if _, status, _ := direct.ingest("first.ocsf.json", first); status != "completed" {
		t.Fatalf("the first import ended %s", status)
	}
	if _, status, _ := direct.ingest("second.ocsf.json", second); status != "completed" {
		t.Fatalf("the second import ended %s", status)
	}
	found := direct.list("/api/v1/findings", queryOf("filter[search]", uid, "sort", "-time"))
	if len(found.Data) != 2 {
		t.Fatalf("%d findings of uid %s; want one per scan, 2", len(found.Data), uid)
	}
	newest, oldest := found.Data[0].ID, found.Data[1].ID
	b := startBrowser(t, te.env.URL)
	admin := te.emails["demo-admin"]
	p := b.page(t)
	p.signIn(admin, te.pw[admin])
	p.do(chromedp.Navigate(b.base + "/#/findings/" + newest))
	p.waitJS("the finding's description shown", `!!document.querySelector('#finding-description h2')`)
	p.waitJS("its observations listed", `document.querySelectorAll('#finding-observations tbody tr').length === 2`)
	p.screenshot("finding-page")

	t.Run("Markdown is formatting, and nothing in it runs", func(t *testing.T) {
		ax := p.axNodes("#finding-description")
		has := func(role, name string) bool { return slices.Contains(ax, axNode{role, name}) }
		if !has("heading", "Why it matters") {
			t.Errorf("no heading \"Why it matters\" in the description: %v", ax)
		}
		items := 0
		for _, n := range ax {
			if n.role == "listitem" {
				items++
			}
		}
		if !slices.ContainsFunc(ax, func(n axNode) bool { return n.role == "list" }) || items != 2 {
			t.Errorf("the description's list: %d items in %v; want a list of 2", items, ax)
		}
		if !has("link", "good link") {
			t.Errorf("the https link is not a link: %v", ax)
		}
		for _, n := range ax {
			if n.role == "link" && n.name != "good link" {
				t.Errorf("%q is a link; only the https one may be", n.name)
			}
		}
		if got := p.text("#finding-description"); !strings.Contains(got, "bad link") || !strings.Contains(got, "raw anchor") {
			t.Errorf("the text of the dropped links is gone: %q", got)
		}
		if v := p.eval(`document.querySelector('#finding-description a').getAttribute('href') + ' ' + document.querySelector('#finding-description a').rel`); v != "https://docs.example.org/guide nofollow noreferrer noopener" {
			t.Errorf("the https link is %v", v)
		}
		if v := p.eval(`document.querySelector('#finding-risk strong')?.textContent`); v != "high" || !strings.Contains(p.text("#finding-risk"), "Risk is high") {
			t.Errorf("the risk is not rendered: %q", p.text("#finding-risk"))
		}
		rem := p.axNodes("#finding-remediation")
		if n := slices.IndexFunc(rem, func(n axNode) bool { return n.role == "list" }); n < 0 {
			t.Errorf("the remediation's numbered steps are not a list: %v", rem)
		}
		if slices.ContainsFunc(rem, func(n axNode) bool { return n.role == "link" }) {
			t.Errorf("the remediation's data: link is a link: %v", rem)
		}
		for _, sel := range []string{"script", "img", "iframe", "svg", "[onclick]", "[onmouseover]", "[onerror]", "[onload]", "[style]"} {
			if n, _ := p.eval(`document.querySelectorAll('#finding-view ` + sel + `').length`).(float64); n != 0 {
				t.Errorf("%v %s element(s) on the finding's page", n, sel)
			}
		}
		// Hover and click what the markup meant to arm.
		p.eval(`for (const n of document.querySelectorAll('#finding-view .markdown *')) { n.dispatchEvent(new MouseEvent('mouseover', {bubbles: true})); }; true`)
		if v := p.eval(`window.pwned === undefined`); v != true {
			t.Errorf("the record's markup ran: window.pwned = %v", p.eval(`String(window.pwned)`))
		}
	})

	t.Run("references and related URLs: links only for http and https", func(t *testing.T) {
		refs := p.axNodes("#finding-references")
		if !slices.Contains(refs, axNode{"link", "https://docs.example.org/fix"}) {
			t.Errorf("the https reference is not a link: %v", refs)
		}
		for _, n := range refs {
			if n.role == "link" && n.name != "https://docs.example.org/fix" {
				t.Errorf("reference %q is a link", n.name)
			}
		}
		if got := p.text("#finding-references"); !strings.Contains(got, "javascript:window.pwned=10") || !strings.Contains(got, "aws s3api put-public-access-block") {
			t.Errorf("the references that are not links are not shown as text: %q", got)
		}
		if !slices.Contains(p.axNodes("#finding-related"), axNode{"link", "https://related.example.org/page"}) {
			t.Errorf("the related URL is not a link: %v", p.axNodes("#finding-related"))
		}
	})

	t.Run("resource, with its uid secondary, and account", func(t *testing.T) {
		got := p.text("#finding-resource")
		for _, want := range []string{"env=prod, team=payments", "arn:aws:"} {
			if !strings.Contains(got, want) {
				t.Errorf("the resource shows %q; want it to hold %q", got, want)
			}
		}
		if v := p.eval(`(() => { const dds = [...document.querySelectorAll('#finding-resource dd')]; return dds[0].textContent !== '—' && dds[dds.length - 1].classList.contains('secondary') && dds[dds.length - 1].textContent.startsWith('arn:') })()`); v != true {
			t.Errorf("the resource's name does not come first and its uid last and secondary: %q", got)
		}
		if got := p.text("#finding-summary"); !strings.Contains(got, "aws 123456789012 (Test AWS Account)") || !strings.Contains(got, "PASS") {
			t.Errorf("the summary does not name the account and status: %q", got)
		}
		if v := p.eval(`document.querySelector('#finding-raw').open === false && document.querySelector('#finding-record').textContent.includes('"finding-page-hostile"')`); v != true {
			t.Error("the raw record is not kept, folded, on the page")
		}
	})

	t.Run("the same finding across scans, newest first", func(t *testing.T) {
		rows := func() []string {
			v, _ := p.eval(`JSON.stringify([...document.querySelectorAll('#finding-observations tbody tr')].map(r => [...r.cells].map(c => c.textContent.trim()).join(' | ')))`).(string)
			var out []string
			_ = json.Unmarshal([]byte(v), &out)
			return out
		}
		got := rows()
		if len(got) != 2 || !strings.Contains(got[0], "(this finding)") || !strings.Contains(got[0], "PASS") || !strings.Contains(got[1], "FAIL") {
			t.Fatalf("observations %q; want this finding (PASS), then the older scan's (FAIL)", got)
		}
		if v := p.eval(`document.querySelector('#finding-observations tbody tr').getAttribute('aria-current')`); v != "true" {
			t.Errorf("the row of the finding shown is not marked current: %v", v)
		}
		if got := p.text("#finding-observations-message"); got != "Seen in 2 scans, newest first." {
			t.Errorf("observations message %q", got)
		}
		older := p.axNodes("#finding-observations tbody tr:nth-child(2)")
		if !slices.ContainsFunc(older, func(n axNode) bool { return n.role == "link" && strings.Contains(got[1], n.name) && n.name != "" }) {
			t.Errorf("the older observation's time is not a link: %v", older)
		}
		p.do(chromedp.Click(chromedp.CSS(`#finding-observations tbody tr:nth-child(2) td a`)))
		p.waitJS("the older finding shown", `location.hash === '#/findings/`+oldest+`' && document.querySelector('#finding-observations tbody tr:nth-child(2)')?.getAttribute('aria-current') === 'true'`)
		if got := p.text("#finding-summary"); !strings.Contains(got, "FAIL") {
			t.Errorf("the older finding's summary %q; want FAIL", got)
		}
	})
}
