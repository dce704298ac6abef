package ocsf

import (
	"bytes"
	"io"
	"testing"
)

func BenchmarkCount(b *testing.B) {
	data := readFixture(b, "aws_1500_records.ocsf.json")
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if n, err := Count(bytes.NewReader(data)); err != nil || n != 1500 {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkReader(b *testing.B) {
	data := readFixture(b, "aws_1500_records.ocsf.json")
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		rd := NewReader(bytes.NewReader(data))
		for {
			if _, err := rd.Next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkValidate is the worker's whole per-file cost: read and check
// every record.
func BenchmarkValidate(b *testing.B) {
	data := readFixture(b, "aws_1500_records.ocsf.json")
	b.SetBytes(int64(len(data)))
	records := 0
	for b.Loop() {
		v := NewValidator()
		rd := NewReader(bytes.NewReader(data))
		for {
			rec, err := rd.Next()
			if err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
			if _, ps := v.Check(rec); len(ps) != 0 {
				b.Fatal(ps)
			}
			records++
		}
	}
	b.ReportMetric(float64(records)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkDuplicateScan is the share of Validate spent looking for
// duplicated member names: one pass over every record of the file.
func BenchmarkDuplicateScan(b *testing.B) {
	data := readFixture(b, "aws_1500_records.ocsf.json")
	var records [][]byte
	rd := NewReader(bytes.NewReader(data))
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			b.Fatal(err)
		}
		records = append(records, rec.Raw)
	}
	b.SetBytes(int64(len(data)))
	var d dupScan
	for b.Loop() {
		for _, raw := range records {
			if ptr, dup := d.find(raw); dup {
				b.Fatal(ptr)
			}
		}
	}
}
