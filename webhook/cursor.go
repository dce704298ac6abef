package webhook

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/posture-dev/posture/internal/store"
)

// A findings cursor is the last row's position in the sort order (every
// sort column and the id that breaks ties) and a binding to the query it
// was issued for. It is opaque to clients: base64url of a JSON array
// [binding, time µs, inserted_at µs, severity_id, check_id, uid, id]. The
// binding is part of a hash of the filters and sort, so a cursor reused
// with other ones is refused rather than silently continuing somewhere
// meaningless. It is not a secret or a signature: a forged cursor can
// only address the caller's own tenant, as any filter can.

// cursorBinding hashes what a cursor's position depends on: the filters
// and the sort (the page size may change between pages).
func cursorBinding(q listQuery) string {
	keys := make([]string, 0, len(q.filters))
	for k := range q.filters {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "\x00" + q.filters[k] + "\x00")
	}
	b.WriteString("sort\x00" + strings.Join(q.sort, ","))
	sum := sha256.Sum256([]byte(b.String()))
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

func encodeCursor(k store.FindingKey, binding string) string {
	b, _ := json.Marshal([]any{binding, k.Time.UnixMicro(), k.InsertedAt.UnixMicro(), k.SeverityID, k.CheckID, k.UID, k.ID})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(c, binding string) (store.FindingKey, *apiError) {
	bad := func(why string) *apiError {
		return errorf(400, CodeInvalid, "page[cursor] is not a cursor this API issued (%s); take it from links.next", why).parameter("page[cursor]")
	}
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
		return store.FindingKey{}, errorf(400, CodeInvalid, "page[cursor] was issued for other filters or another sort; "+
			"keep the filter[...] and sort parameters of the request that returned it, or start again without page[cursor]").parameter("page[cursor]")
	}
	if _, err := uuid.Parse(id); err != nil {
		return store.FindingKey{}, bad("the finding id is not a UUID")
	}
	k.Time, k.InsertedAt = time.UnixMicro(t).UTC(), time.UnixMicro(ins).UTC()
	k.CheckID, k.UID, k.ID = checkID, uid, id
	return k, nil
}

// pageLink is the request's URL at page[number]=n, without a cursor.
func pageLink(r *http.Request, n int) string {
	u := *r.URL
	v := u.Query()
	v.Del("page[cursor]")
	v.Set("page[number]", strconv.Itoa(n))
	u.RawQuery = v.Encode()
	return absoluteURL(r, &u)
}

// cursorLink is the request's URL continuing after cursor c.
func cursorLink(r *http.Request, c string) string {
	u := *r.URL
	v := u.Query()
	v.Del("page[number]")
	v.Set("page[cursor]", c)
	u.RawQuery = v.Encode()
	return absoluteURL(r, &u)
}
