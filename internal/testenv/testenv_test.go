package testenv_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/posture-dev/posture/internal/testenv"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	testenv.Main(m, func(c *rest.Config) error { cfg = c; return nil })
}

func newClient(t *testing.T) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRegisterUpdatesAKeptAPIService: make dev on kept data finds the
// APIService of its last run and updates its caBundle, while kube-aggregator
// writes the same object's status; a write between Register's read and its
// update is a conflict to retry, not a failure of make dev.
func TestRegisterUpdatesAKeptAPIService(t *testing.T) {
	ctx := context.Background()
	base := newClient(t)
	t.Cleanup(func() { _ = base.Delete(context.Background(), testenv.APIService("", nil)) })
	for _, tc := range []struct {
		name string
		// interleave writes the APIService once, between Register's read
		// and its update, as kube-aggregator's status writes do.
		interleave bool
	}{
		{"no APIService yet", false},
		{"the APIService of an earlier run", false},
		{"the APIService written between read and update", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			route, err := testenv.NewAggregatorRoute("", "posture-system")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = route.Close() })
			c := client.WithWatch(base)
			interleaved := false
			if tc.interleave {
				c = interceptor.NewClient(base, interceptor.Funcs{
					Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
						if obj.GetObjectKind().GroupVersionKind().Kind == "APIService" && !interleaved {
							interleaved = true
							other := testenv.APIService("", nil)
							if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), other); err != nil {
								return err
							}
							other.SetLabels(map[string]string{"written-by": "someone-else"})
							if err := cl.Update(ctx, other); err != nil {
								return err
							}
						}
						return cl.Update(ctx, obj, opts...)
					},
				})
			}
			if err := route.Register(ctx, c); err != nil {
				t.Fatalf("Register: %v", err)
			}
			if tc.interleave && !interleaved {
				t.Fatal("Register never updated the APIService; the conflict was not exercised")
			}
			got := testenv.APIService("", nil)
			if err := base.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
				t.Fatal(err)
			}
			ca, _, _ := unstructured.NestedString(got.Object, "spec", "caBundle")
			want := testenv.APIService("", route.CABundle)
			if wantCA, _, _ := unstructured.NestedString(want.Object, "spec", "caBundle"); ca != wantCA {
				t.Errorf("the APIService's caBundle is not this run's")
			}
		})
	}
}
