// Package findings is the one home of reading findings page by page: the
// severities a filter accepts, the keyset cursor that continues a listing
// where the last page ended, and the page read itself. The REST API's
// page[cursor] and the aggregated API's continue token are both this cursor.
// It also reads one scan, the run of a scanner the findings came from.
package findings

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/store"
)

// Severities are OCSF's severity captions, as the store keeps them
// (lower-case), in the order of their severity_id.
var Severities = slices.Clone(ocsf.SeverityCaptions)

// ValidSeverity reports whether v (any case) is one of Severities.
func ValidSeverity(v string) bool { return slices.Contains(Severities, strings.ToLower(v)) }

// MutedValues are what REST's filter[muted] and the aggregated API's field
// selector muted= take.
var MutedValues = []string{"true", "false", "any"}

// Muted is the store's mute condition for v, the muted filter's value when
// one was given (set): the current state (latest) leaves muted findings out
// unless asked, the history lists them all. ok is false for a value not
// among MutedValues.
func Muted(v string, set, latest bool) (muted string, ok bool) {
	switch {
	case !set && latest:
		return store.MutedExcluded, true
	case !set || v == "any":
		return store.MutedAny, true
	case v == "true":
		return store.MutedOnly, true
	case v == "false":
		return store.MutedExcluded, true
	}
	return "", false
}

// A cursor is the last row's position in the sort order (every sort column
// and the id that breaks ties) and a binding to the query it was issued
// for. It is opaque to clients: base64url of a JSON array [binding, time µs,
// inserted_at µs, severity_id, check_id, uid, id]. The binding is part of a
// hash of the filters and sort, so a cursor reused with other ones is
// refused rather than silently continuing somewhere meaningless. It is not
// a secret or a signature: a forged cursor can only address the caller's
// own tenant, as any filter can.

// Binding hashes what a cursor's position depends on: the filters and the
// sort (the page size may change between pages).
func Binding(filters map[string]string, sort []string) string {
	keys := make([]string, 0, len(filters))
	for k := range filters {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "\x00" + filters[k] + "\x00")
	}
	b.WriteString("sort\x00" + strings.Join(sort, ","))
	sum := sha256.Sum256([]byte(b.String()))
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

// EncodeCursor is the cursor continuing after k.
func EncodeCursor(k store.FindingKey, binding string) string {
	b, _ := json.Marshal([]any{binding, k.Time.UnixMicro(), k.InsertedAt.UnixMicro(), k.SeverityID, k.CheckID, k.UID, k.ID})
	return base64.RawURLEncoding.EncodeToString(b)
}

// CursorError is a cursor that cannot be used: Malformed says why when it
// was never issued; otherwise it was issued for another query.
type CursorError struct{ Malformed string }

func (e *CursorError) Error() string {
	if e.Malformed != "" {
		return "not a cursor this API issued (" + e.Malformed + ")"
	}
	return "the cursor was issued for other filters or another sort"
}

// DecodeCursor reads a cursor issued for binding.
func DecodeCursor(c, binding string) (store.FindingKey, error) {
	bad := func(why string) error { return &CursorError{Malformed: why} }
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return store.FindingKey{}, bad("not base64url")
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) != 7 {
		return store.FindingKey{}, bad("not a cursor's content")
	}
	var (
		got            string
		t, ins         int64
		k              store.FindingKey
		checkID, uid   string
		id             string
		fieldsDecoding = []struct {
			dst any
			raw json.RawMessage
		}{{&got, parts[0]}, {&t, parts[1]}, {&ins, parts[2]}, {&k.SeverityID, parts[3]}, {&checkID, parts[4]}, {&uid, parts[5]}, {&id, parts[6]}}
	)
	for i, f := range fieldsDecoding {
		if err := json.Unmarshal(f.raw, f.dst); err != nil {
			return store.FindingKey{}, bad("item " + strconv.Itoa(i) + " has the wrong type")
		}
	}
	if got != binding {
		return store.FindingKey{}, &CursorError{}
	}
	if _, err := uuid.Parse(id); err != nil {
		return store.FindingKey{}, bad("the finding id is not a UUID")
	}
	k.Time, k.InsertedAt = time.UnixMicro(t).UTC(), time.UnixMicro(ins).UTC()
	k.CheckID, k.UID, k.ID = checkID, uid, id
	return k, nil
}

// Page is one keyset page of findings.
type Page struct {
	Rows []store.Finding
	// Count is how many findings match the query in all.
	Count int
	// Next is where the following page starts; nil on the last page.
	Next *store.FindingKey
}

// ReadAfter reads the size findings of q that follow after (from the first
// when after is nil) without reading any row before it, however deep the
// listing is.
func ReadAfter(ctx context.Context, st store.FindingReads, tenant string, q store.FindingQuery, after *store.FindingKey, size int) (Page, error) {
	q.After = after
	if after == nil {
		// The store reads a numbered page without After; page 1 is the
		// same rows.
		q.Page = store.Page{Number: 1, Size: size + 1}
	} else {
		// One row more than the page tells whether a next page exists
		// without knowing where this page is.
		q.Page = store.Page{Size: size + 1}
	}
	rows, count, err := st.ListFindings(ctx, tenant, q)
	if err != nil {
		return Page{}, err
	}
	p := Page{Rows: rows, Count: count}
	if len(rows) > size {
		p.Rows = rows[:size]
		k := store.KeyOf(&p.Rows[size-1])
		p.Next = &k
	}
	return p, nil
}

// scanPage is what Scan reads per page while looking for one scan: a
// tenant has a handful of scans per provider and ingestion.
const scanPage = 500

// Scan is tenant's scan id, store.ErrNotFound when it has none.
func Scan(ctx context.Context, st store.FindingReads, tenant, id string) (store.Scan, error) {
	for page := 1; ; page++ {
		rows, count, err := st.ListScans(ctx, tenant, store.ScanQuery{Page: store.Page{Number: page, Size: scanPage}})
		if err != nil {
			return store.Scan{}, err
		}
		for i := range rows {
			if rows[i].ID == id {
				return rows[i], nil
			}
		}
		if page*scanPage >= count || len(rows) == 0 {
			return store.Scan{}, store.ErrNotFound
		}
	}
}

// Failing is what failed in a scan, as every door says it: the number of
// its FAIL findings and that number by severity, never nil (an empty map
// is a scan in which nothing failed).
func Failing(sc *store.Scan) (total int64, bySeverity map[string]int64) {
	bySeverity = make(map[string]int64, len(sc.Failing))
	for severity, n := range sc.Failing {
		bySeverity[severity] = int64(n)
		total += int64(n)
	}
	return total, bySeverity
}
