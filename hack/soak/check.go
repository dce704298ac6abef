package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
)

// checked is what the final checks covered.
type checked struct {
	uploads, accepted, refused     int
	unknownAccepted, unknownNot    int
	records, validRecords, invalid int
	reuploads                      int
	stored                         int64
	seenIngestions                 int
}

// check is the end of the run, once the load stopped and every followed
// ingestion ended: it settles the uploads that got no answer, then holds
// the store to the model (every accepted record once, nothing else) and
// every tenant's objects to the tenant.
func (w *world) check(ctx context.Context) checked {
	var sum checked
	for _, t := range w.tenants {
		w.settleUploads(ctx, t, &sum)
	}
	waitGroup(ctx, &w.followers)
	for _, t := range w.tenants {
		for _, u := range t.uploads {
			sum.uploads++
			u.mu.Lock()
			st, ok, ended := u.state, u.checked, u.ended
			u.mu.Unlock()
			switch st {
			case stateAccepted:
				sum.accepted++
				sum.records += u.spec.n
				sum.invalid += len(u.spec.bad)
				if u.kind == "reupload" {
					sum.reuploads++
				} else {
					sum.validRecords += u.spec.valid()
				}
				if !ok {
					w.probs.add("ingestion not checked", "%s (%s): ended %t", u.id, u.name, ended)
				}
			case stateRefused:
				sum.refused++
			}
		}
		w.checkProviders(ctx, t)
		t.mu.Lock()
		for id, where := range t.seenIngestions {
			sum.seenIngestions++
			if t.byID[id] == nil {
				w.probs.add("isolation", "%s showed %s ingestion %s, none of its uploads", where, t.name, id)
			}
		}
		t.mu.Unlock()
	}
	w.checkStore(ctx, &sum)
	return sum
}

// settleUploads finds the Ingestion of each upload by its file name:
// an accepted one must have one, a refused one none, and one that got no
// answer (the manager died under it) is accepted exactly if it has one.
func (w *world) settleUploads(ctx context.Context, t *tenant, sum *checked) {
	var list posturev1.IngestionList
	if err := w.sys.Admin.List(ctx, &list, client.InNamespace(t.ns)); err != nil {
		w.probs.add("settle", "list the Ingestions of %s: %v", t.ns, err)
		return
	}
	byName := map[string]*posturev1.Ingestion{}
	for i := range list.Items {
		ing := &list.Items[i]
		if ing.Spec.Source.Upload == nil {
			continue
		}
		name := ing.Spec.Source.Upload.Filename
		if prev := byName[name]; prev != nil {
			w.probs.add("exactly once", "uploads of %s made two Ingestions, %s and %s", name, prev.Name, ing.Name)
		}
		byName[name] = ing
	}
	sent := map[string]bool{}
	for _, u := range t.uploads {
		sent[u.name] = true
		ing := byName[u.name]
		u.mu.Lock()
		st, id := u.state, u.id
		u.mu.Unlock()
		switch {
		case st == stateAccepted && (ing == nil || ing.Name != id):
			w.probs.add("exactly once", "%s was accepted as %s, which is not an Ingestion of %s", u.name, id, t.ns)
		case st == stateRefused && ing != nil:
			w.probs.add("refusal reason", "%s was refused (%d) yet made Ingestion %s", u.name, u.wantStatus, ing.Name)
		case st == stateUnknown && ing != nil && u.spec != nil && u.wantStatus/100 == 2:
			sum.unknownAccepted++
			w.accepted(u, ing.Name)
		case st == stateUnknown && ing != nil:
			w.probs.add("refusal reason", "%s, which must be refused, made Ingestion %s", u.name, ing.Name)
		case st == stateUnknown:
			sum.unknownNot++
			u.mu.Lock()
			u.state = stateRefused
			u.mu.Unlock()
		}
	}
	for name, ing := range byName {
		if !sent[name] {
			w.probs.add("exactly once", "Ingestion %s/%s of %s, which nobody uploaded", t.ns, ing.Name, name)
		}
	}
}

// checkProviders: the tenant is billed for exactly its accounts, each
// once.
func (w *world) checkProviders(ctx context.Context, t *tenant) {
	var list posturev1.ProviderList
	if err := w.sys.Admin.List(ctx, &list, client.InNamespace(t.ns)); err != nil {
		w.probs.add("billing", "list the Providers of %s: %v", t.ns, err)
		return
	}
	seen := map[string]int{}
	for _, p := range list.Items {
		seen[p.Spec.UID]++
		if !t.ownsAccount(p.Spec.UID) {
			w.probs.add("isolation", "%s has Provider %s of account %s", t.ns, p.Name, p.Spec.UID)
		}
	}
	for _, a := range t.accounts {
		if seen[a] != 1 {
			w.probs.add("billing", "%s has %d Providers of account %s, want 1", t.ns, seen[a], a)
		}
	}
	var tn posturev1.Tenant
	if err := w.sys.Admin.Get(ctx, client.ObjectKey{Name: t.name}, &tn); err != nil {
		w.probs.add("billing", "read Tenant %s: %v", t.name, err)
	} else if int(tn.Status.Providers) != len(t.accounts) {
		w.probs.add("billing", "Tenant %s bills %d providers, want %d", t.name, tn.Status.Providers, len(t.accounts))
	}
}

// checkStore compares the findings table with the model: the uid of every
// valid record of every accepted upload, exactly once, under its tenant,
// and nothing else; scans and error rows of the tenant's own.
func (w *world) checkStore(ctx context.Context, sum *checked) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		w.probs.add("store", "connect: %v", err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE soak_expected (tenant text COLLATE "C" NOT NULL, uid text COLLATE "C" NOT NULL)`); err != nil {
		w.probs.add("store", "%v", err)
		return
	}
	rows := make(chan []any, 1024)
	go func() {
		defer close(rows)
		for _, t := range w.tenants {
			for _, u := range t.uploads {
				u.mu.Lock()
				accepted := u.state == stateAccepted
				u.mu.Unlock()
				if accepted {
					u.spec.validUIDs(t.gen, func(uid string) { rows <- []any{t.name, uid} })
				}
			}
		}
	}()
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if r, ok := <-rows; ok {
			return r, nil
		}
		return nil, nil
	})
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"soak_expected"}, []string{"tenant", "uid"}, src); err != nil {
		w.probs.add("store", "copy the expected uids: %v", err)
		for range rows {
		}
		return
	}
	if _, err := conn.Exec(ctx, `CREATE INDEX ON soak_expected (tenant, uid); ANALYZE soak_expected`); err != nil {
		w.probs.add("store", "%v", err)
		return
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM findings`).Scan(&sum.stored); err != nil {
		w.probs.add("store", "%v", err)
		return
	}
	queries := []struct{ kind, what, sql string }{
		{"exactly once", "an accepted record is not stored",
			`SELECT e.tenant, e.uid FROM (SELECT DISTINCT tenant, uid FROM soak_expected) e
			 WHERE NOT EXISTS (SELECT 1 FROM findings f WHERE f.tenant = e.tenant AND f.uid = e.uid)`},
		{"exactly once", "a finding no accepted record holds",
			`SELECT f.tenant, f.uid FROM findings f
			 WHERE NOT EXISTS (SELECT 1 FROM soak_expected e WHERE e.tenant = f.tenant AND e.uid = f.uid)`},
		{"exactly once", "a record stored more than once",
			`SELECT tenant, uid || ' ×' || count(*) FROM findings GROUP BY tenant, uid HAVING count(*) > 1`},
	}
	for _, q := range queries {
		w.eachRow(ctx, conn, q.sql, func(tenant, detail string) {
			w.probs.add(q.kind, "%s: %s, %s", q.what, tenant, detail)
		})
	}
	own := map[string]*tenant{}
	for _, t := range w.tenants {
		own[t.name] = t
	}
	w.eachRow(ctx, conn, `SELECT DISTINCT tenant, provider_uid FROM findings`, func(tenant, acct string) {
		if t := own[tenant]; t == nil || !t.ownsAccount(acct) {
			w.probs.add("isolation", "findings of %s name account %s", tenant, acct)
		}
	})
	w.eachRow(ctx, conn, `SELECT DISTINCT tenant, provider_uid FROM scans`, func(tenant, acct string) {
		if t := own[tenant]; t == nil || !t.ownsAccount(acct) {
			w.probs.add("isolation", "scans of %s name account %s", tenant, acct)
		}
	})
	for _, table := range []string{"findings", "scans", "ingestion_errors"} {
		w.eachRow(ctx, conn, `SELECT DISTINCT tenant, ingestion_id FROM `+table, func(tenant, id string) {
			t := own[tenant]
			if t == nil {
				w.probs.add("isolation", "%s rows of tenant %q, which the soak did not load", table, tenant)
				return
			}
			t.mu.Lock()
			u := t.byID[id]
			t.mu.Unlock()
			if u == nil {
				w.probs.add("isolation", "%s rows of %s name ingestion %s, none of its uploads", table, tenant, id)
			}
		})
	}
}

// eachRow runs a query of two text columns.
func (w *world) eachRow(ctx context.Context, conn *pgx.Conn, sql string, f func(a, b string)) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		w.probs.add("store", "%v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var a, b string
		if err := rows.Scan(&a, &b); err != nil {
			w.probs.add("store", "%v", err)
			return
		}
		f(a, b)
	}
	if err := rows.Err(); err != nil {
		w.probs.add("store", "%v", err)
	}
}

func (c checked) String() string {
	return fmt.Sprintf("%d uploads: %d accepted (%d of them re-uploads; %d of those without an answer were found accepted), %d refused (%d without an answer were found refused)",
		c.uploads, c.accepted, c.reuploads, c.unknownAccepted, c.refused, c.unknownNot)
}

// errorLine is an error in a program's log: zap's JSON (the manager),
// slog's text or JSON (the MCP server), or klog's E lines (client-go and
// the generic API server inside the manager).
var errorLine = regexp.MustCompile(`^\[(manager|mcp-server)\] (.*"level":"error"|.*level=ERROR|E\d{4} )`)

// checkLogs fails the run on every error the manager or the MCP server
// logged: a load the system handles as it should leaves none, kills
// included (a killed process logs nothing, and its successor has nothing
// to complain about).
func (w *world) checkLogs(path string) {
	f, err := os.Open(path)
	if err != nil {
		w.probs.add("logs", "%v", err)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		if line := sc.Text(); errorLine.MatchString(line) {
			if i := strings.Index(line, `"stacktrace"`); i > 0 {
				line = line[:i]
			}
			w.probs.add("errors in the log", "%.400s", line)
		}
	}
}
