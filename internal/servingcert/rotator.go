package servingcert

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The manager keeps the aggregated API's serving certificate in a Secret of
// its own namespace (get, create, and update of that one Secret) and its CA in
// the APIService's caBundle (get and patch of that one APIService).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=update,resourceNames=posture-aggregated-api-tls,namespace=posture-system
// +kubebuilder:rbac:groups=apiregistration.k8s.io,resources=apiservices,verbs=get;patch,resourceNames=v1alpha1.data.posture.dev

// DefaultAPIServiceName is the APIService of the aggregated API.
const DefaultAPIServiceName = "v1alpha1.data.posture.dev"

var apiServiceGVK = schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}

// Rotator keeps the aggregated API's serving certificate valid
// without cert-manager: it issues a self-signed CA and a serving certificate
// into a Secret, renews either two thirds into its life, and keeps the
// APIService's caBundle equal to the Secret's ca.crt. The aggregated server
// of every replica rereads the Secret (SecretSource). It runs on
// the elected leader only, so replicas never race to renew.
type Rotator struct {
	// Client reads and writes the Secret and the APIService directly:
	// Secrets and unstructured objects are never cached.
	Client      client.Client
	Namespace   string
	SecretName  string
	APIServices []string
	Policy      Policy
	// Interval bounds the wait between two checks, so a caBundle reset by
	// someone else (a helm upgrade, a kubectl apply) is put back within it;
	// default 5 minutes.
	Interval time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	Log logr.Logger
}

// NeedLeaderElection: one replica renews; all of them serve.
func (r *Rotator) NeedLeaderElection() bool { return true }

// Start checks at once, then before each renewal falls due and at least
// every Interval, until ctx ends.
func (r *Rotator) Start(ctx context.Context) error {
	interval := r.Interval
	if interval <= 0 {
		interval = 5 * time.Minute
	}
	for {
		wait := interval
		next, err := r.Reconcile(ctx)
		if err != nil {
			r.Log.Error(err, "keeping the aggregated API's serving certificate", "secret", r.SecretName)
			wait = min(wait, 30*time.Second)
		} else if d := next.Sub(r.now()); d < wait {
			wait = max(d, time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

func (r *Rotator) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Reconcile renews what is due and puts the CA into every APIService. It
// returns when the bundle is next due.
func (r *Rotator) Reconcile(ctx context.Context) (time.Time, error) {
	next, err := r.reconcile(ctx)
	if apierrors.IsAlreadyExists(err) {
		// Another replica's server, bootstrapping (CreateIfMissing), issued
		// the Secret between the read and the create: check that one.
		next, err = r.reconcile(ctx)
	}
	return next, err
}

func (r *Rotator) reconcile(ctx context.Context) (time.Time, error) {
	key := types.NamespacedName{Namespace: r.Namespace, Name: r.SecretName}
	var sec corev1.Secret
	exists := true
	if err := r.Client.Get(ctx, key, &sec); apierrors.IsNotFound(err) {
		exists = false
	} else if err != nil {
		return time.Time{}, fmt.Errorf("read Secret %s: %w", key, err)
	}
	plan, err := Ensure(FromData(sec.Data), r.Policy, r.now())
	if err != nil {
		return time.Time{}, err
	}
	switch {
	case !exists:
		sec = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.SecretName,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "posture"}},
			Type: corev1.SecretTypeTLS,
			Data: plan.Bundle.Data(),
		}
		if err := r.Client.Create(ctx, &sec); err != nil {
			return time.Time{}, fmt.Errorf("create Secret %s: %w", key, err)
		}
		r.Log.Info("issued the aggregated API's serving certificate", "secret", key.String())
	case plan.Changed:
		if sec.Type != corev1.SecretTypeTLS {
			return time.Time{}, fmt.Errorf("Secret %s is of type %q, want %s: delete it and the manager issues a new one", key, sec.Type, corev1.SecretTypeTLS)
		}
		sec.Data = plan.Bundle.Data()
		// Update carries the resourceVersion read above: a concurrent
		// writer makes this fail and the next check starts over.
		if err := r.Client.Update(ctx, &sec); err != nil {
			return time.Time{}, fmt.Errorf("update Secret %s: %w", key, err)
		}
		r.Log.Info("renewed the aggregated API's serving certificate", "secret", key.String(), "reason", plan.Reason)
	}
	for _, name := range r.APIServices {
		if err := r.patchCABundle(ctx, name, plan.Bundle.CAs); err != nil {
			return time.Time{}, err
		}
	}
	return plan.Next, nil
}

// CreateIfMissing issues the Secret when it does not exist and leaves it
// alone when it does: a replica whose server starts before the leader's
// first check calls it, and losing the race to another replica is fine.
func (r *Rotator) CreateIfMissing(ctx context.Context) error {
	plan, err := Ensure(Bundle{}, r.Policy, r.now())
	if err != nil {
		return err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.SecretName,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "posture"}},
		Type: corev1.SecretTypeTLS,
		Data: plan.Bundle.Data(),
	}
	if err := r.Client.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func (r *Rotator) patchCABundle(ctx context.Context, name string, ca []byte) error {
	svc := &unstructured.Unstructured{}
	svc.SetGroupVersionKind(apiServiceGVK)
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, svc); err != nil {
		if apierrors.IsNotFound(err) {
			// Installed after the manager, or by hand: the next check finds it.
			return fmt.Errorf("APIService %s not found: install it (the chart and config/ do) and the manager fills in its caBundle", name)
		}
		return fmt.Errorf("read APIService %s: %w", name, err)
	}
	cur, _, _ := unstructured.NestedString(svc.Object, "spec", "caBundle")
	if decoded, err := base64.StdEncoding.DecodeString(cur); err == nil && bytes.Equal(decoded, ca) {
		return nil
	}
	patch := fmt.Appendf(nil, `{"spec":{"caBundle":%q}}`, base64.StdEncoding.EncodeToString(ca))
	if err := r.Client.Patch(ctx, svc, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("patch caBundle of APIService %s: %w", name, err)
	}
	r.Log.Info("set the APIService's caBundle", "apiservice", name)
	return nil
}
