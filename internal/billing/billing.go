// Package billing holds the rules of provider billing, apart from who applies
// them: which accounts a report names, what a Provider of an account is
// called, what counts against a tenant's plan, which accounts the plan
// admits, and how the admitted set is handed to the worker. It makes no API
// calls; the controllers read and write objects and map its decisions to
// status and events.
package billing

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/posture-dev/posture/internal/ocsf"
)

// Account is one billable cloud account: a provider type and an account id,
// as the validator reports them (type by ocsf.ProviderType, both trimmed).
type Account struct{ Type, UID string }

// Key is the "type/uid" form the worker's allowed set and Ingestion
// status.providers use.
func (a Account) Key() string { return a.Type + "/" + a.UID }

// Normal is the account as a Provider records it: its type fitted to
// Provider spec.type.
func (a Account) Normal() Account { return Account{ocsf.ProviderType(a.Type), a.UID} }

var (
	dnsLabel    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	notDNSChars = regexp.MustCompile(`[^a-z0-9]+`)
)

// ProviderName is the Provider name of an account: "<type>-<uid>" when that is
// a DNS label already (aws-123456789012), else HashedProviderName.
func ProviderName(typ, uid string) string {
	if name := ocsf.ProviderType(typ) + "-" + uid; len(name) <= 63 && dnsLabel.MatchString(name) {
		return name
	}
	return HashedProviderName(typ, uid)
}

// HashedProviderName is a sanitized "<type>-<uid>" with a hash of the account,
// so that different accounts never share a name; it is also the fallback
// when the plain name is taken by another account.
func HashedProviderName(typ, uid string) string {
	sum := sha256.Sum256([]byte(typ + "/" + uid))
	base := strings.Trim(notDNSChars.ReplaceAllString(strings.ToLower(ocsf.ProviderType(typ)+"-"+uid), "-"), "-")
	if len(base) > 54 {
		base = strings.TrimRight(base[:54], "-")
	}
	return base + "-" + hex.EncodeToString(sum[:])[:8]
}

// FormatAllowedAccounts encodes an allowed-account set for the worker's
// --allowed-accounts flag: a JSON array, sorted, because account ids may hold
// any character (commas included).
func FormatAllowedAccounts(allowed map[string]bool) string {
	keys := make([]string, 0, len(allowed))
	for k, ok := range allowed {
		if ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	b, _ := json.Marshal(keys)
	return string(b)
}

// ParseAllowedAccounts decodes --allowed-accounts; "" means no restriction (nil).
func ParseAllowedAccounts(s string) (map[string]bool, error) {
	if s == "" {
		return nil, nil
	}
	var keys []string
	if err := json.Unmarshal([]byte(s), &keys); err != nil {
		return nil, fmt.Errorf(`--allowed-accounts must be a JSON array of "type/uid" strings: %w`, err)
	}
	allowed := make(map[string]bool, len(keys))
	for i, k := range keys {
		if t, u, ok := strings.Cut(k, "/"); !ok || t == "" || u == "" {
			return nil, fmt.Errorf(`--allowed-accounts: element %d, %q, is not "type/uid"`, i, k)
		}
		allowed[k] = true
	}
	return allowed, nil
}
