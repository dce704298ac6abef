package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"golang.org/x/time/rate"

	"github.com/posture-dev/posture/internal/restapi"
)

// noForeignAccounts fails a read whose body names another tenant's
// account: what one tenant reads must hold nothing of another's.
func (w *world) noForeignAccounts(t *tenant, op string, body []byte) {
	for _, o := range w.tenants {
		if o == t {
			continue
		}
		for _, a := range o.accounts {
			if bytes.Contains(body, []byte(a)) {
				w.probs.add("isolation", "%s as %s holds account %s of %s", op, t.name, a, o.name)
				return
			}
		}
	}
}

// as is a credential: how it authenticates and the pace of its bucket.
type as struct {
	authz string
	pace  *rate.Limiter
	label string
}

func (t *tenant) adminKey() as  { return as{"Api-Key " + t.admin.APIKey, t.adminPace, "admin key"} }
func (t *tenant) viewerKey() as { return as{"Api-Key " + t.viewer.APIKey, t.viewerPace, "viewer key"} }

// reader is a credential of the tenant that may read findings: the
// viewer's key mostly, the admin's session token sometimes.
func (t *tenant) reader(rng *rand.Rand) as {
	t.mu.Lock()
	access := t.access
	t.mu.Unlock()
	if access != "" && rng.IntN(3) == 0 {
		return as{"Bearer " + access, t.userPace, "admin session"}
	}
	return t.viewerKey()
}

// get reads path as cred, records it as op, and returns the decoded
// document when the answer is one of want (200 by default).
func (w *world) get(ctx context.Context, t *tenant, cred as, op, path string, q url.Values, want ...int) (*restapi.Response, int, bool) {
	if len(want) == 0 {
		want = []int{200}
	}
	if cred.pace != nil {
		_ = cred.pace.Wait(ctx)
	}
	start := time.Now()
	resp, err := w.api.Do(ctx, restapi.Call{Method: http.MethodGet, Path: path, Query: q, Authorization: cred.authz})
	if ctx.Err() != nil {
		// The load ended under it: nobody's answer to judge.
		return nil, 0, false
	}
	c := call{op: op, start: start, took: time.Since(start), want: want, what: path + "?" + q.Encode() + " as " + cred.label}
	fillCall(&c, resp, err)
	ok := w.rec.record(c)
	if ok && resp != nil && t != nil {
		w.noForeignAccounts(t, op, resp.Body)
	}
	return resp, c.status, ok
}

// restReader reads the tenant's data through the REST API in every shape
// it offers, and holds what comes back to the tenant.
func (w *world) restReader(ctx context.Context, t *tenant) {
	rng := w.rng()
	shapes := []struct {
		weight int
		f      func(context.Context, *rand.Rand, *tenant)
	}{
		{3, w.readIngestions}, {3, w.readIngestion}, {2, w.readErrors},
		{4, w.readFindings}, {2, w.readFindingsFiltered}, {2, w.readFindingsSorted}, {2, w.readFindingsSearch},
		{2, w.readFindingsCursor}, {1, w.readFindingsPage}, {2, w.readFinding}, {1, w.readFindingsOfIngestion},
		{2, w.readLatest}, {2, w.readCounts}, {2, w.readScans}, {2, w.readProviders}, {1, w.readTenant},
	}
	total := 0
	for _, s := range shapes {
		total += s.weight
	}
	for ctx.Err() == nil {
		n := rng.IntN(total)
		for _, s := range shapes {
			if n < s.weight {
				s.f(ctx, rng, t)
				break
			}
			n -= s.weight
		}
	}
}

// findings decodes a findings list and holds every item to the tenant.
func (w *world) findings(t *tenant, op string, resp *restapi.Response) *restapi.ListDocument[restapi.Finding] {
	var doc restapi.ListDocument[restapi.Finding]
	if err := resp.Decode(&doc); err != nil {
		w.probs.add("answer", "%s: %v", op, err)
		return nil
	}
	ids := make([]string, 0, len(doc.Data))
	for _, f := range doc.Data {
		a := f.Attributes
		if !t.ownsAccount(a.ProviderUID) || !t.namesOwnAccount(a.UID) {
			w.probs.add("isolation", "%s as %s lists finding %s (uid %s) of account %s", op, t.name, f.ID, a.UID, a.ProviderUID)
		}
		t.saw(a.IngestionID, op)
		ids = append(ids, f.ID)
	}
	t.mu.Lock()
	t.findingIDs.add(ids...)
	t.mu.Unlock()
	return &doc
}

func (w *world) readIngestions(ctx context.Context, rng *rand.Rand, t *tenant) {
	q := url.Values{"page[size]": {"50"}}
	op := "ingestions.list"
	switch rng.IntN(4) {
	case 0:
		q.Set("filter[status__in]", "completed,failed")
		q.Set("sort", "-completed_at")
		op = "ingestions.list.filter"
	case 1:
		q.Set("filter[search]", "mixed")
		op = "ingestions.list.search"
	case 2:
		q.Set("fields[ingestions]", "status,summary")
		q.Set("sort", "requested_at")
	}
	resp, _, ok := w.get(ctx, t, t.adminKey(), op, restapi.PathIngestions, q)
	if !ok {
		return
	}
	var doc restapi.ListDocument[restapi.Ingestion]
	if err := resp.Decode(&doc); err != nil {
		w.probs.add("answer", "%s: %v", op, err)
		return
	}
	for _, i := range doc.Data {
		t.saw(i.ID, op)
	}
}

func (w *world) readIngestion(ctx context.Context, rng *rand.Rand, t *tenant) {
	u := t.pickAccepted(rng)
	if u == nil {
		return
	}
	w.getIngestion(ctx, t, u.id, "ingestions.get")
}

func (w *world) readErrors(ctx context.Context, rng *rand.Rand, t *tenant) {
	u := t.pickChecked(rng, func(u *upload) bool { return len(u.spec.bad) > 0 || u.spec.n == 0 })
	if u == nil {
		return
	}
	resp, _, ok := w.get(ctx, t, t.adminKey(), "ingestions.errors", restapi.PathIngestions+"/"+u.id+"/errors", url.Values{"page[size]": {"100"}})
	if !ok {
		return
	}
	var doc restapi.ListDocument[restapi.IngestionError]
	if err := resp.Decode(&doc); err != nil {
		w.probs.add("answer", "errors of %s: %v", u.id, err)
		return
	}
	if want := len(u.spec.wantErrors()); doc.Meta.Pagination == nil || doc.Meta.Pagination.Count != want {
		w.probs.add("refused records' reasons", "errors of %s (%s) count %+v, want %d", u.id, u.name, doc.Meta.Pagination, want)
	}
}

func (w *world) readFindings(ctx context.Context, rng *rand.Rand, t *tenant) {
	q := url.Values{"page[size]": {fmt.Sprint(between(rng, 10, 100))}}
	if resp, _, ok := w.get(ctx, t, t.reader(rng), "findings.list", restapi.PathFindings, q); ok {
		w.findings(t, "findings.list", resp)
	}
}

func (w *world) readFindingsFiltered(ctx context.Context, rng *rand.Rand, t *tenant) {
	q := url.Values{"page[size]": {"50"}}
	switch rng.IntN(3) {
	case 0:
		q.Set("filter[severity__in]", "critical,high")
		q.Set("filter[status_code]", "FAIL")
	case 1:
		q.Set("filter[provider_uid]", t.accounts[rng.IntN(len(t.accounts))])
		q.Set("filter[region]", "us-east-1")
	case 2:
		q.Set("filter[check_id]", "accessanalyzer_enabled")
		q.Set("filter[provider_type]", "aws")
	}
	if resp, _, ok := w.get(ctx, t, t.reader(rng), "findings.filter", restapi.PathFindings, q); ok {
		w.findings(t, "findings.filter", resp)
	}
}

func (w *world) readFindingsSorted(ctx context.Context, rng *rand.Rand, t *tenant) {
	sorts := []string{"time", "-time", "-severity_id", "check_id", "uid", "-inserted_at"}
	q := url.Values{"page[size]": {"50"}, "sort": {sorts[rng.IntN(len(sorts))]}}
	if resp, _, ok := w.get(ctx, t, t.reader(rng), "findings.sort", restapi.PathFindings, q); ok {
		w.findings(t, "findings.sort", resp)
	}
}

func (w *world) readFindingsSearch(ctx context.Context, rng *rand.Rand, t *tenant) {
	terms := []string{t.accounts[rng.IntN(len(t.accounts))], "s3_bucket", "accessanalyzer", "us-east-1"}
	q := url.Values{"page[size]": {"20"}, "filter[search]": {terms[rng.IntN(len(terms))]}}
	path, op := restapi.PathFindings, "findings.search"
	if rng.IntN(2) == 0 {
		path, op = restapi.PathLatestFindings, "findings.latest.search"
	}
	if resp, _, ok := w.get(ctx, t, t.reader(rng), op, path, q); ok {
		w.findings(t, op, resp)
	}
}

// readFindingsCursor follows links.next for a few pages.
func (w *world) readFindingsCursor(ctx context.Context, rng *rand.Rand, t *tenant) {
	q := url.Values{"page[size]": {"50"}, "sort": {"-time"}}
	cred := t.reader(rng)
	for page := 0; page < 3; page++ {
		resp, _, ok := w.get(ctx, t, cred, "findings.cursor", restapi.PathFindings, q)
		if !ok {
			return
		}
		doc := w.findings(t, "findings.cursor", resp)
		if doc == nil || doc.Links == nil || doc.Links.Next == nil {
			return
		}
		next, err := url.Parse(*doc.Links.Next)
		if err != nil {
			w.probs.add("answer", "links.next %q: %v", *doc.Links.Next, err)
			return
		}
		q = next.Query()
	}
}

func (w *world) readFindingsPage(ctx context.Context, rng *rand.Rand, t *tenant) {
	q := url.Values{"page[size]": {"20"}, "page[number]": {fmt.Sprint(between(rng, 2, 20))}}
	// A page past the last is a 404 (early in the run, when there are few).
	if resp, status, ok := w.get(ctx, t, t.reader(rng), "findings.page", restapi.PathFindings, q, 200, 404); ok && status == 200 {
		w.findings(t, "findings.page", resp)
	}
}

func (w *world) readFinding(ctx context.Context, rng *rand.Rand, t *tenant) {
	t.mu.Lock()
	id := t.findingIDs.pick(rng)
	t.mu.Unlock()
	if id == "" {
		return
	}
	resp, _, ok := w.get(ctx, t, t.reader(rng), "findings.get", restapi.PathFindings+"/"+id, nil)
	if !ok {
		return
	}
	var doc restapi.ResourceDocument[restapi.Finding]
	if err := resp.Decode(&doc); err != nil || doc.Data.ID != id || !t.ownsAccount(doc.Data.Attributes.ProviderUID) || len(doc.Data.Attributes.Record) == 0 {
		w.probs.add("isolation", "GET /findings/%s as %s: %v, id %s, account %s", id, t.name, err, doc.Data.ID, doc.Data.Attributes.ProviderUID)
	}
}

func (w *world) readFindingsOfIngestion(ctx context.Context, rng *rand.Rand, t *tenant) {
	u := t.pickChecked(rng, func(u *upload) bool { return u.spec.valid() > 0 })
	if u == nil {
		return
	}
	q := url.Values{"page[size]": {"100"}, "filter[ingestion]": {u.id}}
	resp, _, ok := w.get(ctx, t, t.reader(rng), "findings.ingestion", restapi.PathFindings, q)
	if !ok {
		return
	}
	if doc := w.findings(t, "findings.ingestion", resp); doc != nil {
		for _, f := range doc.Data {
			if f.Attributes.IngestionID != u.id {
				w.probs.add("answer", "findings of ingestion %s list %s of ingestion %s", u.id, f.ID, f.Attributes.IngestionID)
			}
		}
	}
}

func (w *world) readLatest(ctx context.Context, rng *rand.Rand, t *tenant) {
	q := url.Values{"page[size]": {"50"}}
	if rng.IntN(2) == 0 {
		q.Set("filter[status_code]", "FAIL")
	}
	if resp, _, ok := w.get(ctx, t, t.reader(rng), "findings.latest", restapi.PathLatestFindings, q); ok {
		w.findings(t, "findings.latest", resp)
	}
}

func (w *world) readCounts(ctx context.Context, rng *rand.Rand, t *tenant) {
	path, op := restapi.PathFindingCounts, "findings.counts"
	if rng.IntN(2) == 0 {
		path, op = restapi.PathLatestFindings+"/counts", "findings.latest.counts"
	}
	groups := []string{"severity,status_code", "provider_uid", "check_id", "region,provider_type"}
	resp, _, ok := w.get(ctx, t, t.reader(rng), op, path, url.Values{"group_by": {groups[rng.IntN(len(groups))]}})
	if !ok {
		return
	}
	var doc restapi.ListDocument[restapi.FindingCount]
	if err := resp.Decode(&doc); err != nil {
		w.probs.add("answer", "%s: %v", op, err)
		return
	}
	for _, g := range doc.Data {
		if g.Attributes.ProviderUID != "" && !t.ownsAccount(g.Attributes.ProviderUID) {
			w.probs.add("isolation", "%s as %s counts account %s", op, t.name, g.Attributes.ProviderUID)
		}
	}
}

func (w *world) readScans(ctx context.Context, rng *rand.Rand, t *tenant) {
	q := url.Values{"page[size]": {"50"}}
	if rng.IntN(2) == 0 {
		q.Set("filter[provider_uid]", t.accounts[rng.IntN(len(t.accounts))])
	}
	resp, _, ok := w.get(ctx, t, t.reader(rng), "scans.list", restapi.PathScans, q)
	if !ok {
		return
	}
	var doc restapi.ListDocument[restapi.Scan]
	if err := resp.Decode(&doc); err != nil {
		w.probs.add("answer", "scans: %v", err)
		return
	}
	ids := make([]string, 0, len(doc.Data))
	for _, s := range doc.Data {
		if !t.ownsAccount(s.Attributes.ProviderUID) {
			w.probs.add("isolation", "scans of %s list %s of account %s", t.name, s.ID, s.Attributes.ProviderUID)
		}
		t.saw(s.Attributes.IngestionID, "scans.list")
		ids = append(ids, s.ID)
	}
	t.mu.Lock()
	t.scanIDs.add(ids...)
	t.mu.Unlock()
}

func (w *world) readProviders(ctx context.Context, rng *rand.Rand, t *tenant) {
	resp, _, ok := w.get(ctx, t, t.reader(rng), "providers.list", restapi.PathProviders, url.Values{"sort": {"uid"}})
	if !ok {
		return
	}
	var doc restapi.ListDocument[restapi.Provider]
	if err := resp.Decode(&doc); err != nil {
		w.probs.add("answer", "providers: %v", err)
		return
	}
	ids := make([]string, 0, len(doc.Data))
	for _, p := range doc.Data {
		if !t.ownsAccount(p.Attributes.UID) {
			w.probs.add("isolation", "providers of %s list %s of account %s", t.name, p.ID, p.Attributes.UID)
		}
		ids = append(ids, p.ID)
	}
	t.mu.Lock()
	t.providerIDs.add(ids...)
	id := t.providerIDs.pick(rng)
	t.mu.Unlock()
	if id != "" {
		w.get(ctx, t, t.reader(rng), "providers.get", restapi.PathProviders+"/"+id, nil)
	}
}

func (w *world) readTenant(ctx context.Context, rng *rand.Rand, t *tenant) {
	resp, _, ok := w.get(ctx, t, t.reader(rng), "tenant", restapi.PathTenant, nil)
	if !ok {
		return
	}
	var doc restapi.ResourceDocument[restapi.Tenant]
	if err := resp.Decode(&doc); err != nil || doc.Data.Attributes.Name != t.name || doc.Data.Attributes.Providers.Count > accountsPerTenant {
		w.probs.add("isolation", "GET /tenant as %s: %v, %+v", t.name, err, doc.Data.Attributes)
	}
}

// pickAccepted is one of the tenant's accepted uploads.
func (t *tenant) pickAccepted(rng *rand.Rand) *upload {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byID) == 0 {
		return nil
	}
	n := rng.IntN(len(t.byID))
	for _, u := range t.byID {
		if n == 0 {
			return u
		}
		n--
	}
	return nil
}

// signIns signs the tenants' users in, now and then with a wrong password
// (fewer than the server's 10 failures a minute per address), refreshes and
// signs out, and uses each session.
func (w *world) signIns(ctx context.Context) {
	rng := w.rng()
	lastFail, lastRefresh, lastRevoke := time.Now(), time.Now(), time.Now()
	for sleep(ctx, jitter(rng, 1500*time.Millisecond)) {
		t := w.tenants[rng.IntN(len(w.tenants))]
		switch {
		case time.Since(lastFail) > 10*time.Second:
			lastFail = time.Now()
			user := []string{t.admin.Email, t.viewer.Email}[rng.IntN(2)]
			w.signIn(ctx, "tokens.wrong_password", user, "not-"+t.admin.Password, 401)
		case time.Since(lastRefresh) > 20*time.Second:
			lastRefresh = time.Now()
			t.mu.Lock()
			refresh := t.refresh
			t.mu.Unlock()
			if refresh == "" {
				continue
			}
			body := restapi.NewRequest(restapi.TypeTokensRefresh, restapi.TokenRefreshRequest{Refresh: refresh})
			if tok, ok := w.tokenCall(ctx, "tokens.refresh", restapi.PathTokensRefresh, body, 200); ok {
				t.mu.Lock()
				t.access, t.refresh = tok.Access, tok.Refresh
				t.mu.Unlock()
			}
		case time.Since(lastRevoke) > 30*time.Second:
			lastRevoke = time.Now()
			// A session signed out is refused from then on.
			tok, ok := w.signIn(ctx, "tokens", t.viewer.Email, t.viewer.Password, 200)
			if !ok {
				continue
			}
			body := restapi.NewRequest("tokens-revoke", map[string]string{"token": tok.Access})
			if _, ok := w.tokenCall(ctx, "tokens.revoke", restapi.PathTokensRevoke, body, 204); ok {
				w.get(ctx, nil, as{"Bearer " + tok.Access, nil, "a signed-out session"}, "tenant.signed_out", restapi.PathTenant, nil, 401)
			}
		default:
			admin := rng.IntN(2) == 0
			cred := t.viewer
			if admin {
				cred = t.admin
			}
			tok, ok := w.signIn(ctx, "tokens", cred.Email, cred.Password, 200)
			if !ok {
				continue
			}
			if admin {
				t.mu.Lock()
				t.access, t.refresh = tok.Access, tok.Refresh
				t.mu.Unlock()
			}
			w.readTenantAs(ctx, t, as{"Bearer " + tok.Access, t.userPace, "a new session"})
		}
	}
}

func (w *world) readTenantAs(ctx context.Context, t *tenant, cred as) {
	resp, _, ok := w.get(ctx, t, cred, "tenant", restapi.PathTenant, nil)
	if !ok {
		return
	}
	var doc restapi.ResourceDocument[restapi.Tenant]
	if err := resp.Decode(&doc); err != nil || doc.Data.Attributes.Name != t.name {
		w.probs.add("isolation", "GET /tenant with a session of %s: %v, %+v", t.name, err, doc.Data.Attributes)
	}
}

func (w *world) signIn(ctx context.Context, op, email, password string, want int) (restapi.Token, bool) {
	body := restapi.NewRequest(restapi.TypeTokens, restapi.TokenRequest{Email: email, Password: password})
	return w.tokenCall(ctx, op, restapi.PathTokens, body, want)
}

func (w *world) tokenCall(ctx context.Context, op, path string, body any, want int) (restapi.Token, bool) {
	start := time.Now()
	resp, err := w.api.SendJSON(ctx, http.MethodPost, path, body)
	if ctx.Err() != nil {
		return restapi.Token{}, false
	}
	c := call{op: op, start: start, took: time.Since(start), want: []int{want}, what: path}
	fillCall(&c, resp, err)
	if !w.rec.record(c) || want != 200 {
		return restapi.Token{}, c.status == want
	}
	var doc restapi.ResourceDocument[restapi.Token]
	if err := resp.Decode(&doc); err != nil || doc.Data.Attributes.Access == "" {
		w.probs.add("answer", "%s: %v", op, err)
		return restapi.Token{}, false
	}
	return doc.Data.Attributes, true
}

// crossTenant asks, as one tenant, for another's objects by id, through
// every door: each must be unknown (404), or forbidden where RBAC decides
// (another namespace through kube-apiserver).
func (w *world) crossTenant(ctx context.Context) {
	rng := w.rng()
	for sleep(ctx, jitter(rng, time.Second)) {
		a := w.tenants[rng.IntN(len(w.tenants))]
		b := w.tenants[rng.IntN(len(w.tenants))]
		if a == b {
			continue
		}
		b.mu.Lock()
		finding, provider := b.findingIDs.pick(rng), b.providerIDs.pick(rng)
		b.mu.Unlock()
		var ingestion string
		if u := b.pickAccepted(rng); u != nil {
			ingestion = u.id
		}
		probe := func(op, path, id string) {
			if id == "" {
				return
			}
			if _, status, _ := w.get(ctx, a, a.adminKey(), op, path, nil, 404); status == 200 {
				w.probs.add("isolation", "%s of %s's %s as %s answered 200", op, b.name, id, a.name)
			}
		}
		switch rng.IntN(7) {
		case 0:
			probe("cross.ingestions.get", restapi.PathIngestions+"/"+ingestion, ingestion)
		case 1:
			probe("cross.ingestions.errors", restapi.PathIngestions+"/"+ingestion+"/errors", ingestion)
		case 2:
			probe("cross.findings.get", restapi.PathFindings+"/"+finding, finding)
		case 3:
			probe("cross.providers.get", restapi.PathProviders+"/"+provider, provider)
		case 4:
			if finding != "" {
				w.kubeGet(ctx, a, "cross.kube.findings.get", dataPath(a.ns, "findings/"+finding), "application/json", 404)
			}
		case 5:
			// Another tenant's namespace: RBAC, which the aggregated API
			// asks, forbids it.
			w.kubeGet(ctx, a, "cross.kube.findings.list", dataPath(b.ns, "findings")+"?limit=10", "application/json", 403)
		case 6:
			if finding != "" {
				w.crossTool(ctx, a, "get_finding", map[string]any{"id": finding})
			} else if ingestion != "" {
				w.crossTool(ctx, a, "get_ingestion", map[string]any{"id": ingestion})
			}
		}
	}
}
