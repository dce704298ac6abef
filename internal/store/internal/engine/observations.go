package engine

import "github.com/posture-dev/posture/internal/store"

// ObservationIndex is the index an observations read goes through: the
// tenant's findings of one uid are that finding's observations, one per
// scan that reported it, however many findings the tenant holds.
const ObservationIndex = "findings_uid"

// ObservationColumns is the column list of an observation, in the order
// the engines scan them.
const ObservationColumns = "id, scan_id, ingestion_id, status_code, status, severity, severity_id, event_time, inserted_at"

// Observations renders the count and the page of store.FindingReads'
// FindingObservations. Both read the uid's entries of ObservationIndex
// and test the account on those rows alone; the page sorts them, the
// rows of one finding across its scans, newest first, with insertion
// time and id breaking ties so that pages never overlap.
func Observations(d Dialect, tenant string, q store.ObservationQuery) (count, page Statement) {
	from := "findings"
	if d.IndexedBy != nil {
		from += d.IndexedBy(ObservationIndex)
	}
	a := NewArgs(d)
	where := "tenant = " + a.Add(tenant) + " AND uid = " + a.Add(q.UID) +
		" AND provider_type = " + a.Add(q.ProviderType) + " AND provider_uid = " + a.Add(q.ProviderUID)
	count = Statement{SQL: "SELECT count(*) FROM " + from + " WHERE " + where, Args: a.Vals}
	limit, offset := Limit(q.Page)
	p := NewArgs(d)
	p.Vals = append(p.Vals, a.Vals...)
	page = Statement{SQL: "SELECT " + ObservationColumns + " FROM " + from + " WHERE " + where +
		" ORDER BY event_time DESC, inserted_at DESC, id LIMIT " + p.Add(limit) + " OFFSET " + p.Add(offset), Args: p.Vals}
	return count, page
}
