package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/restapi"
	"github.com/posture-dev/posture/internal/store"
	"github.com/posture-dev/posture/internal/testenv"
)

// The web UI is tested in a real Chromium (Debian's, installed by
// hack/test-deps.sh) against the whole API. POSTURE_UI_SCREENSHOTS=1 also
// saves the screenshots that docs/ui.md shows into docs/images.

// browser is one headless Chromium for a test.
type browser struct {
	t    *testing.T
	root context.Context
	base string
}

func startBrowser(t *testing.T, base string) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("the web UI tests need Debian's chromium: run hack/test-deps.sh (apt-get install -y chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900))
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	// The first context starts the browser; each page gets a browser context
	// of its own so that sessions (cookies) stay apart.
	root, cancelRoot := chromedp.NewContext(alloc)
	t.Cleanup(cancelRoot)
	if err := chromedp.Do(root); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return &browser{t: t, root: root, base: base}
}

// page is a tab with a session of its own. It records the requests the page
// sends, so tests can tell that nothing was sent.
type page struct {
	t   *testing.T
	ctx context.Context
	b   *browser

	mu       sync.Mutex
	requests []string // "METHOD /path"
	// failStatus makes the browser fail requests for a job's status, as a
	// network outage would.
	failStatus atomic.Bool
	// holdStatus holds requests for a job's status until it is cleared, as
	// a slow network would: the dialog stays following the job meanwhile.
	holdStatus atomic.Bool
}

func (b *browser) page(t *testing.T) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.root, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	p := &page{t: t, ctx: ctx, b: b}
	// The first run opens the tab and ties it to the context it is given:
	// the tab's own, not a timeout of one action.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			path := e.Request.URL
			if i := strings.Index(path, "/api/"); i >= 0 {
				path = path[i:]
			}
			p.mu.Lock()
			p.requests = append(p.requests, e.Request.Method+" "+path)
			p.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	go func() {
		for e, err := range paused {
			if err != nil {
				return
			}
			if p.failStatus.Load() && e.Request.Method == http.MethodGet {
				_, _ = chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: e.RequestID, ErrorReason: network.ErrorReasonConnectionFailed})
				continue
			}
			if p.holdStatus.Load() && e.Request.Method == http.MethodGet {
				go func() {
					for p.holdStatus.Load() && ctx.Err() == nil {
						time.Sleep(20 * time.Millisecond)
					}
					_, _ = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
				}()
				continue
			}
			_, _ = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
		}
	}()
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/api/v1/ingestions/*", RequestStage: fetch.RequestStageRequest}}}); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// sent counts the requests sent with this method to this path.
func (p *page) sent(method, path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.requests {
		if r == method+" "+path {
			n++
		}
	}
	return n
}

// sentPrefix tells whether a request with this method to a path starting
// with prefix was sent.
func (p *page) sentPrefix(method, prefix string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.requests {
		if strings.HasPrefix(r, method+" "+prefix) {
			return true
		}
	}
	return false
}

func (p *page) eval(js string) any {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[any](js))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitJS waits until the JavaScript expression is true.
func (p *page) waitJS(what, js string) {
	p.t.Helper()
	testenv.Eventually(p.t, 30*time.Second, what, func() (bool, string) {
		if v, _ := p.eval(js).(bool); v {
			return true, ""
		}
		return false, fmt.Sprintf("%s\nimport state: %v\nimport error: %v\npage: %v", js,
			p.eval(`document.querySelector('#import-state').textContent`), p.eval(`document.querySelector('#import-error').textContent`),
			p.eval(`document.querySelector('main').innerText.slice(0, 1500)`))
	})
}

// waitFor waits until cond, a fact the test reads from outside the page
// (the requests it sent), holds.
func (p *page) waitFor(what string, cond func() bool) {
	p.t.Helper()
	testenv.Eventually(p.t, 30*time.Second, what, func() (bool, string) { return cond(), "not yet" })
}

// unnamed lists the nodes of Chromium's accessibility tree with one of
// roles and no accessible name: controls a screen reader announces only
// by their role.
func (p *page) unnamed(roles ...string) []string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	tree, err := chromedp.Call(ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		p.t.Fatalf("accessibility tree: %v", err)
	}
	var out []string
	for _, n := range tree.Nodes {
		if n.Ignored || n.Role == nil {
			continue
		}
		role := strings.Trim(string(n.Role.Value), `"`)
		if !slices.Contains(roles, role) {
			continue
		}
		if n.Name == nil || strings.Trim(strings.TrimSpace(string(n.Name.Value)), `"`) == "" {
			desc := ""
			if n.BackendDOMNodeID != 0 {
				html, _ := chromedp.Call(ctx, dom.GetOuterHTML, dom.GetOuterHTMLParams{BackendNodeID: n.BackendDOMNodeID})
				desc = html.OuterHTML
				if len(desc) > 120 {
					desc = desc[:120] + "…"
				}
			}
			out = append(out, fmt.Sprintf("a %s without an accessible name: %s", role, desc))
		}
	}
	return out
}

// description is the accessible description Chromium computes for the
// element sel, as a screen reader announces it after the name.
func (p *page) description(sel string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	nodes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSS(sel)))
	if err != nil || len(nodes) == 0 {
		p.t.Fatalf("find %s: %v", sel, err)
	}
	tree, err := chromedp.Call(ctx, accessibility.GetPartialAXTree, accessibility.GetPartialAXTreeParams{BackendNodeID: nodes[0].BackendNodeID})
	if err != nil || len(tree.Nodes) == 0 {
		p.t.Fatalf("accessibility node of %s: %v", sel, err)
	}
	for _, n := range tree.Nodes {
		if n.BackendDOMNodeID == nodes[0].BackendNodeID && n.Description != nil {
			return strings.Trim(string(n.Description.Value), `"`)
		}
	}
	return ""
}

func (p *page) text(sel string) string {
	p.t.Helper()
	s, _ := p.eval(`document.querySelector(` + strconv.Quote(sel) + `).textContent`).(string)
	return s
}

func (p *page) visible(sel string) bool {
	p.t.Helper()
	v, _ := p.eval(`(() => { const n = document.querySelector(` + strconv.Quote(sel) + `); return !!n && !n.closest('[hidden]') && n.getClientRects().length > 0; })()`).(bool)
	return v
}

func (p *page) waitText(sel, want string) {
	p.t.Helper()
	p.waitJS(sel+" shows "+strconv.Quote(want), `(document.querySelector(`+strconv.Quote(sel)+`)?.textContent || '').includes(`+strconv.Quote(want)+`)`)
}

func (p *page) click(id string) {
	p.t.Helper()
	p.do(chromedp.Click(chromedp.ID(id)))
}

func (p *page) signIn(email, password string) {
	p.t.Helper()
	p.do(chromedp.Navigate(p.b.base+"/"),
		chromedp.WaitVisible(chromedp.ID("email")),
		chromedp.SendKeys(chromedp.ID("email"), email),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.CSS(`#signin-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("scans-view")))
	p.waitText("#who", email)
}

// choose puts a file into the dialog's file input.
func (p *page) choose(path string) {
	p.t.Helper()
	p.do(chromedp.SetUploadFiles(chromedp.ID("import-file"), []string{path}))
}

func (p *page) openImport() {
	p.t.Helper()
	p.do(chromedp.Click(chromedp.ID("import-open")), chromedp.WaitVisible(chromedp.ID("import-dialog")))
}

func (p *page) screenshot(name string) {
	p.t.Helper()
	if os.Getenv("POSTURE_UI_SCREENSHOTS") == "" {
		return
	}
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(testenv.Root(), "docs", "images", "ui-"+name+".png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// writeFile puts content into a file of that name in a temp dir.
func writeFile(t *testing.T, name string, content []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func example(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.Root(), "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hostileReport is the mixed example plus one record whose severity_id is
// markup: invalid, so the job page shows its value.
const hostileValue = `<img src=x onerror=window.pwned=1>`

const hostileTitle = `<img src=x onerror=window.pwned=2>Markup title`

func hostileReport(t *testing.T) []byte {
	t.Helper()
	var records []map[string]any
	if err := json.Unmarshal(example(t, "aws_mixed_7_records.ocsf.json"), &records); err != nil {
		t.Fatal(err)
	}
	var bad map[string]any
	b, _ := json.Marshal(records[0])
	_ = json.Unmarshal(b, &bad)
	bad["severity_id"] = hostileValue
	// And a valid record whose title is markup.
	var titled map[string]any
	_ = json.Unmarshal(b, &titled)
	info := titled["finding_info"].(map[string]any)
	info["uid"] = "hostile-title-finding"
	info["title"] = hostileTitle
	records = append(records, titled)
	// Unescaped, so the markup reaches the server as markup.
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(append(records, bad)); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestWebUI(t *testing.T) {
	big := example(t, "aws_1500_records.ocsf.json")
	// Room for the 1,500-record example, not for the too-large file.
	te := startTenancy(t, tenancyOpts{maxUpload: int64(len(big)) + 1024})
	b := startBrowser(t, te.env.URL)
	admin, viewer, nosub := te.emails["demo-admin"], te.emails["demo-viewer"], te.emails["nosub-admin"]

	t.Run("sign-in keeps the tokens out of reach of script", func(t *testing.T) {
		p := b.page(t)
		p.do(chromedp.Navigate(b.base+"/"), chromedp.WaitVisible(chromedp.ID("signin-view")))
		p.screenshot("sign-in")
		p.signIn(admin, te.pw[admin])
		if !p.visible("#import-open") {
			t.Error("an administrator (manage_ingestions) does not see Import Findings")
		}
		if c, _ := p.eval(`document.cookie`).(string); strings.Contains(c, "posture_session") {
			t.Errorf("page script can read the session cookie: %q", c)
		}
		if s, _ := p.eval(`document.documentElement.outerHTML`).(string); strings.Contains(s, "eyJ") {
			t.Error("a JWT appears in the page")
		}
		// Sign-out ends the session: a reload lands on the sign-in form.
		p.do(chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("signin-view")),
			chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("signin-view")))
	})

	t.Run("wrong password is refused with the reason", func(t *testing.T) {
		p := b.page(t)
		p.do(chromedp.Navigate(b.base+"/"), chromedp.WaitVisible(chromedp.ID("email")),
			chromedp.SendKeys(chromedp.ID("email"), admin), chromedp.SendKeys(chromedp.ID("password"), "wrong"),
			chromedp.Click(chromedp.CSS(`#signin-form button[type=submit]`)))
		p.waitText("#signin-error", "Sign-in failed")
		if p.visible("#scans-view") {
			t.Error("the Scans page shows after a failed sign-in")
		}
	})

	t.Run("viewer does not see Import Findings", func(t *testing.T) {
		p := b.page(t)
		p.signIn(viewer, te.pw[viewer])
		p.waitJS("the scans read", `document.querySelector('#scans-message').textContent !== '' || document.querySelectorAll('#scans-table tbody tr').length > 0`)
		if p.visible("#import-open") {
			t.Error("the viewer role (no manage_ingestions) sees Import Findings")
		}
	})

	t.Run("wrong name and empty file are rejected before any request", func(t *testing.T) {
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.openImport()
		for _, tc := range []struct {
			name    string
			content []byte
			want    string
		}{
			{"report.json", []byte(`[]`), "must end in .ocsf.json"},
			{"report.ocsf.json.txt", []byte(`[]`), "must end in .ocsf.json"},
			{"empty.ocsf.json", nil, "The file is empty"},
		} {
			p.choose(writeFile(t, tc.name, tc.content))
			p.waitText("#import-error", tc.want)
			if v, _ := p.eval(`document.querySelector('#import-start').disabled`).(bool); !v {
				t.Errorf("%s: Start import is enabled", tc.name)
			}
			p.click("import-start") // disabled: must do nothing
		}
		p.screenshot("dialog-rejected-name")
		// The browser reports requests in the order they are sent: once a
		// request made now is seen, an upload sent before it would be too.
		p.eval(`fetch('/api/v1/tenant?marker=rejected', {headers: {'X-Posture-UI': '1'}}) && true`)
		p.waitFor("the marker request", func() bool { return p.sent(http.MethodGet, "/api/v1/tenant?marker=rejected") > 0 })
		if n := p.sent(http.MethodPost, "/api/v1/ingestions"); n != 0 {
			t.Errorf("%d uploads were sent for files rejected in the browser", n)
		}
	})

	t.Run("1,500-record import followed to completed", func(t *testing.T) {
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.openImport()
		p.screenshot("dialog-empty")
		p.choose(writeFile(t, "aws_1500_records.ocsf.json", big))
		p.click("import-start")
		p.waitText("#import-state", "Import completed")
		p.waitText("#import-state", "Import completed: 1500 records, 1500 processed, 0 invalid; 1500 findings stored.")
		for sel, want := range map[string]string{"#count-total": "1500", "#count-processed": "1500", "#count-invalid": "0", "#count-stored": "1500"} {
			if got := p.text(sel); got != want {
				t.Errorf("%s = %q, want %s", sel, got, want)
			}
		}
		p.screenshot("dialog-completed")
		if n := p.sent(http.MethodPost, "/api/v1/ingestions"); n != 1 {
			t.Errorf("%d uploads, want 1", n)
		}
		p.click("import-close")
		p.waitText("#ingestions-table tbody", "completed")
		p.waitText("#scans-table tbody", "aws_1500_records.ocsf.json")
	})

	t.Run("Providers page lists the API's providers and the plan usage", func(t *testing.T) {
		direct := te.as(t, te.key("demo-admin"))
		// This API runs without the billing controller, which is what makes an
		// imported account a Provider; the test makes the one it would, for the
		// imported scan's account, and a connected one whose alias is markup.
		scans := direct.list("/api/v1/scans", "")
		if len(scans.Data) == 0 {
			t.Fatal("no scan after the 1,500-record import")
		}
		ns := "tenant-" + te.tenants["demo"].Name
		typ, uid := scans.Data[0].Attributes["provider_type"].(string), scans.Data[0].Attributes["provider_uid"].(string)
		for _, pr := range []*posturev1.Provider{
			{ObjectMeta: metav1.ObjectMeta{Name: typ + "-" + uid, Namespace: ns}, Spec: posturev1.ProviderSpec{Type: typ, UID: uid, Origin: posturev1.ProviderImported}},
			{ObjectMeta: metav1.ObjectMeta{Name: "gcp-markup", Namespace: ns}, Spec: posturev1.ProviderSpec{Type: "gcp", UID: "markup-project", Alias: hostileValue, Origin: posturev1.ProviderConnected}},
		} {
			if err := te.k8s.Create(context.Background(), pr); err != nil {
				t.Fatal(err)
			}
		}
		var providers listDoc
		eventually(t, 30*time.Second, "the providers listed", func() string {
			providers = direct.list("/api/v1/providers", "sort=type,uid")
			if len(providers.Data) != 2 {
				return fmt.Sprintf("%d providers listed, want 2", len(providers.Data))
			}
			return ""
		})
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.do(chromedp.Click(chromedp.CSS(`#nav a[href="#/providers"]`)), chromedp.WaitVisible(chromedp.ID("providers-view")))
		p.waitJS("the providers listed", fmt.Sprintf(`document.querySelectorAll('#providers-table tbody tr').length === %d`, len(providers.Data)))
		for i, pr := range providers.Data {
			for col, attr := range []string{"type", "uid", "alias", "origin"} {
				want, _ := pr.Attributes[attr].(string)
				if want == "" {
					want = "—"
				}
				if got, _ := p.eval(fmt.Sprintf(`document.querySelectorAll('#providers-table tbody tr')[%d].cells[%d].textContent`, i, col)).(string); got != want {
					t.Errorf("provider %d %s = %q, want the API's %q", i, attr, got, want)
				}
			}
		}
		usage := func() (count, limit int) {
			a := direct.one("/api/v1/tenant", "").Data.Attributes["providers"].(map[string]any)
			return int(a["count"].(float64)), int(a["limit"].(float64))
		}
		count, limit := usage()
		p.waitText("#providers-plan", fmt.Sprintf("%d of %d providers on your plan", count, limit))
		if v, _ := p.eval(`[document.querySelector('#providers-plan-bar').value, document.querySelector('#providers-plan-bar').max].join('/')`).(string); v != fmt.Sprintf("%d/%d", count, limit) {
			t.Errorf("the usage bar shows %s, want %d/%d", v, count, limit)
		}
		p.screenshot("providers")
		if v := p.eval(`document.querySelectorAll('main img').length === 0 && window.pwned === undefined`); v != true {
			t.Error("a provider alias became an element or ran")
		}
		tenant := te.tenants["demo"]
		setLimit := func(n int32) {
			te.update(tenant, func() { tenant.Spec.Subscription.ProviderLimit = n })
		}
		t.Cleanup(func() { setLimit(5) })
		for _, tc := range []struct {
			limit      int32
			plan, note string
			atLimit    bool
		}{
			{int32(count), fmt.Sprintf("%d of %d providers on your plan", count, count), "The limit is reached", true},
			{0, fmt.Sprintf("%d provider", count), "does not limit", false},
		} {
			setLimit(tc.limit)
			p.do(chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("providers-view")))
			p.waitText("#providers-plan-note", tc.note)
			if got := p.text("#providers-plan"); !strings.HasPrefix(got, tc.plan) {
				t.Errorf("limit %d: usage reads %q, want %q", tc.limit, got, tc.plan)
			}
			if got := p.eval(`document.querySelector('#providers-view').classList.contains('at-limit')`); got != tc.atLimit {
				t.Errorf("limit %d: marked as at the limit = %v, want %v", tc.limit, got, tc.atLimit)
			}
			if tc.atLimit {
				p.screenshot("providers-at-limit")
			}
			if got := p.visible("#providers-plan-bar"); got != (tc.limit > 0) {
				t.Errorf("limit %d: usage bar shown = %v", tc.limit, got)
			}
		}
	})

	t.Run("invalid records and an HTML file name are shown as inert text", func(t *testing.T) {
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.openImport()
		name := `<img src=x onerror="window.pwned=1">.ocsf.json`
		p.choose(writeFile(t, name, hostileReport(t)))
		if got := p.text("#import-file-name"); got != name {
			t.Errorf("file name shown as %q, want the name as text %q", got, name)
		}
		p.click("import-start")
		p.waitText("#import-state", "Import completed")
		if got := p.text("#count-invalid"); got != "5" {
			t.Errorf("invalid = %q, want 5 (the example's 4 and the markup severity)", got)
		}
		p.do(chromedp.Click(chromedp.CSS("#import-errors-link a")), chromedp.WaitVisible(chromedp.ID("ingestion-view")))
		for _, want := range []string{"unsupported_class", "missing_field", "invalid_type", "missing_account", "/severity_id", hostileValue} {
			p.waitText("#ingestion-errors tbody", want)
		}
		p.screenshot("ingestion")
		if v := p.eval(`document.querySelectorAll('main img, dialog img').length === 0 && window.pwned === undefined`); v != true {
			t.Error("markup from a file name or a record became an element or ran")
		}
	})

	t.Run("Findings filters, and a markup title shown as text", func(t *testing.T) {
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		// The history: every import so far, the 1,500 findings among them.
		p.do(chromedp.Navigate(b.base+"/#/findings?view=history"), chromedp.WaitVisible(chromedp.ID("findings-view")))
		direct := te.as(t, te.key("demo-admin"))
		// The overview's counts are the API's: failing findings by
		// severity, and every status.
		for filter, values := range map[string][]string{"severity": {"critical", "high", "medium", "low", "informational"}, "status_code": {"FAIL", "PASS", "MANUAL"}} {
			chart := map[string]string{"severity": "#by-severity", "status_code": "#by-status"}[filter]
			for _, v := range values {
				kv := []string{"filter[" + filter + "]", v}
				if filter == "severity" {
					kv = append(kv, "filter[status_code]", "FAIL")
				}
				want := direct.list("/api/v1/findings", queryOf(kv...)).Meta.Pagination.Count
				p.waitText(chart+" [data-value="+v+"] .bar-count", strconv.Itoa(want))
				if got := p.text(chart + " [data-value=" + v + "] .bar-count"); got != strconv.Itoa(want) {
					t.Errorf("overview: %s %s = %s, want %d", filter, v, got, want)
				}
			}
		}
		// By provider: every group the API counts, with its count.
		r := direct.get("/api/v1/findings/counts", "group_by=provider_type,provider_uid")
		var counts struct {
			Data []struct {
				Attributes struct {
					Type  string `json:"provider_type"`
					UID   string `json:"provider_uid"`
					Count int    `json:"count"`
				} `json:"attributes"`
			} `json:"data"`
		}
		decode(t, r, &counts)
		if len(counts.Data) == 0 {
			t.Fatal("the API counts no findings by provider: the test would prove nothing")
		}
		p.waitJS("a bar per provider", fmt.Sprintf(`document.querySelectorAll('#by-provider .bar-row').length === %d`, len(counts.Data)))
		for _, g := range counts.Data {
			a := g.Attributes
			got, _ := p.eval(fmt.Sprintf(`(() => { const r = [...document.querySelectorAll('#by-provider .bar-row')].find(r => r.dataset.value === %q);
				return r ? r.querySelector('.bar-label').textContent + '=' + r.querySelector('.bar-count').textContent : 'no bar' })()`, a.Type+" "+a.UID)).(string)
			if want := fmt.Sprintf("%s %s=%d", a.Type, a.UID, a.Count); got != want {
				t.Errorf("overview by provider: %s, want the API's %s", got, want)
			}
		}
		p.waitText("#providers-usage", "of 5 providers on your plan")
		// A search is counted to the end of the next page: one that matches
		// more (the 1,500 imported findings) shows a lower bound.
		for _, tc := range []struct {
			severity, status, search string
			lowerBound               bool
		}{
			{"critical", "FAIL", "", false},
			{"", "PASS", "", false},
			{"", "", "prowler-aws", true},
			{"", "", "onerror", false}, // last: the table then lists the markup title
		} {
			// The page's size is the UI's, which the search's count depends on.
			kv := []string{"page[size]", "20"}
			for k, v := range map[string]string{"filter[severity]": tc.severity, "filter[status_code]": tc.status, "filter[search]": tc.search} {
				if v != "" {
					kv = append(kv, k, v)
				}
			}
			pg := direct.list("/api/v1/findings", queryOf(kv...)).Meta.Pagination
			if pg.Count == 0 || pg.CountEstimated != tc.lowerBound {
				t.Fatalf("%d findings match %+v, count_estimated %v: the test would prove nothing", pg.Count, tc, pg.CountEstimated)
			}
			message := fmt.Sprintf("%d finding", pg.Count) + map[bool]string{true: "", false: "s"}[pg.Count == 1]
			pages := fmt.Sprintf("Page 1 of %d", pg.Pages)
			if pg.CountEstimated {
				message = fmt.Sprintf("more than %d findings", pg.Count-1)
				pages = fmt.Sprintf("Page 1 of at least %d", pg.Pages)
			}
			p.eval(fmt.Sprintf(`(() => { const f = document.querySelector('#findings-filters').elements;
				f.severity.value = %q; f.status_code.value = %q; f.search.value = %q; return true })()`, tc.severity, tc.status, tc.search))
			p.click("findings-apply")
			p.waitJS(fmt.Sprintf("%q for %+v", message, tc), fmt.Sprintf(`document.querySelector('#findings-message').textContent === %q`, message))
			if got := p.text("#findings-pager span"); got != pages {
				t.Errorf("pager for %+v: %q, want %q", tc, got, pages)
			}
			rows := fmt.Sprintf(`[...document.querySelectorAll('#findings-table tbody tr')].every(r => (%q === '' || r.cells[0].textContent === %q) && (%q === '' || r.cells[1].textContent === %q))`,
				tc.severity, tc.severity, tc.status, tc.status)
			if v := p.eval(rows); v != true {
				t.Errorf("a listed finding does not match %+v", tc)
			}
		}
		if got := p.text("#findings-table tbody a"); got != hostileTitle {
			t.Errorf("the markup title is shown as %q, want the literal text %q", got, hostileTitle)
		}
		p.do(chromedp.Click(chromedp.CSS("#findings-table tbody a")), chromedp.WaitVisible(chromedp.ID("finding-view")))
		p.waitText("#finding-record", "hostile-title-finding")
		p.screenshot("finding")
		if got := p.text("#finding-title"); got != hostileTitle {
			t.Errorf("the finding page's title is %q, want %q", got, hostileTitle)
		}
		if v := p.eval(`document.querySelectorAll('main img').length === 0 && window.pwned === undefined`); v != true {
			t.Error("a finding title became an element or ran")
		}
	})

	t.Run("Scans page: each scan's report, uploader, time and failures, and a link to its findings", func(t *testing.T) {
		direct := te.as(t, te.key("demo-admin"))
		scans := direct.list("/api/v1/scans", "page[size]=10")
		if len(scans.Data) < 2 {
			t.Fatalf("%d scans: run the import subtests first", len(scans.Data))
		}
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.waitJS("the scans listed", fmt.Sprintf(`document.querySelectorAll('#scans-table tbody tr').length === %d`, len(scans.Data)))
		failing := false
		for i, sc := range scans.Data {
			a := sc.Attributes
			row := fmt.Sprintf(`document.querySelectorAll('#scans-table tbody tr')[%d]`, i)
			scanned, _ := p.eval(fmt.Sprintf(`new Date(%q).toLocaleString()`, a["scanned_at"])).(string)
			want := map[int]string{0: scanned, 1: a["provider_type"].(string), 2: a["provider_uid"].(string), 3: a["file_name"].(string),
				4: a["uploaded_by"].(string), 6: strconv.Itoa(int(a["finding_count"].(float64)))}
			// The failures: their number, then by severity, most severe first.
			fails := int(a["fail_count"].(float64))
			want[5] = strconv.Itoa(fails)
			if fails > 0 {
				failing = true
				var parts []string
				for _, sev := range []string{"fatal", "critical", "high", "medium", "low", "informational", "unknown", "other"} {
					if n, ok := a["fail_counts"].(map[string]any)[sev]; ok {
						parts = append(parts, fmt.Sprintf("%d\u00a0%s", int(n.(float64)), sev))
					}
				}
				want[5] += " (" + strings.Join(parts, ", ") + ")"
			}
			for col, w := range want {
				if got, _ := p.eval(fmt.Sprintf(`%s.cells[%d].textContent`, row, col)).(string); got != w {
					t.Errorf("scan %s column %d: %q, want the API's %q", sc.ID, col, got, w)
				}
			}
		}
		if !failing {
			t.Error("no scan failed a check: the failures column proves nothing")
		}
		// Every report here was uploaded: no row says how it came.
		if n, _ := p.eval(`document.querySelectorAll('#scans-table .badge').length`).(float64); n != 0 {
			t.Errorf("%v rows carry a source badge, though every report was an upload", n)
		}
		// Every column in view at 1280 px: the long values wrap.
		if got, _ := p.eval(`(() => { const w = document.querySelector('#scans-table').closest('.table-wrap'); return w.scrollWidth + '/' + w.clientWidth })()`).(string); func() bool {
			var sw, cw int
			_, err := fmt.Sscanf(got, "%d/%d", &sw, &cw)
			return err != nil || sw > cw
		}() {
			t.Errorf("the scans table scrolls sideways at 1280 px (%s)", got)
		}
		p.screenshot("scans")
		// A scan's findings are a click away, filtered to it.
		sc := scans.Data[0]
		count := direct.list("/api/v1/findings", queryOf("filter[scan]", sc.ID)).Meta.Pagination.Count
		p.do(chromedp.Click(chromedp.CSS(`#scans-table tbody tr:first-child td:nth-child(7) a`)), chromedp.WaitVisible(chromedp.ID("findings-view")))
		p.waitJS("the scan's findings", fmt.Sprintf(`document.querySelector('#findings-message').textContent === %q`,
			fmt.Sprintf("%d finding", count)+map[bool]string{true: "", false: "s"}[count == 1]))
		if got, _ := p.eval(`document.querySelector('#findings-filters').elements.scan.value`).(string); got != sc.ID {
			t.Errorf("the Findings page's scan filter holds %q, want %q", got, sc.ID)
		}
	})

	t.Run("a status filter that matches no ingestion says so", func(t *testing.T) {
		direct := te.as(t, te.key("demo-admin"))
		if all := direct.list("/api/v1/ingestions", "").Meta.Pagination.Count; all == 0 {
			t.Fatal("no ingestion: the test would prove nothing")
		}
		if n := direct.list("/api/v1/ingestions", "filter[status]=pending").Meta.Pagination.Count; n != 0 {
			t.Fatalf("%d pending ingestions: the test needs none", n)
		}
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.waitJS("the ingestions listed", `document.querySelectorAll('#ingestions-table tbody tr').length > 0`)
		p.do(chromedp.SetValue(chromedp.ID("ingestions-status"), "pending"))
		p.eval(`document.querySelector('#ingestions-status').dispatchEvent(new Event('change')), true`)
		p.waitText("#ingestions-message", "No ingestion is pending; choose All to see every ingestion.")
		if strings.Contains(p.text("#ingestions-message"), "yet") {
			t.Errorf("the filtered list says %q, as if there were no ingestions at all", p.text("#ingestions-message"))
		}
	})

	t.Run("rejected records are laid out at 1280 and 390 px", func(t *testing.T) {
		var records []map[string]any
		if err := json.Unmarshal(example(t, "aws_mixed_7_records.ocsf.json"), &records); err != nil {
			t.Fatal(err)
		}
		// Beside the example's rejected records (unsupported_class and the
		// other codes), one with a long finding uid and a long unbroken value.
		raw, _ := json.Marshal(records[0])
		var long map[string]any
		_ = json.Unmarshal(raw, &long)
		long["finding_info"].(map[string]any)["uid"] = strings.Repeat("prowler-aws-s3_bucket_policy-123456789012-", 6)
		long["severity_id"] = strings.Repeat("x", 140)
		content, _ := json.Marshal(append(records, long))
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.openImport()
		p.choose(writeFile(t, "layout.ocsf.json", content))
		p.click("import-start")
		p.waitText("#import-state", "Import completed")
		p.do(chromedp.Click(chromedp.CSS("#import-errors-link a")), chromedp.WaitVisible(chromedp.ID("ingestion-view")))
		p.waitText("#ingestion-errors tbody", "xxxxxxxxxx")
		for _, size := range []struct{ w, h int64 }{{1280, 800}, {390, 844}} {
			p.do(chromedp.EmulateViewport(size.w, size.h))
			p.waitJS("laid out", `document.querySelector('#ingestion-errors').getBoundingClientRect().width <= window.innerWidth`)
			got, _ := p.eval(`(() => {
				const wrap = document.querySelector('#ingestion-view .table-wrap');
				const right = wrap.getBoundingClientRect().right + 0.5;
				const out = [];
				if (wrap.scrollWidth > wrap.clientWidth) out.push('the table scrolls sideways: ' + wrap.scrollWidth + ' in ' + wrap.clientWidth);
				for (const td of document.querySelectorAll('#ingestion-errors tbody td')) {
					const r = document.createRange();
					r.selectNodeContents(td);
					const lines = new Set([...r.getClientRects()].map((q) => Math.round(q.top))).size;
					if (td.classList.contains('err-code') && lines > 1) out.push('code ' + td.textContent + ' on ' + lines + ' lines');
					if (r.getBoundingClientRect().right > right) out.push(td.dataset.label + ' ' + td.textContent.slice(0, 20) + ' runs off the table');
				}
				return out.join('; ');
			})()`).(string)
			if got != "" {
				t.Errorf("at %d px: %s", size.w, got)
			}
			if size.w == 390 {
				p.screenshot("ingestion-390")
			} else {
				p.screenshot("ingestion")
			}
		}
	})

	t.Run("no page scrolls sideways at 390 or 1280 px", func(t *testing.T) {
		direct := te.as(t, te.key("demo-admin"))
		// The pages with the longest unbroken values: the job that rejected
		// records, and a finding, whose resource UID is an ARN.
		jobs := direct.list("/api/v1/ingestions", "sort=-requested_at")
		jobID := ""
		for _, j := range jobs.Data {
			if s, _ := j.Attributes["summary"].(map[string]any); s != nil && s["invalid"].(float64) > 0 {
				jobID = j.ID
				break
			}
		}
		findings := direct.list("/api/v1/findings", "page[size]=1")
		if jobID == "" || len(findings.Data) == 0 {
			t.Fatal("no job with rejected records or no finding: run the import subtests first")
		}
		findingID := findings.Data[0].ID
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		pages := []struct {
			name, hash, ready string
			dialog            bool
		}{
			{"scans", "#/scans", `#ingestions-table tbody tr`, false},
			{"dialog", "#/scans", `#ingestions-table tbody tr`, true},
			{"findings", "#/findings", `#by-provider .bar-row`, false},
			{"providers", "#/providers", `#providers-table tbody tr`, false},
			{"ingestion", "#/ingestions/" + jobID, `#ingestion-errors tbody tr`, false},
			{"finding", "#/findings/" + findingID, `#finding-summary dd`, false},
		}
		for _, size := range []struct{ w, h int64 }{{390, 844}, {1280, 800}} {
			p.do(chromedp.EmulateViewport(size.w, size.h))
			for _, pg := range pages {
				p.do(chromedp.Navigate(b.base + "/" + pg.hash))
				p.waitJS(pg.name+" loaded", `!!document.querySelector(`+strconv.Quote(pg.ready)+`)`)
				if pg.dialog {
					p.openImport()
					// The longest thing the dialog shows: a long file name
					// rejected with its reason.
					p.choose(writeFile(t, strings.Repeat("a-very-long-report-name-", 6)+"json", []byte(`[]`)))
					p.waitText("#import-error", "must end in .ocsf.json")
				}
				got, _ := p.eval(`document.documentElement.scrollWidth + '/' + window.innerWidth`).(string)
				var sw, iw int
				if _, err := fmt.Sscanf(got, "%d/%d", &sw, &iw); err != nil {
					t.Fatalf("read the widths %q: %v", got, err)
				}
				if iw != int(size.w) || sw > iw {
					wide, _ := p.eval(`[...document.querySelectorAll('body *')].filter(n => n.getBoundingClientRect().right > window.innerWidth + 0.5 && !n.closest('.table-wrap')).slice(0, 5).map(n => n.tagName + (n.id ? '#' + n.id : '') + '.' + n.className).join(', ')`).(string)
					t.Errorf("%s at %d px: the page is %d px wide in a %d px window (too wide: %s)", pg.name, size.w, sw, iw, wide)
				}
				if pg.dialog {
					// The dialog clips what is wider than itself rather than
					// widening the page: check its own width too.
					if got, _ := p.eval(`(() => { const d = document.querySelector('#import-dialog'); return d.scrollWidth + '/' + d.clientWidth })()`).(string); func() bool {
						var sw, cw int
						_, err := fmt.Sscanf(got, "%d/%d", &sw, &cw)
						return err != nil || sw > cw
					}() {
						t.Errorf("dialog at %d px: its content is wider than the dialog (%s)", size.w, got)
					}
				}
				if size.w == 390 {
					p.screenshot(pg.name + "-390")
				}
				if pg.dialog {
					p.do(chromedp.KeyEvent("\x1b"))
					p.waitJS("the dialog closed", `!document.querySelector('#import-dialog').open`)
				}
			}
		}
	})

	t.Run("keyboard: the dialog opens with Enter, keeps Tab inside and Escape returns focus", func(t *testing.T) {
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.eval(`document.querySelector('#import-open').focus(), true`)
		p.do(chromedp.KeyEvent("\r"))
		p.waitJS("the dialog open", `document.querySelector('#import-dialog').open`)
		// A chosen file enables Start import, so every control is in the cycle.
		p.choose(writeFile(t, "keyboard.ocsf.json", example(t, "aws_mixed_7_records.ocsf.json")))
		p.waitJS("Start import enabled", `!document.querySelector('#import-start').disabled`)
		inside := `(() => { const a = document.activeElement; return a && a !== document.body && document.querySelector('#import-dialog').contains(a) ? (a.id || a.tagName) : 'outside: ' + (a ? a.tagName + '#' + a.id : 'none'); })()`
		for _, dir := range []struct {
			name string
			mods []chromedp.KeyOption
		}{
			{"Tab", nil},
			{"Shift+Tab", []chromedp.KeyOption{chromedp.KeyModifiers(chromedp.ModifierShift)}},
		} {
			seen := map[string]bool{}
			// More presses than the dialog has controls: focus must come round.
			for i := range 12 {
				p.do(chromedp.KeyEvent(kb.Tab, dir.mods...))
				at, _ := p.eval(inside).(string)
				if strings.HasPrefix(at, "outside") {
					t.Fatalf("%s press %d: focus left the dialog (%s)", dir.name, i+1, at)
				}
				seen[at] = true
			}
			for _, id := range []string{"import-file", "import-start", "import-close"} {
				if !seen[id] {
					t.Errorf("%s never reached #%s (reached %v)", dir.name, id, seen)
				}
			}
		}
		p.do(chromedp.KeyEvent(kb.Escape))
		p.waitJS("the dialog closed", `!document.querySelector('#import-dialog').open`)
		if at, _ := p.eval(`document.activeElement.id`).(string); at != "import-open" {
			t.Errorf("after Escape focus is on %q, want the Import Findings button", at)
		}
	})

	t.Run("closing the dialog does not cancel; a notification follows", func(t *testing.T) {
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.openImport()
		p.choose(writeFile(t, "background.ocsf.json", big))
		p.do(chromedp.Click(chromedp.ID("import-start")), chromedp.KeyEvent("\x1b"))
		p.waitJS("the dialog closed", `!document.querySelector('#import-dialog').open`)
		p.waitText("#toasts", "Import of background.ocsf.json completed: 1500 processed, 0 invalid")
		p.screenshot("notification")
	})

	t.Run("a dropped file is imported, with the upload's progress shown to the end", func(t *testing.T) {
		mixed := example(t, "aws_mixed_7_records.ocsf.json")
		for _, tc := range []struct {
			name    string
			target  string   // where the file is dropped
			files   []string // names; each holds content
			content []byte
			error   string // refused in the browser with this, or "" to import
			state   string
		}{
			{"on the drop zone", "#drop", []string{"dropped.ocsf.json"}, big, "", "Import completed: 1500 records, 1500 processed, 0 invalid"},
			{"elsewhere on the dialog", "#import-title", []string{"dropped-title.ocsf.json"}, mixed, "", "Import completed: 7 records, 7 processed, 4 invalid"},
			{"two files", "#drop", []string{"a.ocsf.json", "b.ocsf.json"}, mixed, "one file per import", ""},
			{"a wrong name", "#drop", []string{"dropped.json"}, mixed, "must end in .ocsf.json", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := b.page(t)
				p.signIn(admin, te.pw[admin])
				p.openImport()
				content, _ := json.Marshal(string(tc.content))
				names, _ := json.Marshal(tc.files)
				p.eval(fmt.Sprintf(`(() => { const dt = new DataTransfer();
					for (const name of %s) dt.items.add(new File([%s], name, { type: 'application/json' }));
					const target = document.querySelector(%q);
					target.dispatchEvent(new DragEvent('dragover', { bubbles: true, cancelable: true, dataTransfer: dt }));
					return target.dispatchEvent(new DragEvent('drop', { bubbles: true, cancelable: true, dataTransfer: dt })) })()`, names, content, tc.target))
				if tc.error != "" {
					p.waitText("#import-error", tc.error)
					if v, _ := p.eval(`document.querySelector('#import-start').disabled`).(bool); !v {
						t.Error("Start import is enabled after a refused drop")
					}
					if n := p.sent(http.MethodPost, "/api/v1/ingestions"); n != 0 {
						t.Errorf("%d uploads for a drop refused in the browser", n)
					}
					return
				}
				if got := p.text("#import-file-name"); got != tc.files[0] {
					t.Fatalf("the dialog shows %q after the drop, want the dropped file %q (error: %q)", got, tc.files[0], p.text("#import-error"))
				}
				p.click("import-start")
				p.waitText("#import-state", tc.state)
				if n := p.sent(http.MethodPost, "/api/v1/ingestions"); n != 1 {
					t.Errorf("%d uploads, want 1", n)
				}
				// The upload's bar, apart from the job's, stays full once the
				// whole request was sent: at least the file's size.
				if !p.visible("#upload-progress") {
					t.Error("no upload progress bar is shown")
				}
				got, _ := p.eval(`[document.querySelector('#upload-progress').value, document.querySelector('#upload-progress').max].join('/')`).(string)
				var value, max int
				if _, err := fmt.Sscanf(got, "%d/%d", &value, &max); err != nil || value != max || max < len(tc.content) {
					t.Errorf("the upload's progress bar is at %s, want full at the request's size (at least the file's %d bytes)", got, len(tc.content))
				}
				if tc.target == "#drop" {
					p.screenshot("dialog-dropped")
				}
			})
		}
	})

	t.Run("Retry import after a rejection sends the same file again", func(t *testing.T) {
		tooBig := append(append([]byte{}, big[:len(big)-1]...), bytes.Repeat([]byte(" "), 2<<20)...)
		tooBig = append(tooBig, ']')
		for _, tc := range []struct {
			name, email string
			content     []byte
			want        string
		}{
			{"413", admin, tooBig, "larger than the server accepts"},
			{"402", nosub, example(t, "aws_mixed_7_records.ocsf.json"), "no active subscription"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				p := b.page(t)
				if tc.name == "402" {
					// Without a subscription Import Findings is not offered:
					// the dialog meets a 402 when the subscription ends while
					// the page is open.
					lapse := subscription(t, te, "nosub")
					lapse(true)
					p.signIn(tc.email, te.pw[tc.email])
					p.waitJS("Import Findings offered", `!document.querySelector('#import-open').disabled`)
					lapse(false)
				} else {
					p.signIn(tc.email, te.pw[tc.email])
				}
				p.openImport()
				p.choose(writeFile(t, "report-"+tc.name+".ocsf.json", tc.content))
				p.click("import-start")
				p.waitText("#import-error", tc.want)
				if !p.visible("#import-retry") || !p.visible("#import-other") {
					t.Fatal("a rejected upload offers no Retry import or Choose another file")
				}
				p.screenshot("dialog-rejected-" + tc.name)
				p.click("import-retry")
				p.waitFor("the retried upload", func() bool { return p.sent(http.MethodPost, "/api/v1/ingestions") >= 2 })
				if n := p.sent(http.MethodPost, "/api/v1/ingestions"); n != 2 {
					t.Fatalf("%d uploads after Retry import, want 2", n)
				}
				p.waitText("#import-error", tc.want)
				if tc.name == "413" {
					// A different, smaller file goes through.
					p.click("import-other")
					p.choose(writeFile(t, "smaller.ocsf.json", example(t, "aws_mixed_7_records.ocsf.json")))
					p.click("import-start")
					p.waitText("#import-state", "Import completed: 7 records, 7 processed, 4 invalid")
				}
			})
		}
	})

	t.Run("Retry status resumes the same job without uploading again", func(t *testing.T) {
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.openImport()
		p.choose(writeFile(t, "status.ocsf.json", example(t, "aws_mixed_7_records.ocsf.json")))
		p.failStatus.Store(true)
		p.click("import-start")
		p.waitText("#import-error", "Status check failed")
		if !p.visible("#import-retry-status") || p.visible("#import-retry") {
			t.Fatal("after a failed status check the dialog must offer Retry status, not Retry import")
		}
		p.screenshot("dialog-status-failed")
		p.failStatus.Store(false)
		p.click("import-retry-status")
		p.waitText("#import-state", "Import completed: 7 records, 7 processed, 4 invalid")
		if n := p.sent(http.MethodPost, "/api/v1/ingestions"); n != 1 {
			t.Errorf("%d uploads, want 1: Retry status must not upload again", n)
		}
	})

	t.Run("the file cannot be changed while its import is followed", func(t *testing.T) {
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.openImport()
		p.choose(writeFile(t, "first.ocsf.json", example(t, "aws_mixed_7_records.ocsf.json")))
		p.holdStatus.Store(true)
		defer p.holdStatus.Store(false)
		p.click("import-start")
		// The upload was accepted and the first status check is on its way.
		p.waitFor("the first status check", func() bool { return p.sentPrefix(http.MethodGet, "/api/v1/ingestions/") })
		if v, _ := p.eval(`document.querySelector('#import-file').disabled`).(bool); !v {
			t.Error("the file input is enabled while the import is followed")
		}
		// Whatever reaches the input meanwhile is not taken for the import.
		p.choose(writeFile(t, "second.ocsf.json", example(t, "aws_mixed_7_records.ocsf.json")))
		if got := p.text("#import-file-name"); got != "first.ocsf.json" {
			t.Errorf("the dialog shows %q while first.ocsf.json is imported", got)
		}
		if p.visible("#import-start") {
			t.Error("Start import is offered while an import is followed")
		}
		p.do(chromedp.KeyEvent("\x1b"))
		p.waitJS("the dialog closed", `!document.querySelector('#import-dialog').open`)
		p.holdStatus.Store(false)
		p.waitText("#toasts", "Import of first.ocsf.json completed: 7 processed, 4 invalid")
		if n := p.sent(http.MethodPost, "/api/v1/ingestions"); n != 1 {
			t.Errorf("%d uploads, want 1", n)
		}
	})

	t.Run("a job or finding that cannot be read shows nothing of the one before", func(t *testing.T) {
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.openImport()
		p.choose(writeFile(t, "before.ocsf.json", example(t, "aws_mixed_7_records.ocsf.json")))
		p.click("import-start")
		p.waitText("#import-state", "Import completed: 7 records, 7 processed, 4 invalid")
		p.do(chromedp.Click(chromedp.CSS(`#import-errors-link a`)))
		p.waitJS("the job's rejected records", `document.querySelectorAll('#ingestion-errors tbody tr').length > 0`)
		p.eval(`location.hash = '#/ingestions/00000000-0000-0000-0000-000000000000'`)
		p.waitText("#ingestion-summary", "Could not read the ingestion")
		if n, _ := p.eval(`document.querySelectorAll('#ingestion-errors tbody tr').length`).(float64); n != 0 {
			t.Errorf("a job that cannot be read lists %v rejected records of the job shown before", n)
		}
		if got := p.text("#ingestion-errors-message"); got != "" {
			t.Errorf("a job that cannot be read says %q about its rejected records", got)
		}
		p.eval(`location.hash = '#/findings'`)
		p.waitJS("findings listed", `!!document.querySelector('#findings-table tbody a')`)
		p.do(chromedp.Click(chromedp.CSS(`#findings-table tbody a`)))
		p.waitJS("a finding shown", `document.querySelectorAll('#finding-summary dd').length > 0`)
		p.eval(`location.hash = '#/findings/no-such-finding'`)
		p.waitText("#finding-title", "Could not read the finding")
		if got := p.text("#finding-summary"); got != "" {
			t.Errorf("a finding that cannot be read shows the one before's summary: %q", got)
		}
	})

	// A job page polls while its job runs and the tab is visible; a tab
	// shown again reads the job at once (the poll that found it hidden
	// stopped), so the page does not stay on a stale state.
	t.Run("a job page reads its job again when the tab is shown", func(t *testing.T) {
		jobs := te.as(t, te.key("demo-admin")).list("/api/v1/ingestions", "")
		if len(jobs.Data) == 0 {
			t.Fatal("no ingestion to show")
		}
		id := jobs.Data[0].ID
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.eval(`location.hash = '#/ingestions/` + id + `'`)
		p.waitJS("the job shown", `document.querySelectorAll('#ingestion-summary dd').length > 0`)
		before := p.sent(http.MethodGet, "/api/v1/ingestions/"+id)
		p.eval(`Object.defineProperty(document, 'hidden', {value: false, configurable: true});
			Object.defineProperty(document, 'visibilityState', {value: 'visible', configurable: true});
			document.dispatchEvent(new Event('visibilitychange'))`)
		eventually(t, 10*time.Second, "the job read again", func() string {
			if n := p.sent(http.MethodGet, "/api/v1/ingestions/"+id); n <= before {
				return fmt.Sprintf("%d reads of the job, as before the tab was shown", n)
			}
			return ""
		})
	})

	t.Run("a viewer's scans name their jobs without linking to pages it may not open", func(t *testing.T) {
		p := b.page(t)
		p.signIn(viewer, te.pw[viewer])
		p.waitJS("the scans listed", `document.querySelectorAll('#scans-table tbody tr').length > 0`)
		if n, _ := p.eval(`document.querySelectorAll('#scans-table tbody a[href^="#/ingestions/"]').length`).(float64); n != 0 {
			t.Errorf("the viewer's scans link %v job pages, which answer it 403", n)
		}
		if named, _ := p.eval(`[...document.querySelectorAll('#scans-table tbody tr')].every(tr => tr.querySelector('td.ingestion').textContent !== '' && tr.querySelector('td.ingestion').firstElementChild.title !== '')`).(bool); !named {
			t.Error("the viewer's scans do not name their jobs")
		}
		p = b.page(t)
		p.signIn(admin, te.pw[admin])
		p.waitJS("the admin's scans link their jobs", `document.querySelectorAll('#scans-table tbody a[href^="#/ingestions/"]').length > 0`)
	})

	t.Run("a viewer sees only what its role allows", func(t *testing.T) {
		jobs := te.as(t, te.key("demo-admin")).list("/api/v1/ingestions", "")
		if len(jobs.Data) == 0 {
			t.Fatal("no ingestion to try")
		}
		p := b.page(t)
		p.signIn(viewer, te.pw[viewer])
		p.waitJS("the scans listed", `document.querySelectorAll('#scans-table tbody tr').length > 0`)
		for _, sel := range []string{"#ingestions-status", "#ingestions-table", "#ingestions-pager", "#import-open"} {
			if p.visible(sel) {
				t.Errorf("the viewer sees %s, which it cannot use", sel)
			}
		}
		p.eval(`location.hash = '#/ingestions/` + jobs.Data[0].ID + `'`)
		p.waitJS("the ingestion page", `!document.querySelector('#ingestion-view').hidden`)
		if !p.visible("#ingestion-denied") || p.visible("#ingestion-errors") || p.visible("#errors-pager") {
			t.Error("a viewer's ingestion page shows its tables rather than the one line saying why not")
		}
		// The page names the job, and a job's uuid may hold "403" (it
		// once held "4035"): only the rest of the text is looked at.
		got, _ := p.eval(`document.querySelector('main').innerText`).(string)
		if rest := strings.ReplaceAll(got, jobs.Data[0].ID, ""); strings.Contains(rest, "Could not") || strings.Contains(rest, "403") {
			t.Errorf("the viewer's pages show an error: %q", got)
		}
		if p.sentPrefix(http.MethodGet, "/api/v1/ingestions") {
			t.Error("the viewer's pages asked for ingestions, which answer it 403")
		}
	})

	t.Run("a tenant without a subscription sees one banner, and Import Findings with its reason", func(t *testing.T) {
		p := b.page(t)
		p.signIn(nosub, te.pw[nosub])
		p.waitText("#subscription-banner", "has no active subscription")
		for _, hash := range []string{"#/scans", "#/findings", "#/providers"} {
			p.eval(`location.hash = '` + hash + `'`)
			p.waitJS(hash+" shown", `!document.querySelector('#`+strings.TrimPrefix(hash, "#/")+`-view').hidden`)
			if !p.visible("#subscription-banner") {
				t.Errorf("%s: no banner", hash)
			}
			// The banner says it once: nothing else on the page repeats it,
			// nor shows what a plan would allow.
			text, _ := p.eval(`document.querySelector('main').innerText`).(string)
			for _, bad := range []string{"402", "Could not", "no limit on your plan", "providers (", "Previous"} {
				if strings.Contains(text, bad) {
					t.Errorf("%s shows %q: %q", hash, bad, text)
				}
			}
			if n := strings.Count(text, "subscription"); n != 1+map[bool]int{true: 1, false: 0}[hash == "#/scans"] {
				t.Errorf("%s says subscription %d times: %q", hash, n, text)
			}
		}
		p.eval(`location.hash = '#/scans'`)
		p.waitJS("the Scans page", `!document.querySelector('#scans-view').hidden`)
		if !p.visible("#import-open") {
			t.Fatal("Import Findings is not shown to an administrator without a subscription")
		}
		if v, _ := p.eval(`document.querySelector('#import-open').disabled`).(bool); !v {
			t.Error("Import Findings is offered though it would be refused")
		}
		if got := p.description("#import-open"); got != "Importing needs an active subscription." {
			t.Errorf("Import Findings is described as %q, want its reason", got)
		}
		p.screenshot("no-subscription")
		for _, path := range []string{"/api/v1/scans", "/api/v1/findings", "/api/v1/providers", "/api/v1/ingestions"} {
			if p.sentPrefix(http.MethodGet, path) {
				t.Errorf("the pages asked for %s, which answers 402", path)
			}
		}
	})

	// Every control, link and progress bar the pages show has a name a
	// screen reader can announce, as Chromium's accessibility tree computes it.
	t.Run("every control and progress bar has an accessible name", func(t *testing.T) {
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		views := []struct{ hash, ready string }{
			{"#/scans", `document.querySelectorAll('#ingestions-table tbody tr').length > 0`},
			{"#/findings", `document.querySelectorAll('#findings-table tbody tr').length > 0 && !document.querySelector('#providers-bar').hidden`},
			{"#/providers", `!document.querySelector('#providers-plan-bar').hidden`},
		}
		for _, v := range views {
			p.eval(`location.hash = '` + v.hash + `'`)
			p.waitJS(v.hash+" loaded", v.ready)
			for _, n := range p.unnamed("button", "link", "textbox", "searchbox", "combobox", "checkbox", "radio", "radiogroup", "progressbar", "spinbutton") {
				t.Errorf("%s: %s", v.hash, n)
			}
		}
		p.eval(`location.hash = '#/scans'`)
		p.openImport()
		for _, n := range p.unnamed("button", "textbox", "progressbar") {
			t.Errorf("Import Findings: %s", n)
		}
	})

	t.Run("the overview counts severities and status codes beyond the usual ones", func(t *testing.T) {
		var records []map[string]any
		if err := json.Unmarshal(example(t, "aws_mixed_7_records.ocsf.json"), &records); err != nil {
			t.Fatal(err)
		}
		// OCSF's fatal (6) and a Prowler MUTED status: valid, and counted by the API.
		raw, _ := json.Marshal(records[0])
		var odd map[string]any
		_ = json.Unmarshal(raw, &odd)
		odd["severity_id"], odd["severity"], odd["status_code"] = 6, "Fatal", "MUTED"
		odd["finding_info"].(map[string]any)["uid"] = "overview-fatal-muted"
		odd["finding_info"].(map[string]any)["title"] = "Fatal and muted"
		content, _ := json.Marshal([]any{odd})
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.openImport()
		p.choose(writeFile(t, "fatal.ocsf.json", content))
		p.click("import-start")
		p.waitText("#import-state", "Import completed: 1 record, 1 processed, 0 invalid; 1 finding stored.")
		p.do(chromedp.KeyEvent("\x1b"))
		direct := te.as(t, te.key("demo-admin"))
		// Status counts every finding of the history; severity counts those
		// of the status the list is filtered to.
		for _, tc := range []struct{ hash, filter, chart, value, within string }{
			{"#/findings?view=history", "status_code", "#by-status", "MUTED", ""},
			{"#/findings?view=history&status_code=MUTED", "severity", "#by-severity", "fatal", "MUTED"},
		} {
			p.do(chromedp.Navigate(b.base+"/"+tc.hash), chromedp.WaitVisible(chromedp.ID("findings-view")))
			total := direct.list("/api/v1/findings", "").Meta.Pagination.Count
			kv := []string{"filter[" + tc.filter + "]", tc.value}
			if tc.within != "" {
				total = direct.list("/api/v1/findings", queryOf("filter[status_code]", tc.within)).Meta.Pagination.Count
				kv = append(kv, "filter[status_code]", tc.within)
			}
			want := direct.list("/api/v1/findings", queryOf(kv...)).Meta.Pagination.Count
			if want == 0 {
				t.Fatalf("the API counts no %s %s: the test would prove nothing", tc.filter, tc.value)
			}
			p.waitJS("the overview drawn", `document.querySelectorAll('`+tc.chart+` [data-value="`+tc.value+`"]').length > 0`)
			sum, _ := p.eval(`[...document.querySelectorAll('` + tc.chart + ` .bar-count')].reduce((n, c) => n + Number(c.textContent), 0)`).(float64)
			if int(sum) != total {
				t.Errorf("overview %s: the bars add up to %v of the %d findings", tc.filter, sum, total)
			}
			got, _ := p.eval(`document.querySelector('` + tc.chart + ` [data-value="` + tc.value + `"] .bar-count')?.textContent || 'no bar'`).(string)
			if got != strconv.Itoa(want) {
				t.Errorf("overview %s %s: %s, want the API's %d", tc.filter, tc.value, got, want)
			}
		}
		// The list can be filtered to it.
		p.do(chromedp.SetValue(chromedp.CSS(`#findings-filters select[name=severity]`), "fatal"))
		p.eval(`document.querySelector('#findings-filters').requestSubmit()`)
		p.waitText("#findings-table tbody", "Fatal and muted")
		if got := p.text("#findings-message"); got == "" || strings.HasPrefix(got, "Could not") {
			t.Errorf("filtered to fatal: %q", got)
		}
	})

	t.Run("a rejection or a failed status check behind a closed dialog is notified and kept", func(t *testing.T) {
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.openImport()
		p.choose(writeFile(t, "malformed.ocsf.json", []byte("this is not JSON")))
		// Start and close at once: the answer comes with the dialog closed.
		p.eval(`document.querySelector('#import-start').click(); document.querySelector('#import-dialog').close()`)
		p.waitText("#toasts", "Import of malformed.ocsf.json was not accepted: The server rejected the file as invalid")
		p.openImport()
		p.waitText("#import-error", "The server rejected the file as invalid")
		if !p.visible("#import-retry") || !p.visible("#import-other") {
			t.Error("the reopened dialog lost the rejection's Retry import and Choose another file")
		}
		p.click("import-other")
		p.choose(writeFile(t, "unread.ocsf.json", example(t, "aws_mixed_7_records.ocsf.json")))
		p.failStatus.Store(true)
		defer p.failStatus.Store(false)
		p.eval(`document.querySelector('#import-start').click(); document.querySelector('#import-dialog').close()`)
		p.waitText("#toasts", "The status of the import of unread.ocsf.json could not be read")
		p.failStatus.Store(false)
		p.openImport()
		if !p.visible("#import-retry-status") {
			t.Fatal("the reopened dialog lost Retry status")
		}
		p.click("import-retry-status")
		p.waitText("#import-state", "Import completed: 7 records, 7 processed, 4 invalid")
		if n := p.sent(http.MethodPost, "/api/v1/ingestions"); n != 2 {
			t.Errorf("%d uploads, want 2 (one refused, one followed again without uploading)", n)
		}
	})

	t.Run("the jobs list shows a new job while the dialog follows it", func(t *testing.T) {
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		p.waitJS("the jobs list loaded", `document.querySelector('#ingestions-message').textContent !== '' || document.querySelectorAll('#ingestions-table tbody tr').length > 0`)
		before := p.eval(`[...document.querySelectorAll('#ingestions-table tbody a')].map(a => a.title).join(' ')`)
		p.openImport()
		p.choose(writeFile(t, "listed.ocsf.json", example(t, "aws_mixed_7_records.ocsf.json")))
		// The dialog's status checks are held: the import is not over for it.
		p.holdStatus.Store(true)
		defer p.holdStatus.Store(false)
		p.click("import-start")
		p.do(chromedp.KeyEvent("\x1b"))
		p.waitJS("the new job listed", fmt.Sprintf(`(() => { const before = new Set(%q.split(' '));
			return [...document.querySelectorAll('#ingestions-table tbody a')].some(a => !before.has(a.title)) })()`, before))
	})

	// Last: it adds 10,100 findings the subtests above do not expect.
	t.Run("Next reads past the numbered pages by cursor, and Previous walks back", func(t *testing.T) {
		ctx := context.Background()
		tenant := te.tenants["demo"].Name
		var fs []store.Finding
		for i := range 10_100 {
			fs = append(fs, store.Finding{UID: fmt.Sprintf("deep-%05d", i), ScanID: "deep-scan", CheckID: "deep_check", Title: fmt.Sprintf("Deep %05d", i),
				Severity: "low", SeverityID: 2, StatusCode: "PASS", ProviderType: "aws", ProviderUID: "123456789012",
				Time: time.Now(), Raw: []byte(`{}`)})
		}
		if err := te.env.Store.StartRun(ctx, tenant, "deep", 1, len(fs)); err != nil {
			t.Fatal(err)
		}
		if err := te.env.Store.WriteBatch(ctx, tenant, "deep", 1, store.Batch{Findings: fs}); err != nil {
			t.Fatal(err)
		}
		p := b.page(t)
		p.signIn(admin, te.pw[admin])
		// Written without a completed run, they are history, not the current state.
		p.do(chromedp.Navigate(b.base+"/#/findings?view=history"), chromedp.WaitVisible(chromedp.ID("findings-view")))
		p.waitText("#findings-pager span", "Page 1 of ")
		sort, _ := p.eval(`document.querySelector('#findings-filters').elements.sort.value`).(string)
		direct := te.as(t, te.key("demo-admin"))
		numbered := direct.list("/api/v1/findings", queryOf("page[size]", "20", "page[number]", "501", "sort", sort))
		if numbered.Links.Next == nil || (numbered.Meta.Pagination.Pages-1)*20 <= restapi.MaxPageOffset {
			t.Fatalf("%d pages of 20: the test would not reach past page[number]'s depth", numbered.Meta.Pagination.Pages)
		}
		next, err := url.Parse(*numbered.Links.Next)
		if err != nil {
			t.Fatal(err)
		}
		byCursor := direct.list("/api/v1/findings", next.RawQuery)
		shown := `[...document.querySelectorAll('#findings-table tbody a')].map(a => decodeURIComponent(a.hash.slice('#/findings/'.length))).join(' ')`
		step := func(dir string, times int) string {
			t.Helper()
			v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(async () => {
				const span = document.querySelector('#findings-pager span');
				const button = document.querySelector('#findings-pager [data-step="`+dir+`"]');
				for (let i = 0; i < `+strconv.Itoa(times)+`; i++) {
					const before = span.textContent, start = Date.now();
					if (button.disabled) return 'disabled at ' + before;
					button.click();
					while (span.textContent === before) {
						if (Date.now() - start > 10000) return 'stuck at ' + before;
						await new Promise((r) => setTimeout(r, 2));
					}
				}
				return span.textContent;
			})()`, chromedp.EvalAwaitPromise))
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		pages := numbered.Meta.Pagination.Pages
		for _, tc := range []struct {
			dir   string
			times int
			page  int
			want  listDoc
		}{
			{"1", 500, 501, numbered},
			{"1", 1, 502, byCursor},  // past the depth: links.next of page 501
			{"-1", 1, 501, numbered}, // back within it: page[number]
			{"1", 1, 502, byCursor},  // and forward again with the cursor kept
		} {
			got := step(tc.dir, tc.times)
			if want := fmt.Sprintf("Page %d of %d", tc.page, pages); got != want {
				t.Fatalf("pager %q, want %q; message %q", got, want, p.text("#findings-message"))
			}
			if rows, _ := p.eval(shown).(string); rows != strings.Join(tc.want.ids(), " ") {
				t.Errorf("page %d lists %s, want the API's %v", tc.page, rows, tc.want.ids())
			}
		}
	})
}

// TestWebUIHeaders checks what every page carries, and that the session
// cookie works only with the UI's request header.
func TestWebUIHeaders(t *testing.T) {
	te := startTenancy(t, tenancyOpts{})
	for _, path := range []string{"/", "/assets/app.js", "/assets/app.css"} {
		res, err := http.Get(te.env.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("GET %s = %d", path, res.StatusCode)
		}
		for k, want := range map[string]string{
			"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'",
			"X-Content-Type-Options":  "nosniff",
		} {
			if got := res.Header.Get(k); got != want {
				t.Errorf("GET %s: %s = %q, want %q", path, k, got, want)
			}
		}
	}

	email := te.emails["demo-admin"]
	body := tokensBody("tokens", map[string]string{"email": email, "password": te.pw[email]})
	for _, tc := range []struct {
		name   string
		header http.Header
		status int
	}{
		{"without the UI header", http.Header{}, 403},
		{"with the UI header", http.Header{"X-Posture-Ui": {"1"}}, 204},
	} {
		req, _ := http.NewRequest(http.MethodPost, te.env.URL+"/ui/session", bytes.NewReader(body.Bytes()))
		req.Header = tc.header.Clone()
		req.Header.Set("Content-Type", "application/vnd.api+json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.status {
			t.Fatalf("sign-in %s = %d, want %d", tc.name, res.StatusCode, tc.status)
		}
		if tc.status != 204 {
			continue
		}
		var cookie *http.Cookie
		for _, c := range res.Cookies() {
			if c.Name == "posture_session" {
				cookie = c
			}
		}
		if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
			t.Fatalf("session cookie = %+v, want HttpOnly and SameSite=Strict", cookie)
		}
		for _, api := range []struct {
			name   string
			ui     bool
			status int
		}{{"a cookie alone (cross-site request)", false, 403}, {"the cookie and the UI header", true, 200}} {
			req, _ := http.NewRequest(http.MethodGet, te.env.URL+"/api/v1/tenant", nil)
			req.AddCookie(cookie)
			if api.ui {
				req.Header.Set("X-Posture-UI", "1")
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != api.status {
				t.Errorf("GET /api/v1/tenant with %s = %d, want %d", api.name, res.StatusCode, api.status)
			}
		}
	}
}

// TestWebUISessionRenewal follows one session through its tokens' lives:
// renewed before the access token expires, renewed again after it expired
// while the refresh token lives, and ended (cookie cleared, 401) once both
// have expired.
func TestWebUISessionRenewal(t *testing.T) {
	te := startTenancy(t, tenancyOpts{serverClock: true})
	c, jar := signInUI(t, te, te.emails["demo-viewer"])
	base, _ := url.Parse(te.env.URL)
	cookie := func() string {
		for _, ck := range jar.Cookies(base) {
			if ck.Name == "posture_session" {
				return ck.Value
			}
		}
		return ""
	}
	for _, step := range []struct {
		name    string
		advance time.Duration
		status  int
		cookie  string // "same", "new" or "gone"
	}{
		{"fresh", time.Minute, 200, "same"},
		{"26 minutes old: renewed ahead of expiry", 25 * time.Minute, 200, "new"},
		{"just renewed", time.Minute, 200, "same"},
		// No request for 40 minutes: the access token expired, the refresh
		// token still lives.
		{"access expired, refresh valid", 40 * time.Minute, 200, "new"},
		{"both expired", 25 * time.Hour, 401, "gone"},
	} {
		before := cookie()
		te.clock.Advance(step.advance)
		req, _ := http.NewRequest(http.MethodGet, te.env.URL+"/api/v1/tenant", nil)
		req.Header.Set("X-Posture-UI", "1")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		after := cookie()
		got := map[bool]string{true: "same", false: "new"}[after == before]
		if after == "" {
			got = "gone"
		}
		if res.StatusCode != step.status || got != step.cookie {
			t.Errorf("%s: GET /api/v1/tenant = %d with the cookie %s, want %d and %s", step.name, res.StatusCode, got, step.status, step.cookie)
		}
	}
}

// subscription returns a switch of tenant label's subscription that returns
// once the API answers the tenant's administrator accordingly, and turns it
// back as it was when the test ends.
func subscription(t *testing.T, te *tenancyEnv, label string) func(active bool) {
	t.Helper()
	tenant := te.tenants[label]
	was := tenant.Spec.Subscription.Active
	set := func(active bool) {
		te.update(tenant, func() { tenant.Spec.Subscription.Active = active })
		want := map[bool]int{true: http.StatusOK, false: http.StatusPaymentRequired}[active]
		eventually(t, 30*time.Second, fmt.Sprintf("the API answering %s's scans %d", label, want), func() string {
			if got := te.as(t, te.key(label+"-admin")).get("/api/v1/scans", "").status; got != want {
				return fmt.Sprintf("HTTP %d", got)
			}
			return ""
		})
	}
	t.Cleanup(func() { set(was) })
	return set
}
