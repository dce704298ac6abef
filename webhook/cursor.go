package webhook

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/posture-dev/posture/internal/findings"
	"github.com/posture-dev/posture/internal/store"
)

// cursorBinding hashes what a cursor's position depends on: the filters
// and the sort (the page size may change between pages).
func cursorBinding(q listQuery) string { return findings.Binding(q.filters, q.sort) }

func encodeCursor(k store.FindingKey, binding string) string {
	return findings.EncodeCursor(k, binding)
}

func decodeCursor(c, binding string) (store.FindingKey, *apiError) {
	k, err := findings.DecodeCursor(c, binding)
	var ce *findings.CursorError
	if errors.As(err, &ce) {
		if ce.Malformed != "" {
			return store.FindingKey{}, errorf(400, CodeInvalid, "page[cursor] is not a cursor this API issued (%s); take it from links.next", ce.Malformed).parameter("page[cursor]")
		}
		return store.FindingKey{}, errorf(400, CodeInvalid, "page[cursor] was issued for other filters or another sort; "+
			"keep the filter[...] and sort parameters of the request that returned it, or start again without page[cursor]").parameter("page[cursor]")
	}
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
