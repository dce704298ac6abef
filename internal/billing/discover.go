package billing

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/posture-dev/posture/internal/ocsf"
	"github.com/posture-dev/posture/internal/store"
)

// MaxAccounts bounds the distinct accounts one report may name. Every
// account becomes a Provider object, an entry of the Ingestion's status and
// a row of the stored account list, so a report naming more is refused at
// intake rather than flooding the API server; real scans name a handful.
const MaxAccounts = 10000

// TooManyAccountsError refuses a report naming more than Limit accounts.
type TooManyAccountsError struct {
	Limit int
	// Record is the index of the record that named one account too many.
	Record int
}

func (e *TooManyAccountsError) Error() string {
	return fmt.Sprintf("record %d names account number %d; a report may name at most %d distinct accounts (provider type and uid)",
		e.Record, e.Limit+1, e.Limit)
}

// DiscoverAccounts streams a report and returns, in order of first
// appearance, the distinct accounts of its valid records: exactly the
// accounts the worker will ask to bill. A report that is not a valid
// array yields the accounts found so far; the worker reports the problem
// itself. It reads the report a second time, so it only serves reports
// stored before intake recorded their accounts (see Collector).
func DiscoverAccounts(ctx context.Context, r io.Reader) ([]Account, error) {
	got, err := collect(ctx, ocsf.NewReader(bufio.NewReaderSize(r, 256<<10)).NextBorrowed, 0)
	return got.accounts, err
}

// collected is what collect read of a report: the accounts of its valid
// records, how many records it has, and, for a report that is not a valid
// array, why (the accounts are then those found before).
type collected struct {
	accounts []Account
	records  int
	bad      *ocsf.FileError
}

// collect is the one rule of which accounts a report names; limit > 0
// bounds them with a *TooManyAccountsError. next yields the report's
// records, as ocsf.Reader.NextBorrowed does.
func collect(ctx context.Context, next func() (ocsf.Record, error), limit int) (collected, error) {
	validator := ocsf.NewValidator()
	seen := map[Account]bool{}
	var out collected
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		// The record is only read by Check, before the next one.
		rec, err := next()
		if errors.Is(err, io.EOF) {
			out.records = i
			return out, nil
		}
		if errors.As(err, &out.bad) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("read record %d to find its account: %w", i, err)
		}
		f, problems := validator.Check(rec)
		if len(problems) > 0 {
			continue
		}
		a := Account{f.ProviderType, f.ProviderUID}
		if !seen[a] {
			if limit > 0 && len(out.accounts) == limit {
				return out, &TooManyAccountsError{Limit: limit, Record: i}
			}
			seen[a] = true
			out.accounts = append(out.accounts, a)
		}
	}
}

// Collector reads a report from the bytes an intake already passes along
// (it is the io.Writer of an io.TeeReader), so the report is not read again
// to bill or count it: it finds the accounts, counts the records and checks
// that the report is one JSON array. It decodes on its own goroutine, up to
// collectorBuffer bytes behind the writes. A report naming more than
// MaxAccounts fails a later Write with a *TooManyAccountsError, and one
// that is not a valid array with its *ocsf.FileError.
type Collector struct {
	pw   *pipe
	done chan struct{}
	once sync.Once
	got  collected
	err  error
}

// collectorBuffer is how far an intake may run ahead of its collector: a
// few of the chunks it stores, bounded per upload.
const collectorBuffer = 4 << 20

// NewCollector starts a collector; Finish or Abort must end it.
func NewCollector(ctx context.Context) *Collector {
	p := newPipe(collectorBuffer)
	c := &Collector{pw: p, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		records := newReadAhead(ocsf.NewReader(p))
		defer records.stop()
		c.got, c.err = collect(ctx, records.next, MaxAccounts)
		// Otherwise the report was read to its end.
		switch {
		case c.err != nil:
			p.CloseRead(c.err)
		case c.got.bad != nil:
			// The intake stops at the next write rather than store a
			// report that will be refused.
			p.CloseRead(c.got.bad)
		}
	}()
	return c
}

// Write implements io.Writer.
func (c *Collector) Write(p []byte) (int, error) { return c.pw.Write(p) }

// Finish ends the report (all of it has been written) and returns its
// accounts.
func (c *Collector) Finish() ([]Account, error) {
	c.once.Do(func() { c.pw.CloseWrite(nil) })
	<-c.done
	return c.got.accounts, c.err
}

// Records is the number of the report's records, or the *ocsf.FileError
// saying why it is not a valid array; it follows Finish.
func (c *Collector) Records() (int, error) {
	<-c.done
	switch {
	case c.err != nil:
		return 0, c.err
	case c.got.bad != nil:
		return 0, c.got.bad
	}
	return c.got.records, nil
}

// Abort ends a collector whose intake failed; it may follow Finish.
func (c *Collector) Abort() {
	c.once.Do(func() { c.pw.CloseWrite(errors.New("billing: intake aborted")) })
	<-c.done
}

// Stored is Finish in the store's terms, for store.Blobs.PutReport.
func (c *Collector) Stored() ([]store.Account, error) {
	accounts, err := c.Finish()
	if err != nil {
		return nil, err
	}
	return ToStore(accounts), nil
}

// ToStore is the stored form of accounts.
func ToStore(accounts []Account) []store.Account {
	out := make([]store.Account, len(accounts))
	for i, a := range accounts {
		out[i] = store.Account{Type: a.Type, UID: a.UID}
	}
	return out
}

// FromStore is the inverse of ToStore.
func FromStore(accounts []store.Account) []Account {
	out := make([]Account, len(accounts))
	for i, a := range accounts {
		out[i] = Account{a.Type, a.UID}
	}
	return out
}
