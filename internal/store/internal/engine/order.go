package engine

import (
	"slices"
	"strings"

	"github.com/posture-dev/posture/internal/store"
)

// orderIndexes are the indexes that read a tenant's findings in the order
// of each sort column (forwards or backwards), up to id: each is (tenant,
// SortIndexColumns(column)).
var orderIndexes = map[string]string{
	"event_time":  "findings_time",
	"severity_id": "findings_default_order",
	"inserted_at": "findings_inserted",
	"check_id":    "findings_check_order",
	"uid":         "findings_uid",
}

// orderTies are the columns that break the ties of each sort column,
// before id, and that its index holds after it. A check or a severity is
// shared by a large part of a tenant's findings, so their ties go by
// insertion time first: a new finding then lands at the end of its
// check's or severity's entries, not at a random place among all of them
// as it did when uid came first, which at ten million findings took a
// leaf page from outside memory for each new finding
// (docs/decisions/0017-ties-by-insertion-time.md).
var orderTies = map[string][]string{
	"event_time":  {"uid"},
	"severity_id": {"inserted_at", "uid"},
	"inserted_at": {"uid"},
	"check_id":    {"inserted_at", "uid"},
	"uid":         nil,
}

// SortIndex names the index that reads a tenant's findings in the order
// of sort column col (forwards or backwards), up to id.
func SortIndex(col string) string { return orderIndexes[col] }

// SortIndexColumns are the columns of col's sort index after the tenant:
// col and the columns that break its ties, all but id.
func SortIndexColumns(col string) []string { return append([]string{col}, orderTies[col]...) }

var sortColumns = map[string]string{
	"time":        "event_time",
	"severity_id": "severity_id",
	"inserted_at": "inserted_at",
	"check_id":    "check_id",
	"uid":         "uid",
}

// orderPart is one column of an ORDER BY.
type orderPart struct {
	col  string
	desc bool
}

// sql renders o, its column as render gives it (nil: as it is).
func (o orderPart) sql(render func(col string) string) string {
	col := o.col
	if render != nil {
		col = render(col)
	}
	if o.desc {
		return col + " DESC"
	}
	return col + " ASC"
}

// findingOrder resolves sort keys to columns. The first key's ties
// (orderTies) and id are always appended as tie-breakers so that pages
// never overlap or skip rows, and so that a position in the order (a
// FindingKey) is unique. They run in the direction of the first key: the
// first key's sort index holds them, so each order, either way, is one
// read of an index, forwards or backwards, never a sort of the runs of
// equal values.
func findingOrder(keys []string) ([]orderPart, error) {
	if len(keys) == 0 {
		keys = DefaultFindingSort
	}
	var parts []orderPart
	used := map[string]bool{}
	for _, k := range keys {
		name, desc := strings.CutPrefix(k, "-")
		col, ok := sortColumns[name]
		if !ok {
			return nil, Invalid("unknown sort key %q", k)
		}
		if used[col] {
			continue
		}
		used[col] = true
		parts = append(parts, orderPart{col: col, desc: desc})
	}
	for _, col := range append(slices.Clone(orderTies[parts[0].col]), "id") {
		if !used[col] {
			used[col] = true
			parts = append(parts, orderPart{col: col, desc: parts[0].desc})
		}
	}
	return parts, nil
}

// DefaultFindingSort is the store's order when a query names none: the most
// severe first (ties, as for every severity order, by insertion time, uid
// and id in the same direction: the newest first).
var DefaultFindingSort = []string{"-severity_id"}

// keyset renders "the row comes after k in this order" (see after).
func (a *Args) keyset(parts []orderPart, k store.FindingKey) string {
	vals := make([]string, len(parts))
	for i, p := range parts {
		var v any
		switch p.col {
		case "event_time":
			v = a.d.Time(Time(k.Time))
		case "inserted_at":
			v = a.d.Time(Time(k.InsertedAt))
		case "severity_id":
			v = k.SeverityID
		case "check_id":
			v = k.CheckID
		case "uid":
			v = k.UID
		case "id":
			v = k.ID
		}
		vals[i] = a.Add(v)
	}
	return after(parts, vals)
}

// after renders "the row comes after the position vals (one SQL value
// per part) in this order". The parts that run in the first one's
// direction are compared as one row value, which both planners seek an
// index to: (severity_id, inserted_at, uid) puts a page at its finding,
// where severity_id alone would put it at the first finding of that
// severity and read every one before it. Parts in the other direction follow in
// the expanded form (c1 > v1 OR (c1 = v1 AND (c2 > v2 OR ...))), which
// mixed directions need.
func after(parts []orderPart, vals []string) string {
	lead := 1
	for lead < len(parts) && parts[lead].desc == parts[0].desc {
		lead++
	}
	op := beyond(parts[0], false)
	if lead < len(parts) {
		op += "=" // a bound the expanded form then narrows
	}
	bound := parts[0].col + " " + op + " " + vals[0]
	if lead > 1 {
		bound = "(" + columns(parts[:lead]) + ") " + op + " (" + strings.Join(vals[:lead], ", ") + ")"
	}
	if lead == len(parts) {
		return bound
	}
	last := len(parts) - 1
	expr := parts[last].col + " " + beyond(parts[last], false) + " " + vals[last]
	for i := last - 1; i >= 0; i-- {
		c := parts[i].col
		expr = c + " " + beyond(parts[i], false) + " " + vals[i] + " OR (" + c + " = " + vals[i] + " AND (" + expr + "))"
	}
	return bound + " AND (" + expr + ")"
}

func orderBy(parts []orderPart, render func(col string) string) string {
	order := make([]string, len(parts))
	for i, p := range parts {
		order[i] = p.sql(render)
	}
	return strings.Join(order, ", ")
}

// beyond is the comparison that holds of what comes after a position in
// p's direction, or before it when before is set.
func beyond(p orderPart, before bool) string {
	if p.desc != before {
		return "<"
	}
	return ">"
}

func columns(parts []orderPart) string {
	cols := make([]string, len(parts))
	for i, p := range parts {
		cols[i] = p.col
	}
	return strings.Join(cols, ", ")
}
