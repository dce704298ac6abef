package ocsf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// baseRecord is a minimal valid Detection Finding; cases mutate a copy.
func baseRecord() map[string]any {
	return map[string]any{
		"class_uid":    2004,
		"activity_id":  1,
		"category_uid": 2,
		"type_uid":     200401,
		"time":         1735570800,
		"severity_id":  4,
		"status":       "New",
		"status_code":  "FAIL",
		"metadata": map[string]any{
			"version":    "1.4.0",
			"event_code": "s3_bucket_public_access",
			"product":    map[string]any{"name": "Prowler", "uid": "prowler"},
		},
		"finding_info": map[string]any{"uid": "f-1", "title": "Bucket is public"},
		"cloud": map[string]any{
			"provider": "aws",
			"region":   "eu-west-1",
			"account":  map[string]any{"uid": "123456789012", "name": "prod"},
		},
		"resources": []any{
			map[string]any{"uid": "arn:aws:s3:::b", "region": "eu-west-1", "data": map[string]any{"x": []any{1, 2}}},
		},
		"unmapped":    map[string]any{"scan_id": "0b5e-scan"},
		"extra_field": map[string]any{"anything": []any{"goes"}},
	}
}

// at walks a dotted path, creating nothing; the last element is returned
// with its parent map.
func at(m map[string]any, path string) (map[string]any, string) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		m = m[p].(map[string]any)
	}
	return m, parts[len(parts)-1]
}

func set(path string, v any) func(map[string]any) {
	return func(m map[string]any) { p, k := at(m, path); p[k] = v }
}

func del(path string) func(map[string]any) {
	return func(m map[string]any) { p, k := at(m, path); delete(p, k) }
}

func record(tb testing.TB, mutate ...func(map[string]any)) Record {
	tb.Helper()
	m := baseRecord()
	for _, f := range mutate {
		f(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return Record{Raw: b}
}

// rawNum lets a case put an exact number literal in the record.
type rawNum string

func (r rawNum) MarshalJSON() ([]byte, error) { return []byte(r), nil }

func TestValidRecord(t *testing.T) {
	f, ps := NewValidator().Check(record(t))
	if len(ps) != 0 {
		t.Fatalf("problems: %+v", ps)
	}
	want := Finding{
		UID: "f-1", CheckID: "s3_bucket_public_access", Title: "Bucket is public", Severity: "high",
		StatusCode: "FAIL", Status: "New", Region: "eu-west-1", ProviderType: "aws", ProviderUID: "123456789012",
		AccountName: "prod", AccountPointer: "/cloud/account/uid", ResourceUID: "arn:aws:s3:::b", ScanID: "0b5e-scan", SeverityID: 4,
		Time: time.Date(2024, 12, 30, 15, 0, 0, 0, time.UTC),
	}
	if f != want {
		t.Fatalf("Finding\n got %+v\nwant %+v", f, want)
	}
}

func TestRules(t *testing.T) {
	p := func(code, ptr, value, detail string) Problem {
		return Problem{Code: code, Pointer: ptr, Value: value, Detail: detail}
	}
	tests := []struct {
		name   string
		mutate []func(map[string]any)
		want   []Problem
	}{
		// class_uid
		{"class_uid missing", []func(map[string]any){del("class_uid")},
			[]Problem{p("missing_field", "/class_uid", "", "class_uid is required")}},
		{"class_uid string", []func(map[string]any){set("class_uid", "2004")},
			[]Problem{p("invalid_type", "/class_uid", `"2004"`, "class_uid must be an integer, found a string")}},
		{"class_uid fraction", []func(map[string]any){set("class_uid", rawNum("2004.5"))},
			[]Problem{p("invalid_type", "/class_uid", "2004.5", "class_uid must be an integer, found a fractional number")}},
		{"class_uid float form accepted", []func(map[string]any){set("class_uid", rawNum("2.004e3"))}, nil},
		{"class_uid other class", []func(map[string]any){set("class_uid", 3002), del("time"), del("finding_info")},
			[]Problem{p("unsupported_class", "/class_uid", "3002", "class_uid 3002 (Authentication) is not supported; only Detection Finding (2004) is accepted")}},
		{"class_uid unknown class", []func(map[string]any){set("class_uid", 777)},
			[]Problem{p("unsupported_class", "/class_uid", "777", "class_uid 777 is not supported; only Detection Finding (2004) is accepted")}},
		{"class_uid huge", []func(map[string]any){set("class_uid", rawNum("99999999999999999999"))},
			[]Problem{p("invalid_value", "/class_uid", "99999999999999999999", "class_uid is out of range")}},
		// activity_id, category_uid, type_uid
		{"activity_id missing", []func(map[string]any){del("activity_id")},
			[]Problem{p("missing_field", "/activity_id", "", "activity_id is required")}},
		{"activity_id null", []func(map[string]any){set("activity_id", nil)},
			[]Problem{p("missing_field", "/activity_id", "null", "activity_id is required but is null")}},
		{"category_uid wrong type", []func(map[string]any){set("category_uid", "Findings")},
			[]Problem{p("invalid_type", "/category_uid", `"Findings"`, "category_uid must be an integer, found a string")}},
		{"type_uid boolean", []func(map[string]any){set("type_uid", true)},
			[]Problem{p("invalid_type", "/type_uid", "true", "type_uid must be an integer, found a boolean")}},
		{"type_uid object", []func(map[string]any){set("type_uid", map[string]any{"a": 1})},
			[]Problem{p("invalid_type", "/type_uid", `{"a":1}`, "type_uid must be an integer, found an object")}},
		// time
		{"time missing", []func(map[string]any){del("time")},
			[]Problem{p("missing_field", "/time", "", "time is required")}},
		{"time as ISO string", []func(map[string]any){set("time", "2024-12-30T15:00:00Z")},
			[]Problem{p("invalid_type", "/time", `"2024-12-30T15:00:00Z"`, "time must be an integer, found a string")}},
		{"time negative", []func(map[string]any){set("time", -5)},
			[]Problem{p("invalid_value", "/time", "-5", "time must not be negative")}},
		{"time too far", []func(map[string]any){set("time", rawNum("253402300800000"))},
			[]Problem{p("invalid_value", "/time", "253402300800000", "time is out of range (after the year 9999)")}},
		// severity_id
		{"severity_id missing", []func(map[string]any){del("severity_id")},
			[]Problem{p("missing_field", "/severity_id", "", "severity_id is required")}},
		{"severity_id string", []func(map[string]any){set("severity_id", "High")},
			[]Problem{p("invalid_type", "/severity_id", `"High"`, "severity_id must be an integer, found a string")}},
		{"severity_id 7", []func(map[string]any){set("severity_id", 7)},
			[]Problem{p("invalid_value", "/severity_id", "7", "severity_id must be 0 to 6 or 99, found 7")}},
		{"severity_id -1", []func(map[string]any){set("severity_id", -1)},
			[]Problem{p("invalid_value", "/severity_id", "-1", "severity_id must be 0 to 6 or 99, found -1")}},
		{"severity_id 99", []func(map[string]any){set("severity_id", 99)}, nil},
		{"severity_id 0", []func(map[string]any){set("severity_id", 0)}, nil},
		// metadata
		{"metadata missing", []func(map[string]any){del("metadata")},
			[]Problem{
				p("missing_field", "/metadata/version", "", "metadata.version is required"),
				p("missing_field", "/metadata/product", "", "metadata.product (with a name or uid) is required"),
			}},
		{"metadata string", []func(map[string]any){set("metadata", "1.4.0")},
			[]Problem{p("invalid_type", "/metadata", `"1.4.0"`, "metadata must be an object, found a string")}},
		{"metadata.version missing", []func(map[string]any){del("metadata.version")},
			[]Problem{p("missing_field", "/metadata/version", "", "metadata.version is required")}},
		{"metadata.version number", []func(map[string]any){set("metadata.version", 1.4)},
			[]Problem{p("invalid_type", "/metadata/version", "1.4", "metadata.version must be a string, found a number")}},
		{"metadata.version empty", []func(map[string]any){set("metadata.version", " ")},
			[]Problem{p("invalid_value", "/metadata/version", `" "`, "metadata.version must not be empty")}},
		{"metadata.product missing", []func(map[string]any){del("metadata.product")},
			[]Problem{p("missing_field", "/metadata/product", "", "metadata.product (with a name or uid) is required")}},
		{"metadata.product string", []func(map[string]any){set("metadata.product", "Prowler")},
			[]Problem{p("invalid_type", "/metadata/product", `"Prowler"`, "metadata.product must be an object, found a string")}},
		{"metadata.product empty object", []func(map[string]any){set("metadata.product", map[string]any{"version": "5"})},
			[]Problem{p("missing_field", "/metadata/product/name", "", "metadata.product.name or metadata.product.uid is required")}},
		{"metadata.product empty name", []func(map[string]any){set("metadata.product", map[string]any{"name": "", "uid": nil})},
			[]Problem{p("invalid_value", "/metadata/product/name", `""`, "metadata.product needs a non-empty name or uid")}},
		{"metadata.product name wrong type", []func(map[string]any){set("metadata.product", map[string]any{"name": 5})},
			[]Problem{p("invalid_type", "/metadata/product/name", "5", "metadata.product.name must be a string, found a number")}},
		{"metadata.product uid only", []func(map[string]any){set("metadata.product", map[string]any{"uid": "prowler"})}, nil},
		{"metadata.product name only", []func(map[string]any){set("metadata.product", map[string]any{"name": "Prowler"})}, nil},
		// finding_info.uid
		{"finding_info missing", []func(map[string]any){del("finding_info")},
			[]Problem{p("missing_field", "/finding_info/uid", "", "finding_info.uid is required")}},
		{"finding_info array", []func(map[string]any){set("finding_info", []any{"f-1"})},
			[]Problem{p("invalid_type", "/finding_info", `["f-1"]`, "finding_info must be an object, found an array")}},
		{"finding_info.uid missing", []func(map[string]any){del("finding_info.uid")},
			[]Problem{p("missing_field", "/finding_info/uid", "", "finding_info.uid is required")}},
		{"finding_info.uid number", []func(map[string]any){set("finding_info.uid", 42)},
			[]Problem{p("invalid_type", "/finding_info/uid", "42", "finding_info.uid must be a string, found a number")}},
		{"finding_info.uid empty", []func(map[string]any){set("finding_info.uid", "")},
			[]Problem{p("invalid_value", "/finding_info/uid", `""`, "finding_info.uid must not be empty")}},
		{"finding_info.uid at limit", []func(map[string]any){set("finding_info.uid", strings.Repeat("u", 1024))}, nil},
		{"finding_info.uid too long", []func(map[string]any){set("finding_info.uid", strings.Repeat("u", 1025))},
			[]Problem{p("invalid_value", "/finding_info/uid", `"`+strings.Repeat("u", 98)+"…",
				"finding_info.uid is 1025 bytes long; at most 1024 are allowed")}},
		{"finding_info.uid with NUL", []func(map[string]any){set("finding_info.uid", "a\x00b")},
			[]Problem{p("invalid_value", "/finding_info/uid", `"a\u0000b"`, "finding_info.uid must not contain NUL (\\u0000) characters")}},
		// account
		{"cloud.account.uid with NUL", []func(map[string]any){set("cloud.account.uid", "12\x00")},
			[]Problem{p("missing_account", "/cloud/account/uid", `"12\u0000"`, "no account to bill: the record needs cloud.provider and cloud.account.uid, or unmapped.provider and unmapped.provider_uid, as non-empty strings")}},
		{"account from unmapped", []func(map[string]any){del("cloud"), set("unmapped.provider", "kubernetes"), set("unmapped.provider_uid", "cluster-1")}, nil},
		{"cloud.account.uid missing", []func(map[string]any){del("cloud.account.uid")},
			[]Problem{p("missing_account", "/cloud/account/uid", "", "no account to bill: the record needs cloud.provider and cloud.account.uid, or unmapped.provider and unmapped.provider_uid, as non-empty strings")}},
		{"cloud.provider missing", []func(map[string]any){del("cloud.provider")},
			[]Problem{p("missing_account", "/cloud/account/uid", `"123456789012"`, "no account to bill: the record needs cloud.provider and cloud.account.uid, or unmapped.provider and unmapped.provider_uid, as non-empty strings")}},
		{"cloud.account.uid number", []func(map[string]any){set("cloud.account.uid", 123456789012)},
			[]Problem{p("missing_account", "/cloud/account/uid", "123456789012", "no account to bill: the record needs cloud.provider and cloud.account.uid, or unmapped.provider and unmapped.provider_uid, as non-empty strings")}},
		{"no cloud, half of unmapped", []func(map[string]any){del("cloud"), set("unmapped.provider", "kubernetes")},
			[]Problem{p("missing_account", "/cloud/account/uid", "", "no account to bill: the record needs cloud.provider and cloud.account.uid, or unmapped.provider and unmapped.provider_uid, as non-empty strings")}},
		{"cloud not an object", []func(map[string]any){set("cloud", "aws")},
			[]Problem{p("missing_account", "/cloud/account/uid", "", "no account to bill: the record needs cloud.provider and cloud.account.uid, or unmapped.provider and unmapped.provider_uid, as non-empty strings")}},
		// several at once, in rule order
		{"all problems reported", []func(map[string]any){del("time"), set("severity_id", 8), set("metadata.version", 1), del("cloud"), set("finding_info.uid", "")},
			[]Problem{
				p("missing_field", "/time", "", "time is required"),
				p("invalid_value", "/severity_id", "8", "severity_id must be 0 to 6 or 99, found 8"),
				p("invalid_type", "/metadata/version", "1", "metadata.version must be a string, found a number"),
				p("invalid_value", "/finding_info/uid", `""`, "finding_info.uid must not be empty"),
				p("missing_account", "/cloud/account/uid", "", "no account to bill: the record needs cloud.provider and cloud.account.uid, or unmapped.provider and unmapped.provider_uid, as non-empty strings"),
			}},
		{"unknown and odd optional fields are fine", []func(map[string]any){set("status_code", 5), set("resources", "none"), set("x", map[string]any{"y": nil})}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ps := NewValidator().Check(record(t, tt.mutate...))
			if !reflect.DeepEqual(ps, tt.want) {
				t.Errorf("problems\n got %s\nwant %s", dump(ps), dump(tt.want))
			}
		})
	}
}

func dump(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "\n  {%s %s %q %q}", p.Code, p.Pointer, p.Value, p.Detail)
	}
	return b.String()
}

func TestFindingFields(t *testing.T) {
	tests := []struct {
		name   string
		mutate []func(map[string]any)
		check  func(Finding) bool
	}{
		{"epoch seconds", []func(map[string]any){set("time", 1735570800)},
			func(f Finding) bool { return f.Time.Equal(time.Unix(1735570800, 0)) }},
		{"epoch milliseconds", []func(map[string]any){set("time", 1735570800123)},
			func(f Finding) bool {
				return f.Time.Equal(time.UnixMilli(1735570800123)) && f.Time.Location() == time.UTC
			}},
		{"seconds at threshold", []func(map[string]any){set("time", 100000000000)},
			func(f Finding) bool { return f.Time.Equal(time.Unix(1e11, 0)) }},
		{"milliseconds past threshold", []func(map[string]any){set("time", 100000000001)},
			func(f Finding) bool { return f.Time.Equal(time.UnixMilli(1e11 + 1)) }},
		{"time zero", []func(map[string]any){set("time", 0)},
			func(f Finding) bool { return f.Time.Equal(time.Unix(0, 0)) }},
		{"time float form", []func(map[string]any){set("time", rawNum("1.7e9"))},
			func(f Finding) bool { return f.Time.Equal(time.Unix(1.7e9, 0)) }},
		// The caption decides the pair; the record is still valid.
		{"caption over a disagreeing id", []func(map[string]any){set("severity", "Critical"), set("severity_id", 1)},
			func(f Finding) bool { return f.Severity == "critical" && f.SeverityID == 5 }},
		{"severity label from id", []func(map[string]any){set("severity_id", 99)},
			func(f Finding) bool { return f.Severity == "other" && f.SeverityID == 99 }},
		{"empty severity string ignored", []func(map[string]any){set("severity", ""), set("severity_id", 0)},
			func(f Finding) bool { return f.Severity == "unknown" }},
		{"label of another case", []func(map[string]any){set("severity", " INFORMATIONAL "), set("severity_id", 3)},
			func(f Finding) bool { return f.Severity == "informational" && f.SeverityID == 1 }},
		{"unknown label: the id's label", []func(map[string]any){set("severity", "Bogus"), set("severity_id", 2)},
			func(f Finding) bool { return f.Severity == "low" && f.SeverityID == 2 }},
		{"vendor label: the id's label", []func(map[string]any){set("severity", "Severe"), set("severity_id", 99)},
			func(f Finding) bool { return f.Severity == "other" && f.SeverityID == 99 }},
		{"severity not a string: the id's caption", []func(map[string]any){set("severity", 5), set("severity_id", 4)},
			func(f Finding) bool { return f.Severity == "high" && f.SeverityID == 4 }},
		{"provider lower-cased", []func(map[string]any){set("cloud.provider", " Azure ")},
			func(f Finding) bool { return f.ProviderType == "azure" }},
		// As a Provider's spec.type records it, so filter[provider_type]
		// names both.
		{"provider as a Provider's type", []func(map[string]any){set("cloud.provider", "Weird Provider!")},
			func(f Finding) bool { return f.ProviderType == "weirdprovider" }},
		{"provider of no letter or digit", []func(map[string]any){set("cloud.provider", "?!")},
			func(f Finding) bool { return f.ProviderType == "unknown" && f.ProviderUID == "123456789012" }},
		{"cloud account wins over unmapped", []func(map[string]any){set("unmapped.provider", "gcp"), set("unmapped.provider_uid", "p")},
			func(f Finding) bool { return f.ProviderType == "aws" && f.ProviderUID == "123456789012" }},
		{"unmapped fallback", []func(map[string]any){del("cloud"), set("unmapped.provider", "Kubernetes"), set("unmapped.provider_uid", "ctx-1")},
			func(f Finding) bool {
				return f.ProviderType == "kubernetes" && f.ProviderUID == "ctx-1" && f.AccountName == "" && f.Region == "eu-west-1"
			}},
		{"region from resources", []func(map[string]any){del("cloud.region"), set("resources", []any{
			map[string]any{"name": "no region"}, "junk", map[string]any{"region": "us-east-2", "uid": "r2"}, map[string]any{"region": "x", "uid": "r3"}})},
			func(f Finding) bool { return f.Region == "us-east-2" && f.ResourceUID == "r2" }},
		{"NUL dropped from labels", []func(map[string]any){set("finding_info.title", "a\x00b"), set("status", "\x00")},
			func(f Finding) bool { return f.Title == "ab" && f.Status == "" }},
		{"escaped keys and values", []func(map[string]any){set("status", "Ne\u00e9w\n")},
			func(f Finding) bool { return f.Status == "Neéw\n" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ps := NewValidator().Check(record(t, tt.mutate...))
			if len(ps) != 0 {
				t.Fatalf("problems: %s", dump(ps))
			}
			if !tt.check(f) {
				t.Errorf("unexpected finding %+v", f)
			}
		})
	}
}

func TestRawRecordEdgeCases(t *testing.T) {
	tests := []struct {
		raw  string
		want []Problem
	}{
		{`"just a string"`, []Problem{{Code: "invalid_record", Detail: "record must be a JSON object, found a string", Value: `"just a string"`}}},
		{`[1, 2]`, []Problem{{Code: "invalid_record", Detail: "record must be a JSON object, found an array", Value: `[1,2]`}}},
		{`null`, []Problem{{Code: "invalid_record", Detail: "record must be a JSON object, found null", Value: `null`}}},
		{`17`, []Problem{{Code: "invalid_record", Detail: "record must be a JSON object, found a number", Value: `17`}}},
	}
	for _, tt := range tests {
		_, ps := NewValidator().Check(Record{Raw: []byte(tt.raw)})
		if !reflect.DeepEqual(ps, tt.want) {
			t.Errorf("%s: got %s", tt.raw, dump(ps))
		}
	}
	// Raw that did not come from a Reader may be broken; it is a record
	// problem, never a panic.
	for _, raw := range []string{``, `{`, `{"a":1} x`, `{"a":1,}`, "{\"a\":\"\xff\"}", `{"class_uid":2004`} {
		_, ps := NewValidator().Check(Record{Raw: []byte(raw)})
		if len(ps) != 1 || ps[0].Code != "invalid_record" || !strings.HasPrefix(ps[0].Detail, "record is not valid JSON") {
			t.Errorf("%q: got %s", raw, dump(ps))
		}
	}
}

func TestEscapedAndDuplicateNames(t *testing.T) {
	base, _ := json.Marshal(baseRecord())
	// "\u0074ime" is "time": escaping must not hide a field.
	raw := bytes.Replace(base, []byte(`"time":`), []byte(`"\u0074ime":`), 1)
	if f, ps := NewValidator().Check(Record{Raw: raw}); len(ps) != 0 || f.Time.IsZero() {
		t.Fatalf("escaped name: %s", dump(ps))
	}
}

// TestDuplicateKey: a member named twice in one object, at any depth and
// however its name is escaped, makes the record invalid; the pointer names
// the second occurrence's path.
func TestDuplicateKey(t *testing.T) {
	base, err := json.Marshal(baseRecord())
	if err != nil {
		t.Fatal(err)
	}
	body := string(bytes.TrimSuffix(bytes.TrimPrefix(base, []byte("{")), []byte("}")))
	many := func(n int, dup bool) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		if dup {
			b.WriteString(`"k7":0,`)
		}
		return b.String()
	}
	cases := []struct {
		name string
		raw  string
		ptr  string // "" when the record has no duplicate
	}{
		{"class_uid twice, the accepted value last", `{"class_uid":9999,` + body + `}`, "/class_uid"},
		{"nested in metadata.product", strings.Replace(string(base), `"name":"Prowler"`, `"name":"Prowler","name":"Other"`, 1), "/metadata/product/name"},
		{"inside an array element", strings.Replace(string(base), `"x":[1,2]`, `"x":[1,2],"x":3`, 1), "/resources/0/data/x"},
		{"in an ignored member", `{"zz":{"a":[{},{"b":1,"b":2}]},` + body + `}`, "/zz/a/1/b"},
		{"escaped spelling of the same name", `{"\u0074ime":1,` + body + `}`, "/time"},
		{"names needing pointer escapes", `{"a/b~c":{"x":1,"x":1},` + body + `}`, "/a~1b~0c/x"},
		{"past the hash threshold", `{"big":{` + many(70, true) + `"end":1},` + body + `}`, "/big/k7"},
		{"many distinct names", `{"big":{` + many(70, false) + `"end":1},` + body + `}`, ""},
		{"same name in sibling objects", `{"p":{"a":1},"q":{"a":1},"r":[{"a":1},{"a":2}],` + body + `}`, ""},
		{"same name at different depths", `{"a":{"a":{"a":1}},` + body + `}`, ""},
		{"a string value equal to a name", `{"k":"class_uid",` + body + `}`, ""},
		{"quotes and colons inside strings", `{"s":"\"a\":1,\"a\":2","t":"{\"","a":1,` + body + `}`, ""},
		{"names that differ only by case", `{"Time":1,` + body + `}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := NewValidator()
			_, ps := v.Check(Record{Raw: []byte(tc.raw)})
			if tc.ptr == "" {
				if len(ps) != 0 {
					t.Fatalf("a record without duplicates is invalid: %s", dump(ps))
				}
				return
			}
			if len(ps) != 1 || ps[0].Code != "duplicate_key" || ps[0].Pointer != tc.ptr || !strings.Contains(ps[0].Detail, tc.ptr) {
				t.Fatalf("got %s; want one duplicate_key at %s", dump(ps), tc.ptr)
			}
			// The same Validator, reused, still reads a clean record.
			if _, ps := v.Check(Record{Raw: base}); len(ps) != 0 {
				t.Fatalf("after a duplicate, a valid record: %s", dump(ps))
			}
		})
	}
}

func TestCheckDoesNotModifyRaw(t *testing.T) {
	rec := record(t)
	before := bytes.Clone(rec.Raw)
	NewValidator().Check(rec)
	if !bytes.Equal(before, rec.Raw) {
		t.Fatal("Check modified Raw")
	}
}

func TestDuplicateUID(t *testing.T) {
	v := NewValidator()
	recs := []Record{
		record(t, set("finding_info.uid", "a"), del("time")), // invalid, still claims "a"
		record(t, set("finding_info.uid", "b")),
		record(t, set("finding_info.uid", "a")),
		record(t, set("finding_info.uid", "b"), set("severity_id", 9)),
	}
	for i := range recs {
		recs[i].Index = i
	}
	var got [][]Problem
	for _, r := range recs {
		_, ps := v.Check(r)
		got = append(got, ps)
	}
	want := [][]Problem{
		{{Code: "missing_field", Pointer: "/time", Detail: "time is required"}},
		nil,
		{{Code: "duplicate_uid", Pointer: "/finding_info/uid", Value: `"a"`, Detail: "finding_info.uid is already used by record 0 earlier in the file"}},
		{
			{Code: "invalid_value", Pointer: "/severity_id", Value: "9", Detail: "severity_id must be 0 to 6 or 99, found 9"},
			{Code: "duplicate_uid", Pointer: "/finding_info/uid", Value: `"b"`, Detail: "finding_info.uid is already used by record 1 earlier in the file"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	// A fresh Validator is a fresh file.
	if _, ps := NewValidator().Check(recs[2]); len(ps) != 0 {
		t.Fatalf("new validator: %s", dump(ps))
	}
}

func TestValueTruncation(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{strings.Repeat("é", 100), strings.Repeat("é", 100)},
		{strings.Repeat("é", 101), strings.Repeat("é", 99) + "…"},
		{strings.Repeat("a", 100), strings.Repeat("a", 100)},
		{strings.Repeat("a", 101), strings.Repeat("a", 99) + "…"},
	} {
		if got := truncate(tt.in, 100); got != tt.want {
			t.Errorf("truncate(%d runes) = %q", len([]rune(tt.in)), got)
		}
	}
}

// validateFile runs the whole pipeline the worker runs.
func validateFile(tb testing.TB, data []byte) ([]Finding, map[int][]Problem) {
	tb.Helper()
	v := NewValidator()
	rd := NewReader(bytes.NewReader(data))
	var findings []Finding
	problems := map[int][]Problem{}
	for {
		rec, err := rd.Next()
		if err != nil {
			if err.Error() != "EOF" {
				tb.Fatal(err)
			}
			return findings, problems
		}
		f, ps := v.Check(rec)
		if len(ps) > 0 {
			problems[rec.Index] = ps
		} else {
			findings = append(findings, f)
		}
	}
}

func TestFixture1500(t *testing.T) {
	findings, problems := validateFile(t, readFixture(t, "aws_1500_records.ocsf.json"))
	if len(findings) != 1500 || len(problems) != 0 {
		t.Fatalf("%d valid, problems %v", len(findings), problems)
	}
	want := Finding{
		UID:            "prowler-aws-accessanalyzer_enabled-123456789012-us-east-1-27be94f1",
		CheckID:        "accessanalyzer_enabled",
		Title:          "ACCESSANALYZER Accessanalyzer Enabled",
		Severity:       "critical", // the file's caption decides: its severity_id says 1
		SeverityID:     5,
		StatusCode:     "PASS",
		Status:         "New",
		Region:         "us-east-1",
		ProviderType:   "aws",
		ProviderUID:    "123456789012",
		AccountName:    "Test AWS Account",
		AccountPointer: "/cloud/account/uid",
		ResourceUID:    "arn:aws:accessanalyzer:us-east-1:123456789012:resource-0",
		Time:           time.Unix(1767154669, 0).UTC(),
	}
	if findings[0] != want {
		t.Fatalf("first finding\n got %+v\nwant %+v", findings[0], want)
	}
	// The file numbers its captions backwards (Critical 1 ... Informational
	// 5); each finding carries its caption's number.
	sev := map[string]int{}
	for _, f := range findings {
		sev[fmt.Sprintf("%s/%d", f.Severity, f.SeverityID)]++
	}
	if want := map[string]int{"critical/5": 300, "high/4": 300, "medium/3": 300, "low/2": 300, "informational/1": 300}; !reflect.DeepEqual(sev, want) {
		t.Fatalf("severities %v, want %v", sev, want)
	}
}

func TestFixtureExamples(t *testing.T) {
	const accountDetail = "no account to bill: the record needs cloud.provider and cloud.account.uid, or unmapped.provider and unmapped.provider_uid, as non-empty strings"
	dup := Problem{Code: "duplicate_uid", Pointer: "/finding_info/uid", Value: `"<finding_uid>"`, Detail: "finding_info.uid is already used by record 0 earlier in the file"}
	noAccount := Problem{Code: "missing_account", Pointer: "/cloud/account/uid", Detail: accountDetail}
	tests := []struct {
		file     string
		valid    int
		provider string
		problems map[int][]Problem
	}{
		{"aws_3_records.ocsf.json", 3, "aws", map[int][]Problem{}},
		// Every record carries the placeholder uid "<finding_uid>".
		{"example_output_aws.ocsf.json", 1, "aws", map[int][]Problem{1: {dup}, 2: {dup}, 3: {dup}, 4: {dup}}},
		// Record 3 has a real uid; the others share the placeholder.
		{"example_output_azure.ocsf.json", 2, "azure", map[int][]Problem{1: {dup}, 2: {dup}, 4: {dup}}},
		{"example_output_gcp.ocsf.json", 1, "gcp", map[int][]Problem{1: {dup}, 2: {dup}, 3: {dup}, 4: {dup}}},
		// The Kubernetes example has neither cloud nor unmapped.provider /
		// provider_uid, so no record names an account to bill.
		{"example_output_kubernetes.ocsf.json", 0, "", map[int][]Problem{
			0: {noAccount}, 1: {noAccount, dup}, 2: {noAccount, dup}, 3: {noAccount, dup}, 4: {noAccount, dup}, 5: {noAccount, dup},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			findings, problems := validateFile(t, readFixture(t, tt.file))
			if len(findings) != tt.valid {
				t.Errorf("%d valid records, want %d", len(findings), tt.valid)
			}
			for _, f := range findings {
				if f.ProviderType != tt.provider || f.ProviderUID == "" || f.UID == "" || f.Time.IsZero() || f.CheckID == "" {
					t.Errorf("incomplete finding %+v", f)
				}
			}
			if !reflect.DeepEqual(problems, tt.problems) {
				t.Errorf("problems\n got %v\nwant %v", problems, tt.problems)
			}
		})
	}
}

// A record of another class gets only unsupported_class, but its error row
// still names the record by its finding uid when it has a usable one.
func TestUnsupportedClassKeepsUID(t *testing.T) {
	tests := []struct {
		name   string
		mutate []func(map[string]any)
		want   string
	}{
		{"uid kept", []func(map[string]any){set("class_uid", 2003)}, "f-1"},
		{"no finding_info", []func(map[string]any){set("class_uid", 2003), del("finding_info")}, ""},
		{"no uid", []func(map[string]any){set("class_uid", 2003), del("finding_info.uid")}, ""},
		{"uid not a string", []func(map[string]any){set("class_uid", 2003), set("finding_info.uid", 7)}, ""},
		{"blank uid", []func(map[string]any){set("class_uid", 2003), set("finding_info.uid", "  ")}, ""},
		{"uid with NUL", []func(map[string]any){set("class_uid", 2003), set("finding_info.uid", "a\x00b")}, ""},
		{"uid too long", []func(map[string]any){set("class_uid", 2003), set("finding_info.uid", strings.Repeat("u", MaxUIDLength+1))}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ps := NewValidator().Check(record(t, tt.mutate...))
			if len(ps) != 1 || ps[0].Code != CodeUnsupportedClass {
				t.Fatalf("problems: %s", dump(ps))
			}
			if f.UID != tt.want {
				t.Errorf("UID = %q, want %q", f.UID, tt.want)
			}
		})
	}
}

// AccountPointer says where the billed account was read, so that a
// provider_limit_exceeded row points at a member the record has.
func TestAccountPointer(t *testing.T) {
	tests := []struct {
		name   string
		mutate []func(map[string]any)
		want   string
	}{
		{"cloud account", nil, "/cloud/account/uid"},
		{"cloud kubernetes", []func(map[string]any){set("cloud.provider", "kubernetes")}, "/cloud/account/uid"},
		{"unmapped fallback", []func(map[string]any){del("cloud"), set("unmapped.provider", "aws"), set("unmapped.provider_uid", "p")}, "/unmapped/provider_uid"},
		{"unmapped kubernetes", []func(map[string]any){del("cloud"), set("unmapped.provider", "kubernetes"), set("unmapped.provider_uid", "ctx")}, "/unmapped/provider_uid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ps := NewValidator().Check(record(t, tt.mutate...))
			if len(ps) != 0 {
				t.Fatalf("problems: %s", dump(ps))
			}
			if f.AccountPointer != tt.want {
				t.Errorf("AccountPointer = %q, want %q", f.AccountPointer, tt.want)
			}
		})
	}
}

func TestValueText(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"123456789012", `"123456789012"`},
		{`a"b`, `"a\"b"`},
		{strings.Repeat("x", 150), `"` + strings.Repeat("x", 98) + "…"},
	} {
		if got := ValueText(tt.in); got != tt.want {
			t.Errorf("ValueText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
