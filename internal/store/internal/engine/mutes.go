package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/posture-dev/posture/internal/mute"
	"github.com/posture-dev/posture/internal/store"
)

// The mute rules (docs/decisions/0024-mute-rules.md) live in two tables:
//
//   - mute_rules: per tenant and rule name, the rule as its controller
//     last stored it (generation, reason, expiry, match as JSON) and where
//     its pass over the stored findings stands (the natural key of the last
//     finding read, how many were read, whether it is done).
//   - finding_mutes: a mark per finding and rule that matches it, keyed by
//     (tenant, finding id, rule) so that a listing's page looks its marks
//     up by id, and indexed by (tenant, rule) for a rule's count and
//     removal. Its rule references mute_rules ON DELETE CASCADE, so a
//     deleted rule takes its marks along, and no mark outlives its rule.
//
// Marks are decided in Go by internal/mute, the same matcher the
// controller validates with, both by the pass (ApplyMuteRule) and when
// WriteBatch writes findings (MarkFindings): SQL has no glob that means
// the same on both engines, and a resource's name is only in the record.

// MuteTx is what the mute statements need of a transaction on either
// engine: rows are closed with the function returned.
type MuteTx interface {
	Exec(ctx context.Context, st Statement) error
	Query(ctx context.Context, st Statement) (Rows, func(), error)
}

// idText renders a finding id column as text: PostgreSQL keeps uuids.
func idText(d Dialect, col string) string {
	if d.IndexedBy == nil {
		return col + "::text"
	}
	return col
}

// mutedCond renders FindingQuery.Muted's condition over findings: a row
// test against the tenant's marks, read once through their key.
func mutedCond(a *Args, tenant, muted string) string {
	marks := "id IN (SELECT id FROM finding_mutes WHERE tenant = " + a.Add(tenant) + ")"
	if muted == store.MutedExcluded {
		return "NOT " + marks
	}
	return marks
}

// ValidMuted reports whether m is a FindingQuery.Muted.
func ValidMuted(m string) bool {
	return m == store.MutedAny || m == store.MutedOnly || m == store.MutedExcluded
}

// PutMuteRule implements store.Mutes.PutMuteRule in tx.
func PutMuteRule(ctx context.Context, tx MuteTx, d Dialect, tenant string, r store.MuteRule) error {
	if r.Name == "" {
		return Invalid("a mute rule needs a name")
	}
	if _, err := mute.Compile(r.Match); err != nil {
		return Invalid("mute rule %s: %v", r.Name, err)
	}
	match, err := json.Marshal(r.Match)
	if err != nil {
		return fmt.Errorf("encode mute rule %s: %w", r.Name, err)
	}
	var expires any
	if r.ExpiresAt != nil {
		expires = d.Time(Time(*r.ExpiresAt))
	}
	gen, found, err := ruleGeneration(ctx, tx, d, tenant, r.Name)
	if err != nil {
		return err
	}
	if found && gen == r.Generation {
		return nil
	}
	if found {
		a := NewArgs(d)
		if err := tx.Exec(ctx, Statement{SQL: `DELETE FROM finding_mutes WHERE tenant = ` + a.Add(tenant) + ` AND rule = ` + a.Add(r.Name), Args: a.Vals}); err != nil {
			return fmt.Errorf("remove the marks of mute rule %s: %w", r.Name, err)
		}
	}
	a := NewArgs(d)
	sql := `INSERT INTO mute_rules (tenant, name, generation, reason, expires_at, match, cursor_scan, cursor_uid, scanned, done)
VALUES (` + a.Add(tenant) + `, ` + a.Add(r.Name) + `, ` + a.Add(r.Generation) + `, ` + a.Add(r.Reason) + `, ` + a.Add(expires) + `, ` + a.Add(string(match)) + `, '', '', 0, false)
ON CONFLICT (tenant, name) DO UPDATE SET generation = excluded.generation, reason = excluded.reason, expires_at = excluded.expires_at,
    match = excluded.match, cursor_scan = '', cursor_uid = '', scanned = 0, done = false`
	if err := tx.Exec(ctx, Statement{SQL: sql, Args: a.Vals}); err != nil {
		return fmt.Errorf("store mute rule %s: %w", r.Name, err)
	}
	return nil
}

func ruleGeneration(ctx context.Context, tx MuteTx, d Dialect, tenant, name string) (gen int64, found bool, err error) {
	a := NewArgs(d)
	rows, done, err := tx.Query(ctx, Statement{SQL: `SELECT generation FROM mute_rules WHERE tenant = ` + a.Add(tenant) + ` AND name = ` + a.Add(name), Args: a.Vals})
	if err != nil {
		return 0, false, fmt.Errorf("read mute rule %s: %w", name, err)
	}
	defer done()
	if rows.Next() {
		if err := rows.Scan(&gen); err != nil {
			return 0, false, fmt.Errorf("read mute rule %s: %w", name, err)
		}
		found = true
	}
	return gen, found, rows.Err()
}

// mutedColumns are the columns the matcher reads of a finding.
func mutedColumns(d Dialect) string {
	return idText(d, "id") + ", scan_id, uid, check_id, severity, status_code, region, provider_uid, resource_uid, raw"
}

func scanMuted(rows Rows) (store.Finding, error) {
	var f store.Finding
	err := rows.Scan(&f.ID, &f.ScanID, &f.UID, &f.CheckID, &f.Severity, &f.StatusCode, &f.Region, &f.ProviderUID, &f.ResourceUID, &f.Raw)
	return f, err
}

// ApplyMuteRule implements store.Mutes.ApplyMuteRule in tx: the next
// limit findings of the tenant after the pass's cursor, in the order of
// their natural key (tenant, scan_id, uid), whose index reads them from
// the cursor on.
func ApplyMuteRule(ctx context.Context, tx MuteTx, d Dialect, tenant, name string, limit int) (store.MuteProgress, error) {
	var p store.MuteProgress
	if limit <= 0 {
		return p, Invalid("a mute rule's pass needs a batch size above 0, not %d", limit)
	}
	lock := ""
	if d.IndexedBy == nil {
		lock = " FOR UPDATE"
	}
	a := NewArgs(d)
	rows, closeRows, err := tx.Query(ctx, Statement{SQL: `SELECT generation, match, cursor_scan, cursor_uid, scanned, done FROM mute_rules WHERE tenant = ` +
		a.Add(tenant) + ` AND name = ` + a.Add(name) + lock, Args: a.Vals})
	if err != nil {
		return p, fmt.Errorf("read mute rule %s: %w", name, err)
	}
	var match, cursorScan, cursorUID string
	found := rows.Next()
	if found {
		err = rows.Scan(&p.Generation, &match, &cursorScan, &cursorUID, &p.Scanned, &p.Done)
	}
	if err == nil {
		err = rows.Err()
	}
	closeRows()
	if err != nil {
		return p, fmt.Errorf("read mute rule %s: %w", name, err)
	}
	if !found {
		return p, fmt.Errorf("mute rule %s of tenant %s: %w", name, tenant, store.ErrNotFound)
	}
	if !p.Done {
		if err := applyStep(ctx, tx, d, tenant, name, match, cursorScan, cursorUID, limit, &p); err != nil {
			return p, err
		}
	}
	a = NewArgs(d)
	rows, closeRows, err = tx.Query(ctx, Statement{SQL: `SELECT count(*) FROM finding_mutes WHERE tenant = ` + a.Add(tenant) + ` AND rule = ` + a.Add(name), Args: a.Vals})
	if err != nil {
		return p, fmt.Errorf("count the marks of mute rule %s: %w", name, err)
	}
	defer closeRows()
	if rows.Next() {
		if err := rows.Scan(&p.Matched); err != nil {
			return p, fmt.Errorf("count the marks of mute rule %s: %w", name, err)
		}
	}
	return p, rows.Err()
}

func applyStep(ctx context.Context, tx MuteTx, d Dialect, tenant, name, match, cursorScan, cursorUID string, limit int, p *store.MuteProgress) error {
	var m store.MuteMatch
	if err := json.Unmarshal([]byte(match), &m); err != nil {
		return fmt.Errorf("read mute rule %s's match: %w", name, err)
	}
	matcher, err := mute.Compile(m)
	if err != nil {
		return fmt.Errorf("mute rule %s as stored: %w", name, err)
	}
	from := "findings"
	if d.IndexedBy != nil {
		from += d.IndexedBy(naturalKeyIndex)
	}
	a := NewArgs(d)
	rows, closeRows, err := tx.Query(ctx, Statement{SQL: `SELECT ` + mutedColumns(d) + ` FROM ` + from + ` WHERE tenant = ` + a.Add(tenant) +
		` AND (scan_id, uid) > (` + a.Add(cursorScan) + `, ` + a.Add(cursorUID) + `) ORDER BY scan_id, uid LIMIT ` + a.Add(limit), Args: a.Vals})
	if err != nil {
		return fmt.Errorf("read findings for mute rule %s: %w", name, err)
	}
	var read, matched []string
	var last store.Finding
	for rows.Next() {
		f, err := scanMuted(rows)
		if err != nil {
			closeRows()
			return fmt.Errorf("read findings for mute rule %s: %w", name, err)
		}
		read = append(read, f.ID)
		if matcher.Match(&f) {
			matched = append(matched, f.ID)
		}
		last = f
	}
	err = rows.Err()
	closeRows()
	if err != nil {
		return fmt.Errorf("read findings for mute rule %s: %w", name, err)
	}
	// The findings read lose the rule's marks and get them back where it
	// matches: a finding rewritten since it was marked is judged again.
	if err := unmark(ctx, tx, d, tenant, name, read); err != nil {
		return err
	}
	marks := make([]mark, len(matched))
	for i, id := range matched {
		marks[i] = mark{id: id, rule: name}
	}
	if err := insertMarks(ctx, tx, d, tenant, marks); err != nil {
		return err
	}
	p.Scanned += int64(len(read))
	p.Done = len(read) < limit
	if len(read) > 0 {
		cursorScan, cursorUID = last.ScanID, last.UID
	}
	a = NewArgs(d)
	done := "false"
	if p.Done {
		done = "true"
	}
	return tx.Exec(ctx, Statement{SQL: `UPDATE mute_rules SET cursor_scan = ` + a.Add(cursorScan) + `, cursor_uid = ` + a.Add(cursorUID) +
		`, scanned = ` + a.Add(p.Scanned) + `, done = ` + done + ` WHERE tenant = ` + a.Add(tenant) + ` AND name = ` + a.Add(name), Args: a.Vals})
}

// markChunk bounds the parameters of one statement of marks.
const markChunk = 500

type mark struct{ id, rule string }

// unmark removes the marks of rule (all rules when empty) from the findings ids.
func unmark(ctx context.Context, tx MuteTx, d Dialect, tenant, rule string, ids []string) error {
	for len(ids) > 0 {
		n := min(len(ids), markChunk)
		a := NewArgs(d)
		sql := `DELETE FROM finding_mutes WHERE tenant = ` + a.Add(tenant)
		if rule != "" {
			sql += ` AND rule = ` + a.Add(rule)
		}
		sql += ` AND ` + a.in("id", ids[:n], func(v string) string { return v })
		if err := tx.Exec(ctx, Statement{SQL: sql, Args: a.Vals}); err != nil {
			return fmt.Errorf("remove mute marks: %w", err)
		}
		ids = ids[n:]
	}
	return nil
}

func insertMarks(ctx context.Context, tx MuteTx, d Dialect, tenant string, marks []mark) error {
	for len(marks) > 0 {
		n := min(len(marks), markChunk)
		a := NewArgs(d)
		vals := make([]string, n)
		for i, m := range marks[:n] {
			vals[i] = "(" + a.Add(tenant) + ", " + a.Add(m.id) + ", " + a.Add(m.rule) + ")"
		}
		if err := tx.Exec(ctx, Statement{SQL: `INSERT INTO finding_mutes (tenant, id, rule) VALUES ` + strings.Join(vals, ", ") +
			` ON CONFLICT (tenant, id, rule) DO NOTHING`, Args: a.Vals}); err != nil {
			return fmt.Errorf("write mute marks: %w", err)
		}
		marks = marks[n:]
	}
	return nil
}

// MarkFindings marks the findings a batch wrote with the tenant's active
// rules (not expired at now), in WriteBatch's transaction: a rewritten
// finding is judged again. A tenant without rules costs one read of
// mute_rules' key.
func MarkFindings(ctx context.Context, tx MuteTx, d Dialect, tenant string, fs []store.Finding, now time.Time) error {
	if len(fs) == 0 {
		return nil
	}
	a := NewArgs(d)
	rows, closeRows, err := tx.Query(ctx, Statement{SQL: `SELECT name, generation, reason, match FROM mute_rules WHERE tenant = ` + a.Add(tenant) +
		` AND (expires_at IS NULL OR expires_at > ` + a.Add(d.Time(now)) + `) ORDER BY name`, Args: a.Vals})
	if err != nil {
		return fmt.Errorf("read the mute rules of tenant %s: %w", tenant, err)
	}
	var stored []store.MuteRule
	for rows.Next() {
		var r store.MuteRule
		var match string
		if err := rows.Scan(&r.Name, &r.Generation, &r.Reason, &match); err != nil {
			closeRows()
			return fmt.Errorf("read the mute rules of tenant %s: %w", tenant, err)
		}
		if json.Unmarshal([]byte(match), &r.Match) == nil {
			stored = append(stored, r)
		}
	}
	err = rows.Err()
	closeRows()
	if err != nil {
		return fmt.Errorf("read the mute rules of tenant %s: %w", tenant, err)
	}
	if len(stored) == 0 {
		return nil
	}
	rules := mute.CompileRules(stored)
	ids := make([]string, len(fs))
	var marks []mark
	for i := range fs {
		ids[i] = fs[i].ID
		for _, r := range rules {
			if r.Matcher.Match(&fs[i]) {
				marks = append(marks, mark{id: fs[i].ID, rule: r.Name})
			}
		}
	}
	if err := unmark(ctx, tx, d, tenant, "", ids); err != nil {
		return err
	}
	return insertMarks(ctx, tx, d, tenant, marks)
}

// DeleteMuteRule implements store.Mutes.DeleteMuteRule: the marks go with
// the rule (ON DELETE CASCADE).
func DeleteMuteRule(d Dialect, tenant, name string) Statement {
	a := NewArgs(d)
	return Statement{SQL: `DELETE FROM mute_rules WHERE tenant = ` + a.Add(tenant) + ` AND name = ` + a.Add(name), Args: a.Vals}
}

// MuteMarks renders the read of the marks of the findings ids (the tenant
// is $1, the ids from $2 on), each with its rule's reason, by rule name:
// the first of a finding is the one shown.
func MuteMarks(d Dialect, ids int) string {
	ps := make([]string, ids)
	for i := range ps {
		ps[i] = d.Param(i + 2)
	}
	return `SELECT ` + idText(d, "m.id") + `, m.rule, r.reason FROM finding_mutes m JOIN mute_rules r ON r.tenant = m.tenant AND r.name = m.rule
WHERE m.tenant = ` + d.Param(1) + ` AND m.id IN (` + strings.Join(ps, ", ") + `) ORDER BY m.rule`
}

// ReadMuteMarks puts the rows of MuteMarks on the findings out.
func ReadMuteMarks(rows Rows, out []store.Finding) error {
	at := make(map[string]*store.Finding, len(out))
	for i := range out {
		at[out[i].ID] = &out[i]
	}
	for rows.Next() {
		var id, rule, reason string
		if err := rows.Scan(&id, &rule, &reason); err != nil {
			return err
		}
		if f := at[id]; f != nil && f.Mute == nil {
			f.Mute = &store.MuteMark{Rule: rule, Reason: reason}
		}
	}
	return rows.Err()
}
