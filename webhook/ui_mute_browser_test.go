package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// TestWebUIMute: a user with mute_findings mutes a finding from its page
// through the Mute… dialog, pre-filled from the finding: the dialog
// refuses a missing reason itself and shows the API's refusal at the field
// it points to; the rule is a MuteRule object in the tenant's namespace;
// once the controller's pass has run the finding shows the rule and its
// reason on its page and in the Findings table, leaves the current state
// by default and comes back with Muted: Both. A viewer is offered no
// Mute… at all.
func TestWebUIMute(t *testing.T) {
	te := startTenancy(t, tenancyOpts{mute: true})
	direct := te.as(t, te.key("demo-admin"))
	if _, status, _ := direct.ingest("mixed.ocsf.json", example(t, "aws_mixed_7_records.ocsf.json")); status != "completed" {
		t.Fatalf("the import ended %s", status)
	}
	all := direct.list("/api/v1/findings/latest", "page[size]=100")
	if len(all.Data) < 2 {
		t.Fatalf("%d findings in the current state; the test needs at least 2", len(all.Data))
	}
	target := all.Data[0]
	attr := func(k string) string { s, _ := target.Attributes[k].(string); return s }
	check, account, resource := attr("check_id"), attr("provider_uid"), attr("resource_uid")
	if check == "" || account == "" || resource == "" {
		t.Fatalf("the finding lacks a check, account or resource: %v", target.Attributes)
	}

	b := startBrowser(t, te.env.URL)
	admin := te.emails["demo-admin"]
	p := b.page(t)
	p.signIn(admin, te.pw[admin])
	p.do(chromedp.Navigate(b.base + "/#/findings/" + target.ID))
	p.waitText("#finding-summary", check)
	if got := p.text("#finding-summary"); !strings.Contains(got, "MutedNo") {
		t.Errorf("the summary of an unmuted finding %q; want Muted: No", got)
	}
	p.waitJS("Mute… offered", `!document.querySelector('#mute-open').hidden`)
	if ax := p.axNodes("#finding-view .title-row"); !slices.Contains(ax, axNode{"button", "Mute…"}) {
		t.Fatalf("no button Mute… on the finding's page: %v", ax)
	}
	p.click("mute-open")
	p.waitJS("the dialog open", `document.querySelector('#mute-dialog').open`)

	t.Run("pre-filled from the finding", func(t *testing.T) {
		for field, want := range map[string]string{"checkId": check, "account": account, "resourceUid": resource,
			"region": attr("region"), "severity": attr("severity"), "statusCode": attr("status_code")} {
			if got := p.eval(`document.querySelector('#mute-` + field + `').value`); got != want {
				t.Errorf("%s pre-filled with %v, want %q", field, got, want)
			}
			checked := p.eval(`document.querySelector('#mute-on-` + field + `').checked`)
			if wantOn := field == "checkId" || field == "account" || field == "resourceUid"; checked != wantOn {
				t.Errorf("%s checked %v, want %v", field, checked, wantOn)
			}
		}
		if unnamed := p.unnamed("checkbox", "textbox", "button"); len(unnamed) > 0 {
			t.Errorf("controls without a name: %v", unnamed)
		}
	})

	t.Run("a reason is required, before anything is sent", func(t *testing.T) {
		p.click("mute-create")
		p.waitText("#mute-error", "Reason:")
		if v := p.eval(`document.querySelector('#mute-reason').getAttribute('aria-invalid')`); v != "true" {
			t.Errorf("the reason is not marked invalid: %v", v)
		}
		if n := p.sent(http.MethodPost, "/api/v1/mute-rules"); n != 0 {
			t.Errorf("%d POSTs without a reason", n)
		}
	})

	t.Run("the API's refusal shows at its field", func(t *testing.T) {
		p.do(chromedp.SendKeys(chromedp.ID("mute-reason"), "accepted by the UI test"),
			chromedp.SetValue(chromedp.ID("mute-resourceUid"), "arn:[x"))
		p.click("mute-create")
		p.waitText("#mute-error", "the rule was refused")
		got := p.text("#mute-error")
		if !strings.HasPrefix(got, "Resource UID:") || !strings.Contains(got, "spec.match.resourceUid") {
			t.Errorf("the refusal reads %q; want it to start with the field (Resource UID) and give the API's detail", got)
		}
		if v := p.eval(`document.querySelector('#mute-resourceUid').getAttribute('aria-invalid') === 'true' && document.activeElement.id === 'mute-resourceUid'`); v != true {
			t.Error("the resource UID is not marked invalid and focused")
		}
		if n := p.sent(http.MethodPost, "/api/v1/mute-rules"); n != 1 {
			t.Errorf("%d POSTs, want the one refused", n)
		}
	})

	t.Run("created, followed until its pass is done", func(t *testing.T) {
		p.do(chromedp.SetValue(chromedp.ID("mute-resourceUid"), resource), chromedp.SendKeys(chromedp.ID("mute-name"), "accepted-in-ui"))
		p.click("mute-create")
		p.waitText("#mute-result", "ready: mutes")
		if got := p.text("#mute-result"); !strings.HasPrefix(got, "Mute rule accepted-in-ui ready: mutes") || !strings.Contains(got, "accepted by the UI test") {
			t.Errorf("the dialog says %q after creating the rule", got)
		}
		if p.text("#mute-error") != "" || p.eval(`document.querySelector('[aria-invalid]') === null`) != true {
			t.Errorf("the earlier refusal is still shown: %q", p.text("#mute-error"))
		}
		p.screenshot("mute-dialog")
		var rule posturev1.MuteRule
		key := client.ObjectKey{Namespace: te.tenants["demo"].NamespaceName(), Name: "accepted-in-ui"}
		if err := te.k8s.Get(context.Background(), key, &rule); err != nil {
			t.Fatalf("the MuteRule %s: %v", key, err)
		}
		want := posturev1.MuteMatch{CheckID: check, Account: account, ResourceUID: resource}
		if !equalMatch(rule.Spec.Match, want) || rule.Spec.Reason != "accepted by the UI test" || rule.Spec.ExpiresAt != nil {
			t.Errorf("the MuteRule's spec %+v; want match %+v and the reason typed", rule.Spec, want)
		}
		// The finding's page reads it again: the mark, its rule and reason.
		p.waitText("#finding-summary", "by rule accepted-in-ui: accepted by the UI test")
		p.click("mute-close")
		p.waitJS("the dialog closed", `!document.querySelector('#mute-dialog').open`)
		// (The page under a modal dialog is inert: read it once closed.)
		if ax := p.axNodes("#finding-summary"); !slices.Contains(ax, axNode{"image", "Muted by rule accepted-in-ui: accepted by the UI test"}) {
			t.Errorf("the summary's mark has no name with the rule and reason: %v", ax)
		}
	})

	t.Run("the finding leaves the current state, and comes back with Muted: Both", func(t *testing.T) {
		muted := direct.list("/api/v1/findings/latest", "filter[muted]=true&page[size]=100")
		if !slices.Contains(muted.ids(), target.ID) {
			t.Fatalf("the API's muted findings %v lack %s", muted.ids(), target.ID)
		}
		unmuted := len(all.Data) - len(muted.Data)
		row := `document.querySelector('#findings-table a[href="#/findings/` + target.ID + `"]')`
		message := func(n int) string {
			return fmt.Sprintf("%d finding", n) + map[bool]string{true: "", false: "s"}[n == 1]
		}
		p.do(chromedp.Navigate(b.base + "/#/findings"))
		p.waitJS("the current state without the muted", `document.querySelector('#findings-message').textContent === `+strconv.Quote(message(unmuted)))
		if p.eval(row+` === null`) != true {
			t.Error("the muted finding is listed in the current state by default")
		}
		if v := p.eval(`document.querySelector('#findings-filters select[name=muted]').value`); v != "false" {
			t.Errorf("the Muted filter reads %v by default; want Not muted (false)", v)
		}
		for _, tc := range []struct {
			value string
			n     int
		}{{"any", len(all.Data)}, {"true", len(muted.Data)}} {
			p.do(chromedp.SetValue(chromedp.CSS(`#findings-filters select[name=muted]`), tc.value))
			p.eval(`document.querySelector('#findings-filters select[name=muted]').dispatchEvent(new Event('change', { bubbles: true })) && true`)
			p.waitJS("the list with muted="+tc.value, `location.hash.includes('muted=`+tc.value+`') && document.querySelector('#findings-message').textContent === `+strconv.Quote(message(tc.n)))
			if p.eval(row+` !== null`) != true {
				t.Fatalf("muted=%s: the muted finding is not listed", tc.value)
			}
			ax := p.axNodes(`#findings-table tbody tr:has(a[href="#/findings/` + target.ID + `"])`)
			if !slices.Contains(ax, axNode{"image", "Muted by rule accepted-in-ui: accepted by the UI test"}) {
				t.Errorf("muted=%s: the row's mark has no name with the rule and reason: %v", tc.value, ax)
			}
			if v := p.eval(row + `.closest('td').querySelector('.mute-mark').title`); v != "Muted by rule accepted-in-ui: accepted by the UI test" {
				t.Errorf("the mark's tooltip %v", v)
			}
		}
		p.screenshot("findings-muted")
		// A reload keeps the filter; the history lists both by default.
		p.do(chromedp.Reload())
		p.waitJS("the list after a reload", `document.querySelector('#findings-filters select[name=muted]').value === 'true' && document.querySelector('#findings-message').textContent === `+strconv.Quote(message(len(muted.Data))))
		p.do(chromedp.Navigate(b.base + "/#/findings?view=history"))
		p.waitJS("the history with the muted", `document.querySelector('#findings-filters select[name=muted]').value === 'any' && `+row+` !== null`)
	})

	t.Run("a viewer is offered no Mute…", func(t *testing.T) {
		viewer := te.emails["demo-viewer"]
		v := b.page(t)
		v.signIn(viewer, te.pw[viewer])
		v.do(chromedp.Navigate(b.base + "/#/findings/" + all.Data[1].ID))
		v.waitText("#finding-summary", "Muted")
		if v.visible("#mute-open") {
			t.Error("a viewer sees Mute…")
		}
		if ax := v.axNodes("#finding-view"); slices.ContainsFunc(ax, func(n axNode) bool { return n.name == "Mute…" }) {
			t.Errorf("a viewer's accessibility tree offers Mute…: %v", ax)
		}
	})
}

func equalMatch(a, b posturev1.MuteMatch) bool {
	return a.CheckID == b.CheckID && a.Account == b.Account && a.Region == b.Region && a.ResourceUID == b.ResourceUID &&
		a.ResourceName == b.ResourceName && slices.Equal(a.Severity, b.Severity) && slices.Equal(a.StatusCode, b.StatusCode)
}
