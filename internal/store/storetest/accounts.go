package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/posture-dev/posture/internal/store"
)

// testBlobAccounts: the accounts handed to PutReport come back from
// BlobAccounts as given, an empty list is told apart from none recorded
// (PutBlob, or a blob stored before accounts were), and only the owning
// tenant sees them.
func testBlobAccounts(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	many := make([]store.Account, 3000)
	for i := range many {
		many[i] = store.Account{Type: "aws", UID: fmt.Sprintf("%012d", i)}
	}
	tests := []struct {
		name     string
		put      func() (store.Blob, error)
		want     []store.Account
		recorded bool
	}{
		{"accounts in order given", func() (store.Blob, error) {
			return s.PutReport(ctx, tenantA, strings.NewReader("[]"), func() ([]store.Account, error) {
				return []store.Account{{Type: "gcp", UID: "proj-1"}, {Type: "aws", UID: "123456789012"}, {Type: "azure", UID: `sub "quoted" ü`}}, nil
			})
		}, []store.Account{{Type: "gcp", UID: "proj-1"}, {Type: "aws", UID: "123456789012"}, {Type: "azure", UID: `sub "quoted" ü`}}, true},
		{"no accounts recorded as empty", func() (store.Blob, error) {
			return s.PutReport(ctx, tenantA, strings.NewReader("[]"), func() ([]store.Account, error) { return nil, nil })
		}, []store.Account{}, true},
		{"many accounts", func() (store.Blob, error) {
			return s.PutReport(ctx, tenantA, patternReader(7, 2<<20+3), func() ([]store.Account, error) { return many, nil })
		}, many, true},
		{"PutBlob records none", func() (store.Blob, error) {
			return s.PutBlob(ctx, tenantA, strings.NewReader("[]"))
		}, nil, false},
		{"PutReport without a func records none", func() (store.Blob, error) {
			return s.PutReport(ctx, tenantA, strings.NewReader("[]"), nil)
		}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.put()
			must(t, err, "put")
			got, recorded, err := s.BlobAccounts(ctx, tenantA, b.ID)
			must(t, err, "BlobAccounts")
			if recorded != tc.recorded {
				t.Fatalf("recorded = %v, want %v", recorded, tc.recorded)
			}
			if tc.recorded && (got == nil || !reflect.DeepEqual(got, tc.want)) {
				t.Fatalf("accounts = %v (%d), want %v (%d)", got, len(got), tc.want, len(tc.want))
			}
			if !tc.recorded && len(got) != 0 {
				t.Fatalf("accounts of a blob without them = %v", got)
			}
			_, _, err = s.BlobAccounts(ctx, tenantB, b.ID)
			wantErr(t, err, store.ErrNotFound, "BlobAccounts of another tenant's blob")
			must(t, s.DeleteBlob(ctx, tenantA, b.ID), "DeleteBlob")
			_, _, err = s.BlobAccounts(ctx, tenantA, b.ID)
			wantErr(t, err, store.ErrNotFound, "BlobAccounts of a deleted blob")
		})
	}
	_, _, err := s.BlobAccounts(ctx, tenantA, "00000000-0000-0000-0000-000000000000")
	wantErr(t, err, store.ErrNotFound, "BlobAccounts of an unknown blob")
	_, _, err = s.BlobAccounts(ctx, tenantA, "not-a-uuid")
	wantErr(t, err, store.ErrNotFound, "BlobAccounts of a malformed id")
}

// testBlobAccountsFailureKeepsNothing: accounts that cannot be found (the
// report names too many) fail the upload, which keeps nothing.
func testBlobAccountsFailure(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	boom := errors.New("too many accounts")
	called := false
	_, err := s.PutReport(ctx, tenantA, patternReader(8, 1<<20+9), func() ([]store.Account, error) {
		called = true
		return nil, boom
	})
	wantErr(t, err, boom, "PutReport with failing accounts")
	if !called {
		t.Fatal("PutReport never asked for the accounts")
	}
	expectNoBlobs(t, s, tenantA)
}

// testRecordBlobAccounts: accounts found later for a blob stored without
// them are recorded once; recorded accounts are never replaced.
func testRecordBlobAccounts(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	first := []store.Account{{Type: "aws", UID: "111111111111"}}
	second := []store.Account{{Type: "gcp", UID: "other"}}
	old, err := s.PutBlob(ctx, tenantA, strings.NewReader("[]"))
	must(t, err, "PutBlob")
	recorded, err := s.PutReport(ctx, tenantA, strings.NewReader("[]"), func() ([]store.Account, error) { return first, nil })
	must(t, err, "PutReport")
	tests := []struct {
		name string
		id   string
		put  []store.Account
		want []store.Account
	}{
		{"a blob without accounts gets them", old.ID, first, first},
		{"and keeps them", old.ID, second, first},
		{"a blob stored with accounts keeps them", recorded.ID, second, first},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			must(t, s.RecordBlobAccounts(ctx, tenantA, tc.id, tc.put), "RecordBlobAccounts")
			got, ok, err := s.BlobAccounts(ctx, tenantA, tc.id)
			must(t, err, "BlobAccounts")
			if !ok || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("accounts = %v (recorded %v), want %v", got, ok, tc.want)
			}
		})
	}
	err = s.RecordBlobAccounts(ctx, tenantB, old.ID, second)
	wantErr(t, err, store.ErrNotFound, "RecordBlobAccounts of another tenant's blob")
	err = s.RecordBlobAccounts(ctx, tenantA, "00000000-0000-0000-0000-000000000000", second)
	wantErr(t, err, store.ErrNotFound, "RecordBlobAccounts of an unknown blob")
}
