package ocsf

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// fuzzSeeds adds the fixture files and their first records. The 1500-record
// file is left out: at 3 MB every mutation would cost milliseconds, and its
// structure is the same as the small AWS files. TestFixture1500 covers it.
func fuzzSeeds(f *testing.F, records bool) {
	for _, fx := range fixtures {
		if fx.count > 100 {
			continue
		}
		data := readFixture(f, fx.name)
		f.Add(data)
		if records {
			rec, err := NewReader(bytes.NewReader(data)).Next()
			if err != nil {
				f.Fatal(err)
			}
			f.Add(rec.Raw)
		}
	}
	if records {
		small, err := json.Marshal(baseRecord())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(small)
	}
	for _, s := range []string{
		``, ` `, `[]`, `{}`, `[1,"a",null,{}]`, `[{"a":1},]`, `["\ud83d\ude00"]`, "\xEF\xBB\xBF[]",
		`{"class_uid":2004,"time":1.5e12,"severity_id":99,"finding_info":{"uid":"\u0061"}}`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzReader checks that Count and Reader (in any chunking) agree on every input, and that their notion of valid matches a strict
// JSON parser.
func FuzzReader(f *testing.F) {
	fuzzSeeds(f, false)
	f.Fuzz(func(t *testing.T, data []byte) {
		n, errC := Count(bytes.NewReader(data))
		recs, errR := readAll(bytes.NewReader(data))
		recs1, errR1 := readAll(&jaggedReader{data: data})

		var feC, feR *FileError
		if errC != nil && !errors.As(errC, &feC) || errR != nil && !errors.As(errR, &feR) {
			t.Fatalf("non-FileError from a bytes.Reader: %v / %v", errC, errR)
		}
		if (errC == nil) != (errR == nil) {
			t.Fatalf("Count says %v, Reader says %v", errC, errR)
		}
		if errC != nil && (feC.Reason != feR.Reason || feC.Offset != feR.Offset) {
			t.Fatalf("Count: %v\nReader: %v", errC, errR)
		}
		if errC == nil && n != len(recs) {
			t.Fatalf("Count = %d, Reader gave %d records", n, len(recs))
		}
		if errC != nil && n != 0 {
			t.Fatalf("Count = %d with an error", n)
		}
		if (errR1 == nil) != (errR == nil) || errR != nil && errR1.Error() != errR.Error() || len(recs1) != len(recs) {
			t.Fatalf("chunking changed the result: %v / %v", errR, errR1)
		}
		// Borrowed records, checked before the next call reuses the buffers.
		borrowing := NewReader(&jaggedReader{data: data})
		for i := 0; ; i++ {
			rec, err := borrowing.NextBorrowed()
			if err != nil {
				if (err == io.EOF) != (errR == nil) || i != len(recs) {
					t.Fatalf("NextBorrowed ended with %v after %d records; Next with %v after %d", err, i, errR, len(recs))
				}
				break
			}
			if i >= len(recs) || rec.Offset != recs[i].Offset || !bytes.Equal(rec.Raw, recs[i].Raw) {
				t.Fatalf("NextBorrowed record %d differs from Next's", i)
			}
		}
		for i, rec := range recs {
			if rec.Index != i || rec.Offset < 0 || rec.Offset+int64(len(rec.Raw)) > int64(len(data)) ||
				!bytes.Equal(data[rec.Offset:rec.Offset+int64(len(rec.Raw))], rec.Raw) {
				t.Fatalf("record %d (offset %d) is not the file's bytes", i, rec.Offset)
			}
			if recs1[i].Offset != rec.Offset || !bytes.Equal(recs1[i].Raw, rec.Raw) {
				t.Fatalf("record %d differs with small reads", i)
			}
			if !jsontext.Value(rec.Raw).IsValid(jsontext.AllowDuplicateNames(true)) {
				t.Fatalf("record %d is not valid JSON: %q", i, rec.Raw)
			}
		}

		// Oracle: a strict parser (the Validator's) must agree on validity.
		body := bytes.TrimPrefix(data, []byte("\xEF\xBB\xBF"))
		strict := jsontext.Value(body).IsValid(jsontext.AllowDuplicateNames(true))
		switch {
		case errC == nil:
			if !strict || jsontext.Value(body).Kind() != '[' {
				t.Fatalf("accepted, but a strict parser rejects it: %q", data)
			}
		case strings.Contains(feC.Reason, "nesting deeper"):
		case strict && jsontext.Value(body).Kind() == '[':
			t.Fatalf("rejected (%v), but a strict parser accepts it: %q", errC, data)
		}
	})
}

// jaggedReader returns reads of 1, 2, 3, 5, 8 and 13 bytes in turn, so
// chunk boundaries fall everywhere at a fifth of the cost of one-byte reads
// (the fuzzer's minimizer runs the target thousands of times per input).
type jaggedReader struct {
	data []byte
	n    int
}

func (r *jaggedReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	k := min([]int{1, 2, 3, 5, 8, 13}[r.n%6], len(p), len(r.data))
	r.n++
	copy(p, r.data[:k])
	r.data = r.data[k:]
	return k, nil
}

var codes = map[string]bool{
	CodeMissingField: true, CodeInvalidType: true, CodeInvalidValue: true, CodeUnsupportedClass: true,
	CodeMissingAccount: true, CodeDuplicateUID: true, CodeInvalidRecord: true, CodeDuplicateKey: true,
}

// FuzzValidator feeds arbitrary bytes to Check, both as one record and as
// the records of a file, and checks the shape of what comes back.
func FuzzValidator(f *testing.F) {
	fuzzSeeds(f, true)
	f.Fuzz(func(t *testing.T, data []byte) {
		v := NewValidator()
		checkOne := func(rec Record) {
			fd, ps := v.Check(rec)
			// A strict parser that refuses duplicate names is the oracle
			// for duplicate_key, on any record that is otherwise valid JSON.
			if jsontext.Value(rec.Raw).IsValid(jsontext.AllowDuplicateNames(true)) {
				dup := !jsontext.Value(rec.Raw).IsValid()
				got := len(ps) == 1 && ps[0].Code == CodeDuplicateKey
				if dup != got && (dup || len(ps) > 0 && ps[0].Code == CodeDuplicateKey) {
					t.Fatalf("duplicate names %v, but problems %+v: %q", dup, ps, rec.Raw)
				}
			}
			for _, p := range ps {
				if !codes[p.Code] || p.Detail == "" || utf8.RuneCountInString(p.Value) > MaxValueLength ||
					!utf8.ValidString(p.Value) || p.Pointer != "" && p.Pointer[0] != '/' {
					t.Fatalf("bad problem %+v", p)
				}
			}
			if len(ps) == 0 && (fd.UID == "" || len(fd.UID) > MaxUIDLength || fd.ProviderType == "" || fd.ProviderUID == "" ||
				fd.Severity == "" || fd.Time.Year() > 9999) {
				t.Fatalf("valid record with incomplete finding %+v", fd)
			}
			for _, s := range []string{fd.UID, fd.CheckID, fd.Title, fd.Severity, fd.StatusCode, fd.Status, fd.Region,
				fd.ProviderType, fd.ProviderUID, fd.AccountName, fd.ResourceUID, fd.ScanID} {
				if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
					t.Fatalf("finding field %q has NUL or invalid UTF-8", s)
				}
			}
		}
		checkOne(Record{Raw: data})
		rd := NewReader(bytes.NewReader(data))
		for {
			rec, err := rd.Next()
			if err != nil {
				break
			}
			agreeWithOracle(t, v, rec)
			checkOne(rec)
		}
	})
}
