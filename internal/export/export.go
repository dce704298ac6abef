// Package export writes a listing of findings as a file a person or another
// tool takes away: CSV with fixed columns, or OCSF JSON, the stored records
// as one JSON array (what an upload takes, so an export can be ingested
// again). Stream reads the store a keyset page at a time and writes each
// page out before reading the next, so an export of any size holds one page
// in memory. docs/decisions/0026-finding-exports.md tells why.
package export

import (
	"bufio"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/posture-dev/posture/internal/findings"
	"github.com/posture-dev/posture/internal/store"
)

// Format is an export's file format.
type Format string

const (
	// CSV is RFC 4180 text with the Columns (CurrentColumns for the current
	// state), one finding a row.
	CSV Format = "csv"
	// OCSF is a JSON array of the findings' OCSF records as uploaded.
	OCSF Format = "ocsf"
)

// Formats are the formats, in the order the docs and errors name them.
var Formats = []Format{CSV, OCSF}

// ParseFormat reads a format's name.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if s == string(f) {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown export format %q; want csv or ocsf", s)
}

// MediaType is the Content-Type of an export in f.
func (f Format) MediaType() string {
	if f == CSV {
		// RFC 4180's own parameter: the first row names the columns.
		return "text/csv; charset=utf-8; header=present"
	}
	return "application/json"
}

// Extension is what a file of f is named with; an OCSF export ends in
// .ocsf.json, the name an upload requires.
func (f Format) Extension() string {
	if f == CSV {
		return ".csv"
	}
	return ".ocsf.json"
}

// Filename names an export made at now: findings (the history) or
// findings-current, and the time, so that two exports do not overwrite
// each other in a downloads folder.
func Filename(f Format, current bool, now time.Time) string {
	name := "findings"
	if current {
		name += "-current"
	}
	return name + "-" + now.UTC().Format("20060102T150405Z") + f.Extension()
}

// Columns are the CSV columns of an export of the history, in order.
// account is the provider's account uid (provider_uid in the API).
var Columns = []string{"id", "uid", "time", "severity", "severity_id", "status_code", "status", "check_id", "title",
	"provider_type", "account", "region", "resource_uid", "scan_id", "ingestion_id", "inserted_at", "updated_at"}

// CurrentColumns are an export of the current state's: Columns, then when
// the finding's uid was first seen for its account and its delta (new,
// changed, resolved or empty).
var CurrentColumns = append(append([]string(nil), Columns...), "first_seen_at", "delta")

// TimeFormat is how CSV cells write times: UTC, to the second, which
// spreadsheets read as a date.
const TimeFormat = time.RFC3339

// Writer writes findings in one format. Output is buffered: Flush hands
// what was written to the underlying writer, Close ends the file (the
// array's closing bracket; a CSV of no finding still has its header).
type Writer struct {
	format  Format
	current bool
	bw      *bufio.Writer
	csv     *csv.Writer
	row     []string
	started bool
	n       int
}

// NewWriter writes to w in format f; current selects CurrentColumns.
func NewWriter(w io.Writer, f Format, current bool) *Writer {
	x := &Writer{format: f, current: current, bw: bufio.NewWriterSize(w, 64<<10)}
	if f == CSV {
		x.csv = csv.NewWriter(x.bw)
		// RFC 4180 ends records with CRLF.
		x.csv.UseCRLF = true
	}
	return x
}

// Format is the writer's format.
func (x *Writer) Format() Format { return x.format }

// Count is how many findings were written.
func (x *Writer) Count() int { return x.n }

func (x *Writer) start() error {
	if x.started {
		return nil
	}
	x.started = true
	if x.format == CSV {
		cols := Columns
		if x.current {
			cols = CurrentColumns
		}
		return x.csv.Write(cols)
	}
	_, err := x.bw.WriteString("[")
	return err
}

// Write writes one finding.
func (x *Writer) Write(f *store.Finding) error {
	if err := x.start(); err != nil {
		return err
	}
	if x.format == OCSF {
		if len(f.Raw) == 0 {
			return fmt.Errorf("%w: finding %s (uid %q)", ErrNoRecord, f.ID, f.UID)
		}
		sep := ",\n"
		if x.n == 0 {
			sep = "\n"
		}
		x.bw.WriteString(sep)
		if _, err := x.bw.Write(f.Raw); err != nil {
			return err
		}
		x.n++
		return nil
	}
	x.row = append(x.row[:0], f.ID, f.UID, formatTime(f.Time), f.Severity, strconv.Itoa(f.SeverityID), f.StatusCode, f.Status,
		f.CheckID, f.Title, f.ProviderType, f.ProviderUID, f.Region, f.ResourceUID, f.ScanID, f.IngestionID,
		formatTime(f.InsertedAt), formatTime(f.UpdatedAt))
	if x.current {
		first := ""
		if f.FirstSeenAt != nil {
			first = formatTime(*f.FirstSeenAt)
		}
		x.row = append(x.row, first, f.Delta)
	}
	for i, c := range x.row {
		x.row[i] = Cell(c)
	}
	if err := x.csv.Write(x.row); err != nil {
		return err
	}
	x.n++
	return nil
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeFormat)
}

// Cell guards a CSV cell against formula injection: a spreadsheet runs a
// cell that starts with = + - or @ (or a tab or carriage return, which
// some take for the start of one) as a formula, and a report's text is
// the scanner's, or an attacker's who named a resource. Such a cell is
// written with a leading apostrophe, which spreadsheets show as text. The
// OCSF export carries the values unchanged.
func Cell(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}

// Flush hands everything written so far to the underlying writer.
func (x *Writer) Flush() error {
	if x.csv != nil {
		x.csv.Flush()
		if err := x.csv.Error(); err != nil {
			return err
		}
	}
	return x.bw.Flush()
}

// Close ends the file and flushes it. A file left without Close is
// visibly cut short: an OCSF array without its closing bracket does not
// parse.
func (x *Writer) Close() error {
	if err := x.start(); err != nil {
		return err
	}
	if x.format == OCSF {
		end := "\n]\n"
		if x.n == 0 {
			end = "]\n"
		}
		if _, err := x.bw.WriteString(end); err != nil {
			return err
		}
	}
	return x.Flush()
}

// PageSize is how many findings Stream reads from the store at a time: the
// REST API's largest page, a few megabytes of records.
const PageSize = 1000

// ErrNoRecord is a finding stored without its OCSF record, which an OCSF
// export cannot write (no ingestion stores one).
var ErrNoRecord = errors.New("no stored OCSF record")

// ErrWrite wraps a failure to write the export (the client went away),
// which Stream tells apart from a failure to read the store.
var ErrWrite = errors.New("writing the export")

// Stream writes every finding of q (its filters and sort; its page is
// ignored) to x, a keyset page at a time, and calls flush after each page
// so that the client receives it while the next is read. begin (if not
// nil) runs once, when the first page has been read and before anything is
// written: until then a failure has written nothing and can still be
// answered as an error. Stream stops at the first error: ctx's, the
// store's, or a write's (wrapped in ErrWrite). It does not Close x: the
// caller ends the file only on success.
//
// The export is not a snapshot: findings an ingestion writes meanwhile
// appear when they sort after the page being read, as when paging
// through the list by hand.
func Stream(ctx context.Context, st store.FindingReads, tenant string, q store.FindingQuery, x *Writer, begin, flush func() error) error {
	// Each page's count is of no use here; a limit of 1 makes it read at
	// most two rows (or the summary), where the list's would read up to
	// its own limit on every page.
	q.CountLimit = 1
	var after *store.FindingKey
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		page, err := findings.ReadAfter(ctx, st, tenant, q, after, PageSize)
		if err != nil {
			return fmt.Errorf("reading findings after %d exported: %w", x.n, err)
		}
		if after == nil && begin != nil {
			if err := begin(); err != nil {
				return fmt.Errorf("%w: %w", ErrWrite, err)
			}
		}
		if err := x.start(); err != nil {
			return fmt.Errorf("%w: %w", ErrWrite, err)
		}
		for i := range page.Rows {
			if err := x.Write(&page.Rows[i]); errors.Is(err, ErrNoRecord) {
				return err
			} else if err != nil {
				return fmt.Errorf("%w: %w", ErrWrite, err)
			}
		}
		if err := x.Flush(); err != nil {
			return fmt.Errorf("%w: %w", ErrWrite, err)
		}
		if flush != nil {
			if err := flush(); err != nil {
				return fmt.Errorf("%w: %w", ErrWrite, err)
			}
		}
		if page.Next == nil {
			return nil
		}
		after = page.Next
	}
}
