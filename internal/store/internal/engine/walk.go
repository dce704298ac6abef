package engine

import (
	"strconv"

	"github.com/posture-dev/posture/internal/store"
)

// A common search text is in so many findings that looking it up costs
// more than finding a page of them by reading the tenant's findings in the
// page's order and testing each: the lookup hands over every finding that
// holds the text before the page is cut, while in the order the page is
// full after about (page end) × (findings / matches) of them. PostgreSQL's
// planner knows from pg_trgm's statistics how common a text is and makes
// that choice itself; SQLite's has no statistics on the trigram index, so
// its store decides (docs/decisions/0016-common-searches-on-sqlite.md).

// Walkable reports whether q's page may be found by a walk: a search the
// trigram index would answer, over the whole tenant or its latest scans,
// in an order of time (event or insertion, either way). A filter on a
// scan, an ingestion or a check has an index of its own that bounds what
// is read, which the lookup then narrows further. The latest scans do
// not: the lookup hands over the whole history's matches, each then
// tested for its scan (351 ms a page for a common word at a million
// findings), while the latest findings are the newest of their providers
// and come first in the default order. In the other orders the
// matches of a common text are bunched, not spread: uids begin with their
// check's id and a check has one severity, so a walk in the order of uid,
// check or severity reads long runs without one match (a walk of 10,000
// findings in uid order found none of "bucket" at 300,000 findings).
func Walkable(q store.FindingQuery) bool {
	if !indexedSearch(q) || q.ScanID != "" || q.IngestionID != "" || q.CheckID != "" || q.Delta != "" {
		return false
	}
	parts, err := findingOrder(q.Sort)
	return err == nil && (parts[0].col == "inserted_at" || parts[0].col == "event_time")
}

// SearchCandidates renders a count of the findings, of every tenant, that
// SQLite's trigram index finds for q's search, stopping at limit: what
// tells a common text from a rare one for the price of at most limit
// index entries. It reads the index alone: through findings, SQLite would
// first collect every candidate for the IN list.
func SearchCandidates(q store.FindingQuery, limit int) Statement {
	a := NewArgs(SQLite)
	return Statement{SQL: `SELECT count(*) FROM (SELECT 1 FROM ` + sqliteMatch(a, SearchProbe(q.Search)) + ` LIMIT ` +
		strconv.Itoa(limit) + `) AS candidates`, Args: a.Vals}
}

// walkedColumns are the columns a walk hands on: every column a filter,
// the search or the order reads (all but raw, the large one), and the row
// to fetch in the end.
const walkedColumns = "rowid AS walked, tenant, id, uid, scan_id, ingestion_id, check_id, title, severity, severity_id, status_code, status, region, provider_type, provider_uid, resource_uid, event_time, inserted_at"

// FindingListWalk renders ListFindings' two statements for a Walkable q as
// a walk of at most walk findings of the tenant, in the order's index from
// the cursor on, testing each against q's filters and its whole search
// text. Their answers are those of FindingList when the walk reached far
// enough: when the page is full, and when the count passes q.CountLimit
// (a lower bound either way). Otherwise the walk ran out first and the
// caller asks FindingList. Only the page's findings are read whole.
func FindingListWalk(d Dialect, tenant string, q store.FindingQuery, walk int) (count, page Statement, err error) {
	q = CurrentQuery(q)
	if d.IndexedBy == nil || !Walkable(q) || q.CountLimit <= 0 {
		return Statement{}, Statement{}, Invalid("a walk is for a SQLite search over the whole tenant with a bounded count")
	}
	parts, err := findingOrder(q.Sort)
	if err != nil {
		return Statement{}, Statement{}, err
	}
	order := orderBy(parts, nil)
	// The count, as FindingList's, is of the whole listing: a walk from
	// the start, while the page's walk starts at the cursor.
	walked := func(a *Args, fromCursor bool) string {
		where := "tenant = " + a.Add(tenant)
		if fromCursor && q.After != nil {
			where += " AND (" + a.keyset(parts, *q.After) + ")"
		}
		return `(SELECT ` + walkedColumns + ` FROM findings` + d.IndexedBy(orderIndexes[parts[0].col]) +
			` WHERE ` + where + ` ORDER BY ` + order + ` LIMIT ` + strconv.Itoa(walk) + `) AS walk`
	}

	a := NewArgs(d)
	count = Statement{SQL: `SELECT count(*) FROM (SELECT 1 FROM ` + walked(a, false) + ` WHERE ` + rowTestedWhere(a, tenant, q) +
		` LIMIT ` + strconv.Itoa(q.CountLimit+1) + `) AS matching`, Args: a.Vals}

	a = NewArgs(d)
	limit, offset := Limit(q.Page)
	if q.After != nil {
		offset = 0
	}
	page = Statement{SQL: `SELECT ` + FindingColumns + ` FROM findings WHERE rowid IN (SELECT walked FROM ` + walked(a, true) +
		` WHERE ` + rowTestedWhere(a, tenant, q) + ` ORDER BY ` + order + ` LIMIT ` + strconv.Itoa(limit) + ` OFFSET ` + strconv.Itoa(offset) +
		`) ORDER BY ` + order, Args: a.Vals}
	return count, page, nil
}
