package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/store"
)

// listJobs are the Ingestions of TestIngestionList: every phase, dates on
// both sides of a UTC midnight, one job the controller never touched.
type listJob struct {
	name string
	s    jobState
	id   string
	// inserted is the creation second; later jobs are created a second later.
	inserted time.Time
}

func setupListJobs(t *testing.T, b *bareEnv) []*listJob {
	jobs := []*listJob{
		{name: "alpha", s: jobState{file: "alpha.ocsf.json", phase: posturev1.IngestionCompleted, total: 3, processed: 3,
			requested: ptrTime("2026-01-01T10:00:00Z"), started: ptrTime("2026-01-01T10:00:05Z"), completed: ptrTime("2026-01-02T23:30:00Z")}},
		{name: "beta", s: jobState{file: "beta.ocsf.json", phase: posturev1.IngestionFailed, total: 2, processed: 2, invalid: 2,
			requested: ptrTime("2026-01-02T09:00:00Z"), started: ptrTime("2026-01-02T09:00:01Z"), completed: ptrTime("2026-01-03T00:30:00Z")}},
		{name: "gamma", s: jobState{file: "gamma.ocsf.json", phase: posturev1.IngestionProcessing, total: 9, processed: 4, invalid: 1,
			requested: ptrTime("2026-01-03T08:00:00Z"), started: ptrTime("2026-01-03T08:00:01Z")}},
		{name: "delta", s: jobState{file: "delta.ocsf.json", phase: posturev1.IngestionPending, total: 1,
			requested: ptrTime("2026-01-04T12:00:00Z")}},
		{name: "epsilon", s: jobState{file: "epsilon.ocsf.json", total: 7}},
	}
	for i, j := range jobs {
		if i == 3 {
			// inserted_at has the API server's one-second resolution: let the
			// clock pass into the next second so that sorting on it is seen.
			for prev := jobs[i-1].inserted; !time.Now().After(prev.Add(time.Second)); {
				time.Sleep(20 * time.Millisecond)
			}
		}
		j.id = uuid.NewString()
		ing := b.createJob(t, j.id, j.s)
		j.inserted = ing.CreationTimestamp.Time
	}
	if !jobs[3].inserted.After(jobs[2].inserted) {
		t.Fatalf("creation times %v and %v do not differ", jobs[2].inserted, jobs[3].inserted)
	}
	return jobs
}

func (j *listJob) time(field string) *time.Time {
	switch field {
	case "inserted_at":
		return &j.inserted
	case "requested_at":
		if j.s.requested == nil {
			return &j.inserted
		}
		return j.s.requested
	case "started_at":
		return j.s.started
	case "completed_at":
		return j.s.completed
	}
	panic(field)
}

// expectOrder sorts like the API promises: by key, nulls last ascending
// and first descending, ties by id.
func expectOrder(jobs []*listJob, keys ...string) []string {
	sorted := slices.Clone(jobs)
	sort.SliceStable(sorted, func(i, k int) bool {
		for _, key := range keys {
			desc := strings.HasPrefix(key, "-")
			field := strings.TrimPrefix(key, "-")
			a, b := sorted[i].time(field), sorted[k].time(field)
			var c int
			switch {
			case a == nil && b == nil:
			case a == nil:
				c = 1
			case b == nil:
				c = -1
			default:
				c = a.Compare(*b)
			}
			if desc {
				c = -c
			}
			if c != 0 {
				return c < 0
			}
		}
		return sorted[i].id < sorted[k].id
	})
	out := make([]string, len(sorted))
	for i, j := range sorted {
		out[i] = j.id
	}
	return out
}

func idsOf(jobs []*listJob, names ...string) []string {
	var out []string
	for _, n := range names {
		for _, j := range jobs {
			if j.name == n {
				out = append(out, j.id)
			}
		}
	}
	sort.Strings(out)
	return out
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	sort.Strings(out)
	return out
}

func TestIngestionList(t *testing.T) {
	b := startBare(t, bareOpts{})
	a := b.api(t)
	jobs := setupListJobs(t, b)
	byName := map[string]*listJob{}
	for _, j := range jobs {
		byName[j.name] = j
	}

	t.Run("default is every job, newest first", func(t *testing.T) {
		d := a.list("/api/v1/ingestions", "")
		if got, want := d.ids(), expectOrder(jobs, "-inserted_at"); !slices.Equal(got, want) {
			t.Fatalf("order = %v, want %v", got, want)
		}
		if p := d.Meta.Pagination; p.Count != 5 || p.Page != 1 || p.Pages != 1 {
			t.Fatalf("pagination = %+v", *p)
		}
		for _, r := range d.Data {
			if r.Type != "ingestions" || r.Links["self"] != b.URL+"/api/v1/ingestions/"+r.ID {
				t.Fatalf("resource %+v", r)
			}
		}
	})

	t.Run("the untouched job reads as pending with its counted total", func(t *testing.T) {
		d := a.one("/api/v1/ingestions/"+byName["epsilon"].id, "")
		at := d.Data.Attributes
		sum := at["summary"].(map[string]any)
		if at["status"] != "pending" || sum["total"] != 7.0 || sum["processed"] != 0.0 || at["started_at"] != nil ||
			at["completed_at"] != nil || at["requested_at"] != byName["epsilon"].inserted.UTC().Format(time.RFC3339) {
			t.Fatalf("attributes = %v", at)
		}
		d = a.one("/api/v1/ingestions/"+byName["gamma"].id, "")
		at = d.Data.Attributes
		sum = at["summary"].(map[string]any)
		if at["status"] != "processing" || sum["total"] != 9.0 || sum["processed"] != 4.0 || sum["invalid"] != 1.0 ||
			at["started_at"] != "2026-01-03T08:00:01Z" || at["completed_at"] != nil || at["requested_at"] != "2026-01-03T08:00:00Z" {
			t.Fatalf("attributes = %v", at)
		}
	})

	filters := []struct {
		query string
		want  []string
	}{
		{"filter[status]=completed", []string{"alpha"}},
		{"filter[status]=failed", []string{"beta"}},
		{"filter[status]=processing", []string{"gamma"}},
		{"filter[status]=pending", []string{"delta", "epsilon"}},
		{"filter[status__in]=completed,failed", []string{"alpha", "beta"}},
		{"filter[status__in]=pending", []string{"delta", "epsilon"}},
		{"filter[status__in]=processing,%20pending", []string{"gamma", "delta", "epsilon"}},
		{"filter[completed_at]=2026-01-02", []string{"alpha"}},
		{"filter[completed_at]=2026-01-03", []string{"beta"}},
		{"filter[completed_at]=2026-01-01", nil},
		{"filter[inserted_at]=" + jobs[0].inserted.UTC().Format(time.DateOnly), datesOn(jobs, jobs[0].inserted)},
		{"filter[inserted_at]=2020-01-01", nil},
		{"filter[search]=beta", []string{"beta"}},
		{"filter[search]=BETA.OCSF", []string{"beta"}},
		{"filter[search]=" + byName["gamma"].id[:13], []string{"gamma"}},
		{"filter[search]=Processing", []string{"gamma"}},
		{"filter[search]=.ocsf.json", []string{"alpha", "beta", "gamma", "delta", "epsilon"}},
		{"filter[search]=nothing-matches", nil},
		{"filter[status]=pending&filter[search]=delta", []string{"delta"}},
		{"filter[status__in]=completed,failed&filter[completed_at]=2026-01-03", []string{"beta"}},
	}
	for _, tc := range filters {
		t.Run(tc.query, func(t *testing.T) {
			d := a.list("/api/v1/ingestions", tc.query)
			if got, want := sorted(d.ids()), idsOf(jobs, tc.want...); !slices.Equal(got, want) {
				t.Fatalf("ids = %v, want %v (%v)", got, want, tc.want)
			}
			if d.Meta.Pagination.Count != len(tc.want) {
				t.Fatalf("count = %d", d.Meta.Pagination.Count)
			}
		})
	}

	for _, key := range []string{"inserted_at", "requested_at", "started_at", "completed_at"} {
		for _, k := range []string{key, "-" + key} {
			t.Run("sort="+k, func(t *testing.T) {
				d := a.list("/api/v1/ingestions", "sort="+k)
				if got, want := d.ids(), expectOrder(jobs, k); !slices.Equal(got, want) {
					t.Fatalf("order = %v, want %v", got, want)
				}
			})
		}
	}
	t.Run("sort by two keys", func(t *testing.T) {
		// completed_at is null for three jobs; requested_at orders those.
		d := a.list("/api/v1/ingestions", "sort=completed_at,-requested_at")
		want := expectOrder(jobs, "completed_at", "-requested_at")
		if want[0] != byName["alpha"].id || want[1] != byName["beta"].id || !slices.Equal(d.ids(), want) {
			t.Fatalf("order = %v, want %v", d.ids(), want)
		}
	})

	t.Run("fields[ingestions] trims attributes", func(t *testing.T) {
		for _, tc := range []struct {
			fields string
			want   []string
		}{
			{"status", []string{"status"}},
			{"status,summary", []string{"status", "summary"}},
			{"requested_at,started_at,completed_at", []string{"completed_at", "requested_at", "started_at"}},
			{"status,summary,requested_at,started_at,completed_at", []string{"completed_at", "requested_at", "started_at", "status", "summary"}},
		} {
			for _, r := range a.list("/api/v1/ingestions", "fields[ingestions]="+tc.fields).Data {
				if got := keys(r.Attributes); !slices.Equal(got, tc.want) {
					t.Fatalf("fields=%s: attributes %v, want %v", tc.fields, got, tc.want)
				}
			}
			one := a.one("/api/v1/ingestions/"+byName["alpha"].id, "fields[ingestions]="+tc.fields)
			if got := keys(one.Data.Attributes); !slices.Equal(got, tc.want) {
				t.Fatalf("GET one fields=%s: attributes %v", tc.fields, got)
			}
		}
	})

	bad := []struct {
		path, query, param string
		fragments          []string
	}{
		{"/api/v1/ingestions", "filter[status]=done", "filter[status]", []string{`"done"`, "pending, processing, completed, failed"}},
		{"/api/v1/ingestions", "filter[status__in]=completed,done", "filter[status__in]", []string{`"done"`}},
		{"/api/v1/ingestions", "filter[status__in]=", "filter[status__in]", nil},
		{"/api/v1/ingestions", "filter[completed_at]=2026-13-01", "filter[completed_at]", []string{"2026-13-01"}},
		{"/api/v1/ingestions", "filter[inserted_at]=yesterday", "filter[inserted_at]", []string{"yesterday"}},
		{"/api/v1/ingestions", "filter[owner]=me", "filter[owner]", []string{`"owner"`, "completed_at, inserted_at, search, status, status__in"}},
		{"/api/v1/ingestions", "sort=size", "sort", []string{`"size"`}},
		{"/api/v1/ingestions", "sort=-inserted_at,+status", "sort", nil},
		{"/api/v1/ingestions", "fields[ingestions]=status,file", "fields[ingestions]", []string{`"file"`}},
		{"/api/v1/ingestions", "fields[findings]=uid", "fields[findings]", nil},
		{"/api/v1/ingestions", "page[size]=101", "page[size]", []string{"1 to 100"}},
		{"/api/v1/ingestions", "page[size]=0", "page[size]", nil},
		{"/api/v1/ingestions", "page[size]=ten", "page[size]", nil},
		{"/api/v1/ingestions", "page[number]=0", "page[number]", nil},
		{"/api/v1/ingestions", "page[number]=-1", "page[number]", nil},
		{"/api/v1/ingestions", "page[offset]=10", "page[offset]", nil},
		{"/api/v1/ingestions", "include=errors", "include", nil},
		{"/api/v1/ingestions/" + jobs[0].id, "filter[status]=completed", "filter[status]", nil},
		{"/api/v1/ingestions/" + jobs[0].id, "fields[ingestions]=bogus", "fields[ingestions]", nil},
		{"/api/v1/ingestions/" + jobs[0].id + "/errors", "sort=code", "sort", nil},
		{"/api/v1/ingestions/" + jobs[0].id + "/errors", "filter[code]=x", "filter[code]", nil},
		{"/api/v1/ingestions/" + jobs[0].id + "/errors", "page[size]=1000", "page[size]", nil},
		{"/api/v1/ingestions/" + jobs[0].id + "/errors", "fields[ingestion-errors]=why", "fields[ingestion-errors]", nil},
	}
	for _, tc := range bad {
		t.Run("400 "+tc.query, func(t *testing.T) {
			wantError(t, a.get(tc.path, tc.query), 400, "invalid", "parameter:"+tc.param, tc.fragments...)
		})
	}

	t.Run("404 for unknown ids", func(t *testing.T) {
		for _, id := range []string{uuid.NewString(), "not-a-uuid", strings.ToUpper(jobs[0].id) + "x"} {
			wantError(t, a.get("/api/v1/ingestions/"+id, ""), 404, "not_found", "parameter:id", id)
			wantError(t, a.get("/api/v1/ingestions/"+id+"/errors", ""), 404, "not_found", "parameter:id", id)
		}
	})
	t.Run("404 for another tenant's job", func(t *testing.T) {
		other := startBare(t, bareOpts{})
		theirs := other.createJob(t, uuid.NewString(), jobState{total: 1})
		wantError(t, a.get("/api/v1/ingestions/"+theirs.Name, ""), 404, "not_found", "parameter:id")
		wantError(t, a.get("/api/v1/ingestions/"+theirs.Name+"/errors", ""), 404, "not_found", "parameter:id")
		if d := a.list("/api/v1/ingestions", "filter[search]="+theirs.Name); len(d.Data) != 0 {
			t.Fatalf("another tenant's job is listed: %v", d.ids())
		}
	})
	t.Run("404 for a page past the end", func(t *testing.T) {
		wantError(t, a.get("/api/v1/ingestions", "page[number]=2"), 404, "not_found", "parameter:page[number]", "page 2", "1 pages")
		// An empty result is one empty page, not a 404.
		d := a.list("/api/v1/ingestions", "filter[search]=nothing&page[number]=1")
		if len(d.Data) != 0 || d.Meta.Pagination.Pages != 1 || d.Meta.Pagination.Count != 0 {
			t.Fatalf("empty list = %+v", d)
		}
	})
}

func datesOn(jobs []*listJob, day time.Time) []string {
	var out []string
	for _, j := range jobs {
		if j.inserted.UTC().Format(time.DateOnly) == day.UTC().Format(time.DateOnly) {
			out = append(out, j.name)
		}
	}
	return out
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestPagination walks 25 jobs with the default, a custom and the largest
// page size, following links.
func TestPagination(t *testing.T) {
	b := startBare(t, bareOpts{})
	a := b.api(t)
	var all []string
	for range 25 {
		id := uuid.NewString()
		b.createJob(t, id, jobState{total: 1})
		all = append(all, id)
	}
	sort.Strings(all)

	t.Run("default page size is 10", func(t *testing.T) {
		var seen []string
		next := "/api/v1/ingestions?filter[search]=ocsf"
		for page := 1; ; page++ {
			u, err := url.Parse(next)
			if err != nil {
				t.Fatal(err)
			}
			d := a.list(u.Path, u.RawQuery)
			p := d.Meta.Pagination
			want := min(10, 25-(page-1)*10)
			if len(d.Data) != want || p.Page != page || p.Pages != 3 || p.Count != 25 {
				t.Fatalf("page %d: %d items, pagination %+v", page, len(d.Data), *p)
			}
			if d.Links.First != pageLink(b.URL, 1) || d.Links.Last == nil || *d.Links.Last != pageLink(b.URL, 3) {
				t.Fatalf("links = %+v", *d.Links)
			}
			if page == 1 && d.Links.Prev != nil || page > 1 && (d.Links.Prev == nil || *d.Links.Prev != pageLink(b.URL, page-1)) {
				t.Fatalf("page %d: prev = %v", page, d.Links.Prev)
			}
			seen = append(seen, d.ids()...)
			if d.Links.Next == nil {
				if page != 3 {
					t.Fatalf("no next link on page %d", page)
				}
				break
			}
			if *d.Links.Next != pageLink(b.URL, page+1) {
				t.Fatalf("next = %s", *d.Links.Next)
			}
			next = strings.TrimPrefix(*d.Links.Next, b.URL)
		}
		if !slices.Equal(sorted(seen), all) {
			t.Fatalf("pages did not give every job once: %d seen", len(seen))
		}
	})
	t.Run("page[size]", func(t *testing.T) {
		for _, tc := range []struct{ size, pages, last int }{{1, 25, 1}, {7, 4, 4}, {25, 1, 25}, {100, 1, 25}} {
			d := a.list("/api/v1/ingestions", fmt.Sprintf("page[size]=%d&page[number]=%d", tc.size, tc.pages))
			if len(d.Data) != tc.last || d.Meta.Pagination.Pages != tc.pages || d.Links.Next != nil {
				t.Fatalf("size %d: last page has %d items, %+v", tc.size, len(d.Data), *d.Meta.Pagination)
			}
			if !strings.Contains(d.Links.First, fmt.Sprintf("page%%5Bsize%%5D=%d", tc.size)) {
				t.Fatalf("links drop page[size]: %s", d.Links.First)
			}
		}
		wantError(t, a.get("/api/v1/ingestions", "page[size]=7&page[number]=5"), 404, "not_found", "parameter:page[number]")
	})
}

func pageLink(base string, n int) string {
	return base + "/api/v1/ingestions?" + url.Values{"filter[search]": {"ocsf"}, "page[number]": {fmt.Sprint(n)}}.Encode()
}

// TestIngestionErrorsPages checks the error list: ingestion-level rows first, then
// by record, paginated, trimmed by fields[ingestion-errors].
func TestIngestionErrorsPages(t *testing.T) {
	b := startBare(t, bareOpts{})
	a := b.api(t)
	id := uuid.NewString()
	b.createJob(t, id, jobState{phase: posturev1.IngestionFailed, total: 14, processed: 14, invalid: 14,
		started: ptrTime("2026-01-01T00:00:00Z"), completed: ptrTime("2026-01-01T00:00:01Z")})
	ctx := context.Background()
	if err := b.Store.StartRun(ctx, b.Tenant, id, 1, 14); err != nil {
		t.Fatal(err)
	}
	var rows []store.IngestionError
	for i := 13; i >= 0; i-- { // written out of order: the list sorts
		idx := i
		rows = append(rows, store.IngestionError{RecordIndex: &idx, FindingUID: fmt.Sprintf("uid-%02d", i),
			Code: "missing_field", Detail: "time is required", Pointer: "/time"})
	}
	rows = append(rows, store.IngestionError{Code: "no_records", Detail: "none of the 14 records is valid"})
	if err := b.Store.WriteBatch(ctx, b.Tenant, id, 1, store.Batch{Errors: rows}); err != nil {
		t.Fatal(err)
	}

	p1 := a.list("/api/v1/ingestions/"+id+"/errors", "")
	if len(p1.Data) != 10 || p1.Meta.Pagination.Count != 15 || p1.Meta.Pagination.Pages != 2 || p1.Links.Next == nil || p1.Links.Prev != nil {
		t.Fatalf("page 1: %d rows, %+v", len(p1.Data), *p1.Meta.Pagination)
	}
	first := p1.Data[0].Attributes
	if p1.Data[0].Type != "ingestion-errors" || first["record_index"] != nil || first["code"] != "no_records" || first["pointer"] != "" {
		t.Fatalf("first row = %v; want the ingestion-level error", first)
	}
	for i, r := range p1.Data[1:] {
		if r.Attributes["record_index"] != float64(i) || r.Attributes["finding_uid"] != fmt.Sprintf("uid-%02d", i) ||
			r.Attributes["pointer"] != "/time" || r.Attributes["code"] != "missing_field" {
			t.Fatalf("row %d = %v", i+1, r.Attributes)
		}
	}
	p2 := a.list("/api/v1/ingestions/"+id+"/errors", "page[number]=2")
	if len(p2.Data) != 5 || p2.Links.Next != nil || p2.Links.Prev == nil || p2.Data[4].Attributes["record_index"] != 13.0 {
		t.Fatalf("page 2 = %+v", p2)
	}
	wantError(t, a.get("/api/v1/ingestions/"+id+"/errors", "page[number]=3"), 404, "not_found", "parameter:page[number]")
	p := a.list("/api/v1/ingestions/"+id+"/errors", "page[size]=100&fields[ingestion-errors]=code,record_index")
	if len(p.Data) != 15 || !slices.Equal(keys(p.Data[3].Attributes), []string{"code", "record_index"}) {
		t.Fatalf("trimmed page = %+v", p.Data[3])
	}
	// A job without a run has no errors yet: an empty first page.
	fresh := uuid.NewString()
	b.createJob(t, fresh, jobState{total: 1})
	if d := a.list("/api/v1/ingestions/"+fresh+"/errors", ""); len(d.Data) != 0 || d.Meta.Pagination.Count != 0 {
		t.Fatalf("errors of a fresh job = %+v", d)
	}
}

// TestProtocolErrors covers what every endpoint shares: 401, 402, 403, 406,
// 405, and 404 for unknown paths.
func TestProtocolErrors(t *testing.T) {
	b := startBare(t, bareOpts{})
	a := b.api(t)
	job := uuid.NewString()
	b.createJob(t, job, jobState{total: 1})
	finding := uuid.NewString()

	reads := []string{"/api/v1/findings", "/api/v1/findings/" + finding, "/api/v1/scans", "/api/v1/providers", "/api/v1/providers/aws-1"}
	ingestion := []string{"/api/v1/ingestions", "/api/v1/ingestions/" + job, "/api/v1/ingestions/" + job + "/errors"}

	t.Run("401", func(t *testing.T) {
		for _, path := range append(slices.Clone(reads), ingestion...) {
			for _, h := range []string{"", "Api-Key pk_wrong.key", "Bearer x", "Basic dXNlcjpwdw==", "Api-Key", a.auth + "x"} {
				anon := &api{t: t, url: b.URL, auth: h}
				r := anon.get(path, "")
				wantError(t, r, 401, "not_authenticated", "header:Authorization")
				if r.header.Get("WWW-Authenticate") == "" {
					t.Fatalf("401 without WWW-Authenticate")
				}
			}
		}
		anon := &api{t: t, url: b.URL}
		r := anon.upload("r.ocsf.json", []byte("[]"))
		wantError(t, r, 401, "not_authenticated", "header:Authorization", "Api-Key")
	})
	t.Run("402 without a subscription, for reads too", func(t *testing.T) {
		u := startBare(t, bareOpts{principal: func(p *auth.Principal) { p.Subscribed = false }})
		ua := u.api(t)
		for _, path := range append(slices.Clone(reads), "/api/v1/ingestions") {
			wantError(t, ua.get(path, ""), 402, "subscription_required", "", "subscription")
		}
		wantError(t, ua.upload("r.ocsf.json", []byte("[]")), 402, "subscription_required", "")
	})
	t.Run("403 without manage_ingestions, reads allowed", func(t *testing.T) {
		u := startBare(t, bareOpts{principal: func(p *auth.Principal) {
			p.Permissions = map[posturev1.Permission]bool{posturev1.PermissionManageProviders: true}
		}})
		ua := u.api(t)
		id := uuid.NewString()
		u.createJob(t, id, jobState{total: 1})
		for _, path := range []string{"/api/v1/ingestions", "/api/v1/ingestions/" + id, "/api/v1/ingestions/" + id + "/errors"} {
			wantError(t, ua.get(path, ""), 403, "permission_denied", "", "manage_ingestions")
		}
		wantError(t, ua.upload("r.ocsf.json", []byte("[]")), 403, "permission_denied", "", "manage_ingestions")
		for _, path := range []string{"/api/v1/findings", "/api/v1/scans", "/api/v1/providers"} {
			ua.list(path, "")
		}
	})
	t.Run("406", func(t *testing.T) {
		for _, path := range append(slices.Clone(reads), ingestion...) {
			for _, accept := range []string{"text/html", "application/xml, text/plain;q=0.5"} {
				r := a.request(http.MethodGet, path, nil, http.Header{"Accept": {accept}})
				wantError(t, r, 406, "not_acceptable", "header:Accept")
			}
		}
		// What clients really send is accepted.
		for _, accept := range []string{"*/*", "application/json", "application/vnd.api+json", "text/html, application/*;q=0.1"} {
			if r := a.request(http.MethodGet, "/api/v1/ingestions", nil, http.Header{"Accept": {accept}}); r.status != 200 {
				t.Fatalf("Accept %q: %s", accept, r)
			}
		}
	})
	t.Run("405", func(t *testing.T) {
		for _, tc := range []struct{ method, path, allow string }{
			{http.MethodDelete, "/api/v1/ingestions", "GET, POST"},
			{http.MethodPut, "/api/v1/ingestions", "GET, POST"},
			{http.MethodPost, "/api/v1/ingestions/" + job, "GET"},
			{http.MethodDelete, "/api/v1/ingestions/" + job, "GET"},
			{http.MethodPost, "/api/v1/ingestions/" + job + "/errors", "GET"},
			{http.MethodPost, "/api/v1/findings", "GET"},
			{http.MethodPatch, "/api/v1/findings/" + finding, "GET"},
			{http.MethodPost, "/api/v1/scans", "GET"},
			{http.MethodPost, "/api/v1/providers", "GET"},
			{http.MethodDelete, "/api/v1/providers/aws-1", "GET"},
			{http.MethodPost, "/api/v1/schema", "GET, HEAD"},
		} {
			r := a.request(tc.method, tc.path, nil, nil)
			wantError(t, r, 405, "method_not_allowed", "", tc.method)
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Fatalf("%s %s: Allow = %q, want %q", tc.method, tc.path, got, tc.allow)
			}
		}
	})
	t.Run("404 for unknown paths", func(t *testing.T) {
		for _, path := range []string{"/api/v1/nothing", "/api/v2/ingestions", "/api/v1/ingestions/" + job + "/findings", "/api/v1/scans/x"} {
			wantError(t, a.get(path, ""), 404, "not_found", "", path)
		}
	})
}
