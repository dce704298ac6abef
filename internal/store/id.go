package store

import "github.com/google/uuid"

// findingNamespace scopes FindingID so that these UUIDs never collide with
// version-5 UUIDs minted elsewhere from the same strings.
var findingNamespace = uuid.MustParse("6f1d0c57-4a4e-5b36-9c1e-1c7d2f0a8e42")

// FindingID is the stable id of a finding: a version-5 UUID of tenant, scan id
// and finding uid. Re-ingesting the same record therefore yields the same id,
// and an id never says anything about another tenant's rows.
func FindingID(tenant, scanID, uid string) string {
	// NUL cannot occur in the parts' meaningful content, so joining with it
	// keeps ("a", "bc") and ("ab", "c") apart.
	return uuid.NewSHA1(findingNamespace, []byte(tenant+"\x00"+scanID+"\x00"+uid)).String()
}
