package ocsf

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

// fixtures are real Prowler outputs (copied from the shared fixture set so the
// package tests stand alone), with the record count of each.
var fixtures = []struct {
	name  string
	count int
}{
	{"aws_1500_records.ocsf.json", 1500},
	{"aws_3_records.ocsf.json", 3},
	{"example_output_aws.ocsf.json", 5},
	{"example_output_azure.ocsf.json", 5},
	{"example_output_gcp.ocsf.json", 5},
	{"example_output_kubernetes.ocsf.json", 6},
}

func readFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "prowler", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// readAll drains a Reader, returning the records and the terminal error
// (nil when it ended with io.EOF).
func readAll(r io.Reader) ([]Record, error) {
	rd := NewReader(r)
	var recs []Record
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		recs = append(recs, rec)
	}
}

func TestFixturesCountAndReader(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.name, func(t *testing.T) {
			data := readFixture(t, fx.name)
			n, err := Count(bytes.NewReader(data))
			if err != nil || n != fx.count {
				t.Fatalf("Count = %d, %v; want %d", n, err, fx.count)
			}
			recs, err := readAll(bytes.NewReader(data))
			if err != nil || len(recs) != fx.count {
				t.Fatalf("Reader: %d records, %v; want %d", len(recs), err, fx.count)
			}
			for i, rec := range recs {
				if rec.Index != i {
					t.Errorf("record %d has Index %d", i, rec.Index)
				}
				if got := data[rec.Offset : rec.Offset+int64(len(rec.Raw))]; !bytes.Equal(got, rec.Raw) {
					t.Fatalf("record %d: Raw is not the file bytes at Offset %d", i, rec.Offset)
				}
				if rec.Raw[0] != '{' || rec.Raw[len(rec.Raw)-1] != '}' {
					t.Fatalf("record %d: Raw is not an exact object: %.20q...", i, rec.Raw)
				}
			}
			// One byte at a time must give the very same records.
			slow, err := readAll(iotest.OneByteReader(bytes.NewReader(data)))
			if err != nil || len(slow) != len(recs) {
				t.Fatalf("one-byte Reader: %d records, %v", len(slow), err)
			}
			for i := range slow {
				if slow[i].Offset != recs[i].Offset || !bytes.Equal(slow[i].Raw, recs[i].Raw) {
					t.Fatalf("one-byte Reader differs at record %d", i)
				}
			}
		})
	}
}

func TestRawIsAFreshCopy(t *testing.T) {
	rd := NewReader(strings.NewReader(`[{"a":1},{"b":2}]`))
	first, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Next(); err != nil {
		t.Fatal(err)
	}
	if string(first.Raw) != `{"a":1}` {
		t.Fatalf("first record changed after Next: %s", first.Raw)
	}
}

func TestValidArrays(t *testing.T) {
	tests := []struct {
		in      string
		count   int
		raws    []string
		offsets []int64
	}{
		{"[]", 0, nil, nil},
		{" \r\n\t[ ] \n", 0, nil, nil},
		{"\xEF\xBB\xBF[{}]", 1, []string{"{}"}, []int64{4}},
		{`[1,"a",null,true,false,{},[]]`, 7, []string{"1", `"a"`, "null", "true", "false", "{}", "[]"}, []int64{1, 3, 7, 12, 17, 23, 26}},
		{`[ -0.5e+10 , 0,1E5,-0]`, 4, []string{"-0.5e+10", "0", "1E5", "-0"}, []int64{2, 13, 15, 19}},
		{`[{"k":[1,{"x":"]"}]} , "\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00é😀"]`, 2,
			[]string{`{"k":[1,{"x":"]"}]}`, `"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00é😀"`}, []int64{1, 23}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			n, err := Count(strings.NewReader(tt.in))
			if err != nil || n != tt.count {
				t.Fatalf("Count = %d, %v; want %d", n, err, tt.count)
			}
			for _, r := range []io.Reader{strings.NewReader(tt.in), iotest.OneByteReader(strings.NewReader(tt.in))} {
				recs, err := readAll(r)
				if err != nil || len(recs) != tt.count {
					t.Fatalf("Reader: %d records, %v", len(recs), err)
				}
				for i, rec := range recs {
					if string(rec.Raw) != tt.raws[i] || rec.Offset != tt.offsets[i] {
						t.Errorf("record %d = %q at %d; want %q at %d", i, rec.Raw, rec.Offset, tt.raws[i], tt.offsets[i])
					}
				}
			}
		})
	}
}

func TestFileErrors(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1)
	tests := []struct {
		name   string
		in     string
		offset int64
		reason string
		recs   int // records the Reader yields before the error
	}{
		{"empty", "", 0, "empty file", 0},
		{"whitespace only", " \n\t\r ", 0, "empty file", 0},
		{"bom only", "\xEF\xBB\xBF \n", 0, "empty file", 0},
		{"top-level object", `{"class_uid":2004}`, 0, "expected a JSON array at byte 0, found an object", 0},
		{"object after whitespace", "\n  {}", 3, "expected a JSON array at byte 3, found an object", 0},
		{"top-level string", `"x"`, 0, "expected a JSON array at byte 0, found a string", 0},
		{"top-level number", `12`, 0, "expected a JSON array at byte 0, found a number", 0},
		{"top-level null", `null`, 0, "expected a JSON array at byte 0, found null", 0},
		{"top-level garbage", `<html>`, 0, "expected a JSON array at byte 0, found invalid character '<'", 0},
		{"bad bom", "\xEF\xBB[]", 0, "malformed JSON at byte 0: invalid character 0xEF looking for beginning of value", 0},
		{"truncated between records", `[{"a":1},`, 9, "unexpected end of file at byte 9 (truncated JSON)", 1},
		{"truncated inside record", `[{"a":1},{"b":`, 14, "unexpected end of file at byte 14 (truncated JSON) (in record 1, which starts at byte 9)", 1},
		{"truncated after open", `[`, 1, "unexpected end of file at byte 1 (truncated JSON)", 0},
		{"truncated number", `[1`, 2, "unexpected end of file at byte 2 (truncated JSON) (in record 0, which starts at byte 1)", 0},
		{"trailing garbage", `[{}] x`, 5, "unexpected data at byte 5 after the end of the top-level array", 1},
		{"second array", "[]\n[]", 3, "unexpected data at byte 3 after the end of the top-level array", 0},
		{"trailing comma", `[{"a":1},]`, 9, "malformed JSON at byte 9: invalid character ']' looking for beginning of value", 1},
		{"missing comma", `[1 2]`, 3, "malformed JSON at byte 3: invalid character '2' after array element", 1},
		{"comma in object", `[{"a":1,}]`, 8, "malformed JSON at byte 8: invalid character '}' looking for beginning of object key string (in record 0, which starts at byte 1)", 0},
		{"missing colon", `[{"a" 1}]`, 6, "malformed JSON at byte 6: invalid character '1' after object key (in record 0, which starts at byte 1)", 0},
		{"mismatched bracket", `[{"a":1]]`, 7, "malformed JSON at byte 7: invalid character ']' after object key:value pair (in record 0, which starts at byte 1)", 0},
		{"bad literal", `[tru]`, 4, "malformed JSON at byte 4: invalid character ']' in literal true (expecting 'e') (in record 0, which starts at byte 1)", 0},
		{"leading zero", `[01]`, 2, "malformed JSON at byte 2: invalid character '1' after array element", 1},
		{"bare minus", `[-]`, 2, "malformed JSON at byte 2: invalid character ']' in numeric literal (in record 0, which starts at byte 1)", 0},
		{"bare dot", `[1.]`, 3, "malformed JSON at byte 3: invalid character ']' after decimal point in numeric literal (in record 0, which starts at byte 1)", 0},
		{"bare exponent", `[1e+]`, 4, "malformed JSON at byte 4: invalid character ']' in exponent of numeric literal (in record 0, which starts at byte 1)", 0},
		{"single quotes", `[{'a':1}]`, 2, "malformed JSON at byte 2: invalid character '\\'' looking for beginning of object key string (in record 0, which starts at byte 1)", 0},
		{"newline in string", "[\"a\nb\"]", 3, "malformed JSON at byte 3: invalid character 0x0A in string literal (control characters must be escaped) (in record 0, which starts at byte 1)", 0},
		{"bad escape", `["\x"]`, 3, "malformed JSON at byte 3: invalid character 'x' in string escape code (in record 0, which starts at byte 1)", 0},
		{"bad hex", `["\u12g4"]`, 6, "malformed JSON at byte 6: invalid character 'g' in \\u hexadecimal character escape (in record 0, which starts at byte 1)", 0},
		{"invalid utf8", "[{\"a\":\"x\xffy\"}]", 8, "malformed JSON at byte 8: invalid UTF-8 in string (in record 0, which starts at byte 1)", 0},
		{"overlong utf8", "[\"\xC0\xAF\"]", 2, "malformed JSON at byte 2: invalid UTF-8 in string (in record 0, which starts at byte 1)", 0},
		{"encoded surrogate", "[\"\xED\xA0\x80\"]", 2, "malformed JSON at byte 2: invalid UTF-8 in string (in record 0, which starts at byte 1)", 0},
		{"truncated utf8", "[\"\xE2\x82\"]", 2, "malformed JSON at byte 2: invalid UTF-8 in string (in record 0, which starts at byte 1)", 0},
		{"lone high surrogate", `["ab\ud83d"]`, 4, "malformed JSON at byte 4: unpaired UTF-16 surrogate escape in string (in record 0, which starts at byte 1)", 0},
		{"high then letter escape", `["\ud83d\n"]`, 2, "malformed JSON at byte 2: unpaired UTF-16 surrogate escape in string (in record 0, which starts at byte 1)", 0},
		{"two high surrogates", `["\ud83d\ud83d"]`, 2, "malformed JSON at byte 2: unpaired UTF-16 surrogate escape in string (in record 0, which starts at byte 1)", 0},
		{"lone low surrogate", `["\ude00"]`, 2, "malformed JSON at byte 2: unpaired UTF-16 surrogate escape in string (in record 0, which starts at byte 1)", 0},
		{"too deep", deep, MaxDepth, "malformed JSON at byte 1000: nesting deeper than 1000 levels (in record 0, which starts at byte 1)", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(what string, err error) {
				t.Helper()
				var fe *FileError
				if !errors.As(err, &fe) {
					t.Fatalf("%s: got %v, want a *FileError", what, err)
				}
				if fe.Offset != tt.offset || fe.Reason != tt.reason || fe.Error() != tt.reason {
					t.Errorf("%s: got offset %d %q\nwant offset %d %q", what, fe.Offset, fe.Reason, tt.offset, tt.reason)
				}
			}
			n, err := Count(strings.NewReader(tt.in))
			if n != 0 {
				t.Errorf("Count returned %d with an error", n)
			}
			check("Count", err)
			for _, r := range []io.Reader{strings.NewReader(tt.in), iotest.OneByteReader(strings.NewReader(tt.in))} {
				recs, err := readAll(r)
				check("Reader", err)
				if len(recs) != tt.recs {
					t.Errorf("Reader yielded %d records before the error, want %d", len(recs), tt.recs)
				}
			}
		})
	}
}

func TestReaderKeepsReturningError(t *testing.T) {
	rd := NewReader(strings.NewReader(`[1 2]`))
	if _, err := rd.Next(); err != nil {
		t.Fatal(err)
	}
	_, err1 := rd.Next()
	_, err2 := rd.Next()
	if err1 == nil || err1 != err2 {
		t.Fatalf("errors %v then %v", err1, err2)
	}
	rd = NewReader(strings.NewReader(`[]`))
	for range 2 {
		if _, err := rd.Next(); err != io.EOF {
			t.Fatalf("got %v, want io.EOF", err)
		}
	}
}

func TestReaderPassesReadErrors(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader(`[{"a":1},`), iotest.ErrReader(boom))
	recs, err := readAll(r)
	if len(recs) != 1 || err != boom {
		t.Fatalf("got %d records, %v; want 1, boom", len(recs), err)
	}
	if _, err := Count(io.MultiReader(strings.NewReader(`[`), iotest.ErrReader(boom))); err != boom {
		t.Fatalf("Count: %v", err)
	}
}

func TestMaxRecordSize(t *testing.T) {
	// A record of exactly MaxRecordSize bytes passes; one more byte fails.
	build := func(size int) string {
		pad := size - len(`{"p":""}`)
		return `[{"a":1}, {"p":"` + strings.Repeat("x", pad) + `"}, 7]`
	}
	n, err := Count(strings.NewReader(build(MaxRecordSize)))
	if err != nil || n != 3 {
		t.Fatalf("record of MaxRecordSize: Count = %d, %v", n, err)
	}
	recs, err := readAll(strings.NewReader(build(MaxRecordSize)))
	if err != nil || len(recs) != 3 || len(recs[1].Raw) != MaxRecordSize {
		t.Fatalf("record of MaxRecordSize: Reader = %d records, %v", len(recs), err)
	}
	want := "record 1 at byte 10 is larger than the 16 MiB limit"
	_, err = Count(strings.NewReader(build(MaxRecordSize + 1)))
	var fe *FileError
	if !errors.As(err, &fe) || fe.Reason != want || fe.Offset != 10 {
		t.Fatalf("Count: %v", err)
	}
	recs, err = readAll(strings.NewReader(build(MaxRecordSize + 1)))
	if !errors.As(err, &fe) || fe.Reason != want || len(recs) != 1 {
		t.Fatalf("Reader: %d records, %v", len(recs), err)
	}
}

// TestRecordLimitBoundary checks the limit for every kind of value, since a
// number ends only at the byte after it, with a small limit to see the
// verdict is the same whatever the chunking.
func TestRecordLimitBoundary(t *testing.T) {
	for _, tt := range []struct {
		rec string
		ok  bool
	}{
		{"12345678", true}, {"123456789", false},
		{`"123456"`, true}, {`"1234567"`, false},
		{`[1,2,33]`, true}, {`[1,2,333]`, false},
		{"-1.5e+10", true}, {"-1.5e+100", false},
	} {
		in := "[0, " + tt.rec + " ]"
		for chunk := 1; chunk <= len(in); chunk++ {
			s := newTokenizer()
			s.maxRecord = 8
			var ferr *FileError
			for b := []byte(in); len(b) > 0 && ferr == nil; {
				k := min(chunk, len(b))
				ferr = s.feed(b[:k])
				b = b[k:]
			}
			n, fin := s.finish()
			if tt.ok && (ferr != nil || fin != nil || n != 2) {
				t.Fatalf("%s chunk %d: %v %v %d", tt.rec, chunk, ferr, fin, n)
			}
			if !tt.ok && (ferr == nil || ferr.Reason != "record 1 at byte 4 is larger than the 8-byte limit") {
				t.Fatalf("%s chunk %d: got %v", tt.rec, chunk, ferr)
			}
		}
	}
}

// NextBorrowed hands out views of the Reader's buffers. Whatever way reads
// split the input (records inside one read, across reads, larger than the
// read buffer), each view must hold exactly the record's bytes when it is
// returned.
func TestNextBorrowedMatchesNext(t *testing.T) {
	big := `{"big":"` + strings.Repeat("x", 3*chunkSize) + `"}`
	inputs := map[string][]byte{
		"fixture":      readFixture(t, "aws_1500_records.ocsf.json"),
		"large record": []byte(`[{"a":1},` + big + `,{"b":[2]},` + big + `]`),
		"scalars":      []byte(` [1, "two" ,{"three":3},[4],null ,true]`),
	}
	for name, data := range inputs {
		want, err := readAll(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		readers := map[string]func() io.Reader{
			"whole":    func() io.Reader { return bytes.NewReader(data) },
			"half":     func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) },
			"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) },
		}
		for how, open := range readers {
			rd := NewReader(open())
			for i := 0; ; i++ {
				rec, err := rd.NextBorrowed()
				if err == io.EOF {
					if i != len(want) {
						t.Fatalf("%s, %s reads: %d records, want %d", name, how, i, len(want))
					}
					break
				}
				if err != nil {
					t.Fatalf("%s, %s reads, record %d: %v", name, how, i, err)
				}
				if rec.Index != want[i].Index || rec.Offset != want[i].Offset || !bytes.Equal(rec.Raw, want[i].Raw) {
					t.Fatalf("%s, %s reads: record %d is %.40q at %d, want %.40q at %d", name, how, i, rec.Raw, rec.Offset, want[i].Raw, want[i].Offset)
				}
			}
		}
	}
}

// TestFileErrorsWithoutContent: the redacted form of a whole-file problem
// says where and what kind, and quotes no byte of the file: a Secret that is
// not a report must not show its first character in an Ingestion's status.
func TestFileErrorsWithoutContent(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"a password", "password", "expected a JSON array at byte 0"},
		{"a key after whitespace", "\n  hunter2", "expected a JSON array at byte 3"},
		{"a JSON object", `{"token":"s3cr3t"}`, "expected a JSON array at byte 0"},
		{"a number", `12345`, "expected a JSON array at byte 0"},
		{"a literal", `true`, "expected a JSON array at byte 0"},
		{"a bad literal", `[tXue]`, "malformed JSON at byte 2: unexpected character in a literal (true, false or null) (in record 0, which starts at byte 1)"},
		{"a word in an array", `[s3cr3t]`, "malformed JSON at byte 1: unexpected character looking for beginning of value"},
		{"after an element", `[1 p]`, "malformed JSON at byte 3: unexpected character after array element"},
		{"an object key", `[{p:1}]`, "malformed JSON at byte 2: unexpected character looking for beginning of object key string (in record 0, which starts at byte 1)"},
		{"after a key", `[{"a" p}]`, "malformed JSON at byte 6: unexpected character after object key (in record 0, which starts at byte 1)"},
		{"a string escape", `["\p"]`, "malformed JSON at byte 3: unexpected character in string escape code (in record 0, which starts at byte 1)"},
		{"a hex escape", `["\u12pq"]`, "malformed JSON at byte 6: unexpected character in \\u hexadecimal character escape (in record 0, which starts at byte 1)"},
		{"a number", `[-p]`, "malformed JSON at byte 2: unexpected character in numeric literal (in record 0, which starts at byte 1)"},
		{"a bad byte order mark", "\xEF\xBBp", "malformed JSON at byte 0: unexpected character looking for beginning of value"},
		{"no content to quote", `[1`, "unexpected end of file at byte 2 (truncated JSON) (in record 0, which starts at byte 1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Count(strings.NewReader(tt.in))
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *FileError", err)
			}
			if got := fe.WithoutContent(); got != tt.want {
				t.Errorf("WithoutContent() = %q\nwant %q\n(Reason %q)", got, tt.want, fe.Reason)
			}
		})
	}
}
