package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	datav1 "github.com/posture-dev/posture/api/data/v1alpha1"
)

// tableAccept is what kubectl get asks for: the server's table.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

var (
	kubeClientsMu sync.Mutex
	kubeClients   = map[string]*http.Client{}
)

// kubeClient is an HTTP client of kube-apiserver as user (impersonated by
// the control plane's administrator, as kubectl --as does).
func (w *world) kubeClient(user string) (*http.Client, error) {
	kubeClientsMu.Lock()
	defer kubeClientsMu.Unlock()
	if c := kubeClients[user]; c != nil {
		return c, nil
	}
	cfg := rest.CopyConfig(w.kube)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cfg.Timeout = 2 * time.Minute
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	kubeClients[user] = c
	return c, nil
}

// kubeDoAs sends one request to kube-apiserver as user.
func (w *world) kubeDoAs(ctx context.Context, user, method, path, accept string, body io.Reader) (int, []byte, error) {
	hc, err := w.kubeClient(user)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(w.kube.Host, "/")+path, body)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, b, err
}

func (w *world) kubeDo(ctx context.Context, t *tenant, method, path, accept string, body io.Reader) (int, []byte, error) {
	return w.kubeDoAs(ctx, t.kubeUser, method, path, accept, body)
}

// kubeReason is a Kubernetes error's reason (NotFound, Forbidden, …) and
// message.
func kubeReason(status int, body []byte) (string, error) {
	if status >= 200 && status < 300 {
		return "", nil
	}
	var s metav1.Status
	if json.Unmarshal(body, &s) == nil && s.Reason != "" {
		return string(s.Reason), errors.New(s.Message)
	}
	return "", fmt.Errorf("%.200s", body)
}

func dataPath(ns, resource string) string {
	return "/apis/data.posture.dev/v1alpha1/namespaces/" + ns + "/" + resource
}

// kubeReader reads the tenant's findings, scans and ingestion errors
// through kube-apiserver, as kubectl get does, as the tenant's user.
func (w *world) kubeReader(ctx context.Context, t *tenant) {
	rng := w.rng()
	shapes := []struct {
		name string
		f    func(context.Context, *rand.Rand, *tenant)
	}{
		{"kube.findings.table", w.kubeFindingsTable},
		{"kube.findings.list", w.kubeFindingsList},
		{"kube.findings.get", w.kubeFindingGet},
		{"kube.scans.list", w.kubeScans},
		{"kube.ingestionerrors.list", w.kubeErrors},
		{"kube.ingestions.list", w.kubeIngestions},
	}
	for sleep(ctx, jitter(rng, 700*time.Millisecond)) {
		s := shapes[rng.IntN(len(shapes))]
		s.f(ctx, rng, t)
	}
}

// kubeGet reads path as the tenant's user and records it as op.
func (w *world) kubeGet(ctx context.Context, t *tenant, op, path, accept string, want ...int) ([]byte, bool) {
	if len(want) == 0 {
		want = []int{200}
	}
	if ctx.Err() != nil {
		return nil, false
	}
	// A read begun before the load ends runs to its answer: cancelled, it
	// would end as kube-apiserver's cancellation of the aggregated API's
	// handler, which that server logs as an error ("http: Handler
	// timeout"), the soak's own doing rather than the system's.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	start := time.Now()
	status, body, err := w.kubeDo(rctx, t, http.MethodGet, path, accept, nil)
	c := call{op: op, start: start, took: time.Since(start), status: status, err: err, want: want, what: path}
	if err == nil {
		c.code, c.err = kubeReason(status, body)
	}
	ok := w.rec.record(c)
	if ok && status == 200 {
		w.noForeignAccounts(t, op, body)
	}
	return body, ok && status == 200
}

func (w *world) kubeFindingsTable(ctx context.Context, rng *rand.Rand, t *tenant) {
	q := url.Values{"limit": {"100"}}
	if rng.IntN(2) == 0 {
		q.Set("fieldSelector", "severity=Critical,statusCode=FAIL")
	}
	body, ok := w.kubeGet(ctx, t, "kube.findings.table", dataPath(t.ns, "findings")+"?"+q.Encode(), tableAccept)
	if !ok {
		return
	}
	var tbl metav1.Table
	if err := json.Unmarshal(body, &tbl); err != nil || len(tbl.ColumnDefinitions) < 6 {
		w.probs.add("kube answer", "findings table of %s: %v (%d columns)", t.ns, err, len(tbl.ColumnDefinitions))
		return
	}
	for _, r := range tbl.Rows {
		provider, _ := r.Cells[5].(string)
		if _, acct, _ := strings.Cut(provider, "/"); !t.ownsAccount(acct) {
			w.probs.add("isolation", "kubectl get findings -n %s lists a finding of provider %s", t.ns, provider)
		}
	}
}

func (w *world) kubeFindingsList(ctx context.Context, rng *rand.Rand, t *tenant) {
	q := url.Values{"limit": {"50"}}
	switch rng.IntN(3) {
	case 0:
		q.Set("fieldSelector", "providerUID="+t.accounts[rng.IntN(len(t.accounts))])
	case 1:
		q.Set("fieldSelector", "statusCode=PASS")
	}
	// Two pages, following continue as kubectl --chunk-size does.
	for page := 0; page < 2; page++ {
		body, ok := w.kubeGet(ctx, t, "kube.findings.list", dataPath(t.ns, "findings")+"?"+q.Encode(), "application/json")
		if !ok {
			return
		}
		var list datav1.FindingList
		if err := json.Unmarshal(body, &list); err != nil {
			w.probs.add("kube answer", "findings of %s: %v", t.ns, err)
			return
		}
		ids := make([]string, 0, len(list.Items))
		for _, f := range list.Items {
			if !t.ownsAccount(f.ProviderUID) || f.Namespace != t.ns {
				w.probs.add("isolation", "findings of %s list %s/%s of account %s", t.ns, f.Namespace, f.Name, f.ProviderUID)
			}
			t.saw(f.Ingestion, "kube findings")
			ids = append(ids, f.Name)
		}
		t.mu.Lock()
		t.findingIDs.add(ids...)
		t.mu.Unlock()
		if list.Continue == "" {
			return
		}
		q.Set("continue", list.Continue)
	}
}

func (w *world) kubeFindingGet(ctx context.Context, rng *rand.Rand, t *tenant) {
	t.mu.Lock()
	id := t.findingIDs.pick(rng)
	t.mu.Unlock()
	if id == "" {
		return
	}
	body, ok := w.kubeGet(ctx, t, "kube.findings.get", dataPath(t.ns, "findings/"+id), "application/json")
	if !ok {
		return
	}
	var f datav1.Finding
	if err := json.Unmarshal(body, &f); err != nil || f.Name != id || !t.ownsAccount(f.ProviderUID) || f.Record == nil {
		w.probs.add("kube answer", "finding %s of %s: %v, name %s, account %s, record %t", id, t.ns, err, f.Name, f.ProviderUID, f.Record != nil)
	}
}

func (w *world) kubeScans(ctx context.Context, rng *rand.Rand, t *tenant) {
	q := url.Values{"limit": {"100"}}
	if rng.IntN(2) == 0 {
		q.Set("fieldSelector", "providerUID="+t.accounts[rng.IntN(len(t.accounts))])
	}
	body, ok := w.kubeGet(ctx, t, "kube.scans.list", dataPath(t.ns, "scans")+"?"+q.Encode(), "application/json")
	if !ok {
		return
	}
	var list datav1.ScanList
	if err := json.Unmarshal(body, &list); err != nil {
		w.probs.add("kube answer", "scans of %s: %v", t.ns, err)
		return
	}
	for _, s := range list.Items {
		if !t.ownsAccount(s.ProviderUID) {
			w.probs.add("isolation", "scans of %s list %s of account %s", t.ns, s.Name, s.ProviderUID)
		}
		t.saw(s.Ingestion, "kube scans")
	}
}

// kubeErrors lists an ended mixed ingestion's errors through
// kube-apiserver and holds them to the model.
func (w *world) kubeErrors(ctx context.Context, rng *rand.Rand, t *tenant) {
	u := t.pickChecked(rng, func(u *upload) bool { return len(u.spec.bad) > 0 })
	if u == nil {
		return
	}
	q := url.Values{"fieldSelector": {"ingestion=" + u.id}, "limit": {"500"}}
	body, ok := w.kubeGet(ctx, t, "kube.ingestionerrors.list", dataPath(t.ns, "ingestionerrors")+"?"+q.Encode(), "application/json")
	if !ok {
		return
	}
	var list datav1.IngestionErrorList
	if err := json.Unmarshal(body, &list); err != nil {
		w.probs.add("kube answer", "ingestion errors of %s: %v", u.id, err)
		return
	}
	want := u.spec.wantErrors()
	got := make([]errorRow, 0, len(list.Items))
	for _, e := range list.Items {
		idx := -1
		if e.RecordIndex != nil {
			idx = *e.RecordIndex
		}
		got = append(got, errorRow{idx, e.Code})
		if e.Ingestion != u.id {
			w.probs.add("isolation", "ingestionerrors of %s list a row of ingestion %s", u.id, e.Ingestion)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		w.probs.add("refused records' reasons", "kubectl get ingestionerrors of %s (%s): %v, want %v", u.id, u.name, got, want)
	}
}

func (w *world) kubeIngestions(ctx context.Context, _ *rand.Rand, t *tenant) {
	body, ok := w.kubeGet(ctx, t, "kube.ingestions.list", "/apis/posture.dev/v1alpha1/namespaces/"+t.ns+"/ingestions?limit=100", "application/json")
	if !ok {
		return
	}
	var list struct {
		Items []struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		w.probs.add("kube answer", "ingestions of %s: %v", t.ns, err)
		return
	}
	for _, i := range list.Items {
		t.saw(i.Metadata.Name, "kubectl get ingestions")
	}
}

// pickChecked is an ingestion of the tenant that ended and was checked.
func (t *tenant) pickChecked(rng *rand.Rand, f func(*upload) bool) *upload {
	t.mu.Lock()
	defer t.mu.Unlock()
	var c []*upload
	for _, u := range t.byID {
		u.mu.Lock()
		ok := u.checked && f(u)
		u.mu.Unlock()
		if ok {
			c = append(c, u)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[rng.IntN(len(c))]
}
