package webhook

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// A token request the decoder refuses is explained like every other error:
// which member has the wrong type (source.pointer), or at which byte the
// JSON broke, never with an empty source or the decoder's Go type names.
func TestTokenBodyErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body    string
		pointer       string
		detail        string
		notInResponse string
	}{
		{"email a number", `{"data":{"type":"tokens","attributes":{"email":1,"password":"p"}}}`,
			"/data/attributes/email", "data.attributes.email must be a string, found a JSON number", "Go struct"},
		{"attributes a list", `{"data":{"type":"tokens","attributes":[]}}`,
			"/data/attributes", "data.attributes must be an object, found a JSON array", "Go struct"},
		{"type an object", `{"data":{"type":{}}}`,
			"/data/type", "data.type must be a string, found a JSON object", "Go struct"},
		{"top level an array", `[1]`, "", "the body must be a JSON object, found a JSON array", "Go"},
		{"syntax error", `{"data":}`, "", "the body is not valid JSON: invalid character '}' looking for beginning of value at byte 8", ""},
		{"truncated", `{"data":{"type":"tokens"`, "", "the body is not valid JSON: it ends at byte 24 before the document is complete", "unexpected EOF"},
		{"data after the document", `{"data":{"type":"tokens","attributes":{"email":"e","password":"p"}}} x`, "",
			"the body is not valid JSON: unexpected data at byte 69 after the document", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/api/v1/tokens", strings.NewReader(tc.body))
			r.Header.Set("Content-Type", MediaType)
			_, aerr := readTokenRequest(httptest.NewRecorder(), r, "tokens")
			if aerr == nil {
				t.Fatal("accepted")
			}
			if aerr.status != 400 || aerr.obj.Detail != tc.detail {
				t.Errorf("got %d %q, want 400 %q", aerr.status, aerr.obj.Detail, tc.detail)
			}
			switch {
			case tc.pointer == "" && aerr.obj.Source != nil:
				t.Errorf("source = %+v, want none", *aerr.obj.Source)
			case tc.pointer != "" && (aerr.obj.Source == nil || aerr.obj.Source.Pointer != tc.pointer):
				t.Errorf("source = %+v, want pointer %q", aerr.obj.Source, tc.pointer)
			}
			if tc.notInResponse != "" && strings.Contains(aerr.obj.Detail, tc.notInResponse) {
				t.Errorf("detail %q mentions %q", aerr.obj.Detail, tc.notInResponse)
			}
		})
	}
}
