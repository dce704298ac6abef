package ocsf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"
)

// oracle extracts what the validator reads from a record with
// encoding/json, a decoder that shares no code with the cursor: the cursor
// must agree with it on every record a Reader yields.
func oracle(raw []byte) (f fields, root jval, ok bool) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var top any
	if err := d.Decode(&top); err != nil {
		return f, root, false
	}
	m, isObj := top.(map[string]any)
	if !isObj {
		return f, oracleVal(top, true), true
	}
	get := func(m map[string]any, k string) jval {
		v, ok := m[k]
		return oracleVal(v, ok)
	}
	f.classUID, f.activityID, f.categoryUID = get(m, "class_uid"), get(m, "activity_id"), get(m, "category_uid")
	f.typeUID, f.time, f.severityID = get(m, "type_uid"), get(m, "time"), get(m, "severity_id")
	f.severity, f.status, f.statusCode = get(m, "severity"), get(m, "status"), get(m, "status_code")
	f.metadata, f.findingInfo, f.cloud, f.unmapped = get(m, "metadata"), get(m, "finding_info"), get(m, "cloud"), get(m, "unmapped")
	if md, ok := m["metadata"].(map[string]any); ok {
		f.md.version, f.md.eventCode, f.md.product = get(md, "version"), get(md, "event_code"), get(md, "product")
		if p, ok := md["product"].(map[string]any); ok {
			f.md.prodName, f.md.prodUID = get(p, "name"), get(p, "uid")
		}
	}
	if fi, ok := m["finding_info"].(map[string]any); ok {
		f.fi.uid, f.fi.title = get(fi, "uid"), get(fi, "title")
	}
	if cl, ok := m["cloud"].(map[string]any); ok {
		f.cl.provider, f.cl.region, f.cl.account = get(cl, "provider"), get(cl, "region"), get(cl, "account")
		if a, ok := cl["account"].(map[string]any); ok {
			f.cl.accountUID, f.cl.accountName = get(a, "uid"), get(a, "name")
		}
	}
	if um, ok := m["unmapped"].(map[string]any); ok {
		f.um.provider, f.um.providerUID, f.um.scanID = get(um, "provider"), get(um, "provider_uid"), get(um, "scan_id")
	}
	if rs, ok := m["resources"].([]any); ok {
		for _, r := range rs {
			if r, ok := r.(map[string]any); ok {
				if f.resRegion == "" {
					f.resRegion = get(r, "region").text()
				}
				if f.resUID == "" {
					f.resUID = get(r, "uid").text()
				}
			}
		}
	}
	return f, jval{}, true
}

func oracleVal(v any, present bool) jval {
	if !present {
		return jval{}
	}
	switch v := v.(type) {
	case nil:
		return jval{set: true, kind: 'n', str: "null"}
	case bool:
		if v {
			return jval{set: true, kind: 't', str: "true"}
		}
		return jval{set: true, kind: 'f', str: "false"}
	case json.Number:
		return jval{set: true, kind: '0', str: string(v)}
	case string:
		return jval{set: true, kind: '"', str: v}
	case map[string]any:
		return jval{set: true, kind: '{'}
	case []any:
		return jval{set: true, kind: '['}
	}
	panic(fmt.Sprintf("unexpected %T", v))
}

// flat lists every captured value, labelled, with container text left out
// (encoding/json does not keep member order).
func (f *fields) flat() []string {
	var out []string
	for _, x := range []struct {
		name string
		v    jval
	}{
		{"class_uid", f.classUID}, {"activity_id", f.activityID}, {"category_uid", f.categoryUID},
		{"type_uid", f.typeUID}, {"time", f.time}, {"severity_id", f.severityID}, {"severity", f.severity},
		{"status", f.status}, {"status_code", f.statusCode}, {"metadata", f.metadata}, {"metadata.version", f.md.version},
		{"metadata.event_code", f.md.eventCode}, {"metadata.product", f.md.product}, {"metadata.product.name", f.md.prodName},
		{"metadata.product.uid", f.md.prodUID}, {"finding_info", f.findingInfo}, {"finding_info.uid", f.fi.uid},
		{"finding_info.title", f.fi.title}, {"cloud", f.cloud}, {"cloud.provider", f.cl.provider}, {"cloud.region", f.cl.region},
		{"cloud.account", f.cl.account}, {"cloud.account.uid", f.cl.accountUID}, {"cloud.account.name", f.cl.accountName},
		{"unmapped", f.unmapped}, {"unmapped.provider", f.um.provider}, {"unmapped.provider_uid", f.um.providerUID},
		{"unmapped.scan_id", f.um.scanID},
	} {
		out = append(out, x.name+"="+x.v.describe())
	}
	return append(out, "resources[].region="+f.resRegion, "resources[].uid="+f.resUID)
}

func (j jval) describe() string {
	switch {
	case !j.set:
		return "absent"
	case j.kind == '{' || j.kind == '[':
		return string(j.kind)
	}
	return fmt.Sprintf("%c %q", j.kind, j.str)
}

// agreeWithOracle parses rec with the cursor and with the oracle and
// reports the first difference.
func agreeWithOracle(t testing.TB, v *Validator, rec Record) {
	t.Helper()
	var f fields
	var root jval
	err := v.parse(rec, &f, &root)
	want, wantRoot, ok := oracle(rec.Raw)
	if !ok {
		t.Fatalf("record %d: encoding/json rejects a record the Reader yielded: %q", rec.Index, rec.Raw)
	}
	if err == errNotObject {
		if root.describe() != wantRoot.describe() {
			t.Fatalf("record %d: root %s, oracle %s", rec.Index, root.describe(), wantRoot.describe())
		}
		return
	}
	if err != nil {
		t.Fatalf("record %d: cursor failed on a valid record: %v\n%q", rec.Index, err, rec.Raw)
	}
	got, exp := f.flat(), want.flat()
	for i := range got {
		if got[i] != exp[i] {
			t.Fatalf("record %d: cursor read %s, oracle %s\n%q", rec.Index, got[i], exp[i], rec.Raw)
		}
	}
}

// TestCursorAgreesWithDecoder runs every fixture record, and records shaped
// to trip a structure-skipping parser, through the cursor and the oracle.
func TestCursorAgreesWithDecoder(t *testing.T) {
	var reports [][]byte
	for _, fx := range fixtures {
		reports = append(reports, readFixture(t, fx.name))
	}
	base, err := json.Marshal(baseRecord())
	if err != nil {
		t.Fatal(err)
	}
	tricky := []string{
		`{"finding_info":{"uid":"a\"b\\","title":"\\\\\""},"class_uid":2004}`,
		`{"x":"}]\"{[","finding_info":{"uid":"\u0041\ud83d\ude00"},"class_uid":-1.5E+3}`,
		` { "cloud" : { "account" : { "uid" : "1" , "name" : null } , "provider" : "aws" } , "time" : 0 } `,
		`{"metadata":{"product":{"name":"p"}},"metadata":"again","finding_info":{"uid":"1"},"finding_info":{"title":"t"}}`,
		`{"resources":[1,"x",{"region":"","uid":"u1"},{"region":"r2","uid":"u2"},[{"region":"no"}]],"resources":[{"region":"r3"}]}`,
		`{"unmapped":{"scan_id":["a",{"b":"]"}],"provider":true,"provider_uid":false},"status":{"s":[[[]]]}}`,
		`{"\u0063lass_uid":2004,"sev\u0065rity_id":1,"class_uid":2003}`,
		`{}`, `[]`, `"s"`, `-0.0e-0`, `true`, `null`, `{"a":{}}`, `{"metadata":[]}`,
	}
	for _, s := range tricky {
		reports = append(reports, []byte("["+s+"]"))
	}
	reports = append(reports, []byte("["+string(base)+"]"))
	v := NewValidator()
	n := 0
	for _, data := range reports {
		rd := NewReader(bytes.NewReader(data))
		for {
			rec, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			agreeWithOracle(t, v, rec)
			n++
		}
	}
	if n < 1500 {
		t.Fatalf("only %d records compared", n)
	}
}
