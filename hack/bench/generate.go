package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/testenv"
)

// accounts are the cloud accounts the generated findings are spread over:
// a scanner run over a small organisation.
var accounts = []string{"123456789012", "210987654321", "111122223333", "444455556666"}

const (
	uidToken     = "@@UID@@"
	fixtureAcct  = "123456789012"
	timeSentinel = "1111111111"
)

// generator renders records from the 1500 real scanner records of the
// fixture, so shapes, field sets and sizes are a scanner's, varying only
// what must vary: the finding uid (unique), the account and the time.
type generator struct {
	templates [][]byte
}

func newGenerator() (*generator, error) {
	f, err := os.Open(testenv.Fixture("aws_1500_records.ocsf.json"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The raw bytes of each record are kept, with the scanner's own
	// formatting; only the values that vary are swapped for tokens.
	rd := ocsf.NewReader(f)
	g := &generator{}
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
	}
	return g, nil
}

// record renders record i.
func (g *generator) record(dst []byte, i int) []byte {
	t := g.templates[i%len(g.templates)]
	acct := accounts[i%len(accounts)]
	uid := fmt.Sprintf("bench-%s-%09d", acct, i)
	ts := strconv.FormatInt(1767000000+int64(i%86400), 10)
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
			dst = append(dst, uid...)
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

// write writes a report of n records (n < 0: until about maxBytes) to w and
// returns its size; records counts what was written so far.
func (g *generator) write(w io.Writer, n int, maxBytes int64, records *atomic.Int64) (int64, error) {
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

func (g *generator) writeFile(path string, n int) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	size, err := g.write(f, n, 0, nil)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return size, err
}
