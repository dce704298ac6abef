// Package reportgen renders large OCSF reports for benchmarks and load
// tests from the 1500 real scanner records of the test fixture: shapes,
// field sets and sizes are a scanner's, and only what must vary does (the
// finding uid, unique; the account; the time).
package reportgen

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/testenv"
)

// Accounts are the cloud Accounts the generated findings are spread over:
// a scanner run over a small organisation.
var Accounts = []string{"123456789012", "210987654321", "111122223333", "444455556666"}

const (
	uidToken     = "@@UID@@"
	fixtureAcct  = "123456789012"
	timeSentinel = "1111111111"
)

// generator renders records from the 1500 real scanner records of the
// fixture, so shapes, field sets and sizes are a scanner's, varying only
// what must vary: the finding uid (unique), the account and the time.
type Generator struct {
	// accounts are the cloud accounts records are spread over.
	accounts  []string
	templates [][]byte
	// uidPrefixes[t][a] is template t's own uid, in account a, without
	// its last part: the scanner's per-resource hash, which uidSuffix
	// replaces.
	uidPrefixes [][]string
}

// New is a generator over Accounts.
func New() (*Generator, error) { return NewFor(Accounts) }

// NewFor is a generator whose records are spread over accounts instead
// (each a 12-digit AWS account id): a load of several tenants gives each its
// own, so a finding shows whose it is.
func NewFor(accounts []string) (*Generator, error) {
	if len(accounts) == 0 {
		return nil, errors.New("reportgen: no accounts")
	}
	f, err := os.Open(testenv.Fixture("aws_1500_records.ocsf.json"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The raw bytes of each record are kept, with the scanner's own
	// formatting; only the values that vary are swapped for tokens.
	rd := ocsf.NewReader(f)
	g := &Generator{accounts: append([]string(nil), accounts...)}
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		var r struct {
			Time        int64 `json:"time"`
			FindingInfo struct {
				UID string `json:"uid"`
			} `json:"finding_info"`
		}
		if err := json.Unmarshal(rec.Raw, &r); err != nil {
			return nil, err
		}
		uid, _ := json.Marshal(r.FindingInfo.UID)
		t := bytes.ReplaceAll(rec.Raw, uid, []byte(`"`+uidToken+`"`))
		t = bytes.ReplaceAll(t, []byte(strconv.FormatInt(r.Time, 10)), []byte(timeSentinel))
		if !bytes.Contains(t, []byte(uidToken)) || !bytes.Contains(t, []byte(timeSentinel)) {
			return nil, fmt.Errorf("fixture record %d: uid or time not found", rec.Index)
		}
		g.templates = append(g.templates, t)
		g.uidPrefixes = append(g.uidPrefixes, uidPrefixes(r.FindingInfo.UID, g.accounts))
	}
	return g, nil
}

// uidPrefixes keeps a fixture uid (prowler-aws-<check>-<account>-<region>-
// <resource hash>) up to its last dash, once per account: a search for a
// generated uid then meets the trigrams a scanner's uids share (its check,
// account, region) and no others.
func uidPrefixes(uid string, accounts []string) []string {
	prefix := uid + "-"
	if i := strings.LastIndexByte(uid, '-'); i >= 0 {
		prefix = uid[:i+1]
	}
	p := make([]string, len(accounts))
	for a, acct := range accounts {
		p[a] = strings.ReplaceAll(prefix, fixtureAcct, acct)
	}
	return p
}

// appendUID appends record i's finding uid: its template's uid in its
// account, ending in 12 hex digits of its own.
func (g *Generator) appendUID(dst []byte, i int) []byte {
	dst = append(dst, g.uidPrefixes[i%len(g.templates)][i%len(g.accounts)]...)
	s := uidSuffix(uint64(i))
	for shift := 44; shift >= 0; shift -= 4 {
		dst = append(dst, "0123456789abcdef"[s>>shift&0xf])
	}
	return dst
}

// UID is record i's finding uid.
func (g *Generator) UID(i int) string {
	return string(g.appendUID(nil, i))
}

// Account is record i's account.
func (g *Generator) Account(i int) string { return g.accounts[i%len(g.accounts)] }

// Record is record i, as Write renders it.
func (g *Generator) Record(i int) []byte { return g.record(nil, i) }

// uidSuffix scrambles i into 48 bits, as a scanner's resource hashes are:
// consecutive records share no prefix of their suffixes, so their uids
// share only the trigrams their check, account and region give them, as
// real uids do. Each step (an addition, a multiplication by an odd number,
// both modulo 2^48, an xor with a right shift) can be undone, so distinct i
// below 2^48 give distinct suffixes. The addition keeps record 0's from
// being all zeros.
func uidSuffix(i uint64) uint64 {
	const mask = 1<<48 - 1
	x := (i + 0x5bd1e995a3c7) & mask
	x = x * 0x9e3779b97f4a7c15 & mask
	x ^= x >> 24
	x = x * 0xbf58476d1ce4e5b9 & mask
	x ^= x >> 21
	x = x * 0x94d049bb133111eb & mask
	x ^= x >> 24
	return x
}

// RecordsPerSecond is how many generated records share a time.
const RecordsPerSecond = 100

// RecordTime is record i's time, in Unix seconds: later records have later
// times, as a scanner's later scans do, so a new report's findings go to
// the end of an index in time order. Until 2026-11-26 the times repeated
// every 86,400 records, which put a new finding among old ones there: a
// quarter of the index blocks read from outside PostgreSQL's buffers
// during ingestion into the 10M tenant, a cost a scanner's reports do not
// have.
func RecordTime(i int) int64 { return 1767000000 + int64(i/RecordsPerSecond) }

// record renders record i.
func (g *Generator) record(dst []byte, i int) []byte {
	t := g.templates[i%len(g.templates)]
	acct := g.accounts[i%len(g.accounts)]
	ts := strconv.FormatInt(RecordTime(i), 10)
	dst = dst[:0]
	for len(t) > 0 {
		j := bytes.IndexAny(t, "@11")
		if j < 0 {
			dst = append(dst, t...)
			break
		}
		dst = append(dst, t[:j]...)
		t = t[j:]
		switch {
		case bytes.HasPrefix(t, []byte(uidToken)):
			dst = g.appendUID(dst, i)
			t = t[len(uidToken):]
		case bytes.HasPrefix(t, []byte(fixtureAcct)):
			dst = append(dst, acct...)
			t = t[len(fixtureAcct):]
		case bytes.HasPrefix(t, []byte(timeSentinel)):
			dst = append(dst, ts...)
			t = t[len(timeSentinel):]
		default:
			dst = append(dst, t[0])
			t = t[1:]
		}
	}
	return dst
}

// Write writes a report of n records (n < 0: until about maxBytes) to w and
// returns its size; records counts what was written so far.
func (g *Generator) Write(w io.Writer, n int, maxBytes int64, records *atomic.Int64) (int64, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	var size int64
	var buf []byte
	if err := bw.WriteByte('['); err != nil {
		return 0, err
	}
	size++
	for i := 0; n < 0 || i < n; i++ {
		if n < 0 && size >= maxBytes {
			break
		}
		if i > 0 {
			_ = bw.WriteByte(',')
			size++
		}
		buf = g.record(buf, i)
		m, err := bw.Write(buf)
		size += int64(m)
		if err != nil {
			return size, err
		}
		if records != nil {
			records.Add(1)
		}
	}
	if err := bw.WriteByte(']'); err != nil {
		return size, err
	}
	size++
	return size, bw.Flush()
}

func (g *Generator) WriteFile(path string, n int) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	size, err := g.Write(f, n, 0, nil)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return size, err
}

// WriteRange writes a report of the n records from index from: the same
// records Write would render at those indexes, so uids never repeat across
// the reports of one load.
func (g *Generator) WriteRange(w io.Writer, from, n int) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	var buf []byte
	_ = bw.WriteByte('[')
	for i := from; i < from+n; i++ {
		if i > from {
			_ = bw.WriteByte(',')
		}
		buf = g.record(buf, i)
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	_ = bw.WriteByte(']')
	return bw.Flush()
}
