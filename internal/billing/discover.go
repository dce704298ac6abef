package billing

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/posture-dev/posture/internal/ocsf"
)

// DiscoverAccounts streams a report and returns, in order of first
// appearance, the distinct accounts of its valid records: exactly the
// accounts the worker will ask to bill. A report that is not a valid
// array yields the accounts found so far; the worker reports the problem
// itself.
func DiscoverAccounts(ctx context.Context, r io.Reader) ([]Account, error) {
	reader := ocsf.NewReader(bufio.NewReaderSize(r, 256<<10))
	validator := ocsf.NewValidator()
	seen := map[Account]bool{}
	var accounts []Account
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rec, err := reader.Next()
		if errors.Is(err, io.EOF) {
			return accounts, nil
		}
		var fe *ocsf.FileError
		if errors.As(err, &fe) {
			return accounts, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read record %d to find its account: %w", i, err)
		}
		f, problems := validator.Check(rec)
		if len(problems) > 0 {
			continue
		}
		a := Account{f.ProviderType, f.ProviderUID}
		if !seen[a] {
			seen[a] = true
			accounts = append(accounts, a)
		}
	}
}
