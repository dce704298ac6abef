package webhook

import (
	"net/url"
	"strings"
	"testing"
)

// A list without filters or sort keys says so, instead of listing an empty
// set of supported names.
func TestParseListWithoutFiltersOrSort(t *testing.T) {
	for _, tc := range []struct {
		query, parameter, detail string
	}{
		{"filter[code]=x", "filter[code]", `unknown filter "code"; this list takes no filters`},
		{"sort=record_index", "sort", "this list has a fixed order and takes no sort"},
		{"sort=-id", "sort", "this list has a fixed order and takes no sort"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			v, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			_, aerr := parseListValues(v, errorList)
			if aerr == nil {
				t.Fatal("accepted")
			}
			if aerr.status != 400 || aerr.obj.Detail != tc.detail || aerr.obj.Source == nil || aerr.obj.Source.Parameter != tc.parameter {
				t.Errorf("got %d %q %+v, want 400 %q on %s", aerr.status, aerr.obj.Detail, aerr.obj.Source, tc.detail, tc.parameter)
			}
			if strings.Contains(aerr.obj.Detail, "supported: ") && strings.HasSuffix(strings.TrimSpace(aerr.obj.Detail), ":") {
				t.Errorf("detail %q lists nothing", aerr.obj.Detail)
			}
		})
	}
}
