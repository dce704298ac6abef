package engine

import (
	"encoding/json"
	"fmt"

	"github.com/posture-dev/posture/internal/store"
)

// EncodeAccounts is the stored form of a report's accounts: a JSON array,
// never null, so an empty report stays told apart from a blob stored
// without its accounts (a NULL column).
func EncodeAccounts(a []store.Account) (string, error) {
	if a == nil {
		a = []store.Account{}
	}
	b, err := json.Marshal(a)
	if err != nil {
		return "", fmt.Errorf("encode %d accounts: %w", len(a), err)
	}
	return string(b), nil
}

// DecodeAccounts reads EncodeAccounts' form.
func DecodeAccounts(blob, s string) ([]store.Account, error) {
	var a []store.Account
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		return nil, fmt.Errorf("blob %s: stored accounts: %w", blob, err)
	}
	return a, nil
}
