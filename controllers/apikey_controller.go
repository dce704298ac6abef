package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/auth"
	"github.com/posture-dev/posture/internal/tenancy"
)

// APIKey defaults and names.
const (
	// DefaultAPIKeyLifetime applies when spec.expiresAt is not set.
	DefaultAPIKeyLifetime = 365 * 24 * time.Hour
	// APIKeySecretKey is the data key of the generated Secret.
	APIKeySecretKey = "api-key"
	// LabelAPIKey names the APIKey a generated Secret belongs to.
	LabelAPIKey = "posture.dev/apikey"
)

// Ready reasons of an APIKey.
const (
	ReasonKeyActive      = "Active"
	ReasonKeyRevoked     = "Revoked"
	ReasonKeyExpired     = "Expired"
	ReasonUserUnknown    = "UserUnknown"
	ReasonSecretConflict = "SecretConflict"
	ReasonSecretMissing  = "SecretMissing"
	ReasonKeyGenerated   = "Generated"
	// ReasonKeyAdopted: the key came from a Secret the operator did not write.
	ReasonKeyAdopted = "Adopted"
	// ReasonKeyChanged: the key in the Secret changed and replaced the old one.
	ReasonKeyChanged = "KeyChanged"
	// ReasonKeyMalformed: the Secret's api-key is not a key of the
	// operator's format; only a person can fix it.
	ReasonKeyMalformed = "KeyMalformed"
)

// Key origins recorded in status.keyOrigin.
const (
	KeyOriginGenerated = "Generated"
	KeyOriginAdopted   = "Adopted"
)

// APIKeyReconciler generates each APIKey's key exactly once into an owned
// Secret and keeps only its public prefix and SHA-256 in status. The key
// itself is never logged, put in an event, an error or any custom resource.
type APIKeyReconciler struct {
	client.Client
	// APIReader confirms a Secret the cache does not show yet (it may have
	// just been created); optional.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Now       func() time.Time
	// RecheckInterval is how often a key's Secret is looked at again. Secrets
	// are not watched (the manager may not watch them cluster-wide), so a
	// deleted Secret shows as SecretMissing within this interval. Default 5 min.
	RecheckInterval time.Duration
}

// +kubebuilder:rbac:groups=posture.dev,resources=apikeys,verbs=get;list;watch
// +kubebuilder:rbac:groups=posture.dev,resources=apikeys/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=posture.dev,resources=apikeys/finalizers,verbs=update
// +kubebuilder:rbac:groups=posture.dev,resources=tenants,verbs=get;list;watch
// Key Secrets are read and created through the tenant-access RoleBinding of
// the key's namespace (tenant_access.go), not a cluster-wide right.
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func (r *APIKeyReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *APIKeyReconciler) recheck() time.Duration {
	if r.RecheckInterval > 0 {
		return r.RecheckInterval
	}
	return 5 * time.Minute
}

// SecretNameOf is the Secret an APIKey's key is written to.
func SecretNameOf(k *posturev1.APIKey) string {
	if k.Spec.SecretName != "" {
		return k.Spec.SecretName
	}
	return k.Name + "-api-key"
}

func (r *APIKeyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var key posturev1.APIKey
	if err := r.Get(ctx, req.NamespacedName, &key); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !key.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	orig := key.DeepCopy()
	r.recordEnd(&key)

	secretName := SecretNameOf(&key)
	generated, changedFrom := false, ""
	f := apiKeyFacts{Now: r.now()}
	// A key is issued once. An APIKey whose status already records its end
	// never gets one again, even if its hash were lost: a new key takes a new
	// APIKey. (One created already revoked still gets its key, which never
	// works, so that its Secret shows what was issued.)
	ended := key.Status.RevokedAt != nil || key.Status.ExpiredAt != nil
	switch {
	case key.Status.Hash == "" && orig.Status.RevokedAt == nil && orig.Status.ExpiredAt == nil:
		prefix, hash, origin, reason, msg, err := r.generate(ctx, &key, secretName)
		if err != nil {
			return ctrl.Result{}, err
		}
		if reason != "" {
			f.DeliveryReason, f.DeliveryMessage = reason, msg
			break
		}
		key.Status.Prefix, key.Status.Hash, key.Status.SecretName, key.Status.KeyOrigin = prefix, hash, secretName, origin
		generated = true
	case ended:
		// A dead key's Secret no longer matters; the conditions say why it is dead.
	default:
		// The Secret is the key's source of truth: a key written there later
		// (a sealed or external secret replacing the one first found or
		// generated) replaces the old key, which stops working. A
		// spec.secretName naming another Secret moves the key there the same
		// way, as a key that Secret holds: the operator keeps no more of the
		// old one than its hash, so it cannot write it anywhere.
		from := key.Status.SecretName
		if from == "" {
			from = secretName
		}
		moved := from != secretName
		sec, err := r.readSecret(ctx, key.Namespace, secretName)
		if err != nil {
			return ctrl.Result{}, err
		}
		if sec == nil {
			f.DeliveryReason = ReasonSecretMissing
			f.DeliveryMessage = fmt.Sprintf("Secret %s with key %s is gone; the key still works for whoever holds it (revoke or delete this APIKey to stop it) but cannot be shown again: create a new APIKey for a new key, or put a key in a Secret of that name to replace it", key.Status.SecretName, key.Status.Prefix)
			if moved {
				f.DeliveryMessage = fmt.Sprintf("spec.secretName names Secret %s, which does not exist; key %s, read from Secret %s, still works: "+
					"put a key in Secret %s to replace it, or set spec.secretName back", secretName, key.Status.Prefix, from, secretName)
			}
			break
		}
		value := string(sec.Data[APIKeySecretKey])
		if key.Status.KeyOrigin == "" && !moved {
			// Issued before origins were recorded.
			key.Status.KeyOrigin = originOf(&key, sec)
		}
		if auth.HashKey(value) != key.Status.Hash || moved {
			prefix, reason, msg, err := r.checkAdoptable(ctx, &key, sec)
			if err != nil {
				return ctrl.Result{}, err
			}
			if reason != "" {
				readFrom := "read from it before"
				if moved {
					readFrom = "read from Secret " + from
				}
				f.DeliveryReason = reason
				f.DeliveryMessage = msg + fmt.Sprintf("; key %s, %s, still works until then", key.Status.Prefix, readFrom)
				break
			}
			changedFrom = key.Status.Prefix
			key.Status.Prefix, key.Status.Hash, key.Status.SecretName = prefix, auth.HashKey(value), secretName
			key.Status.KeyOrigin = originOf(&key, sec)
		}
	}

	tenant, err := tenancy.ForNamespace(ctx, r.Client, key.Namespace)
	var te *tenancy.Error
	switch {
	case errors.As(err, &te):
		f.TenantProblem = te.Reason
	case err != nil:
		f.LookupError = err.Error()
	case tenant != nil:
		f.Tenant = tenant.Name
		_, f.UserKnown = auth.FindUser(tenant, key.Spec.User)
	}
	requeue := deriveAPIKeyStatus(&key, f)
	switch {
	case f.LookupError != "":
		requeue = 10 * time.Second
	case requeue == 0 || requeue > r.recheck():
		requeue = r.recheck()
	}
	written, res, err := patchStatus(ctx, r.Client, &key, orig)
	if err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	switch {
	case !written:
	case generated && key.Status.KeyOrigin == KeyOriginAdopted:
		emit(r.Recorder, &key, corev1.EventTypeNormal, ReasonKeyAdopted, "Adopt", "Adopted API key %s from Secret %s (data key %s); the Secret is left as it is", key.Status.Prefix, secretName, APIKeySecretKey)
	case generated:
		emit(r.Recorder, &key, corev1.EventTypeNormal, ReasonKeyGenerated, "Generate", "Generated API key %s into Secret %s (data key %s)", key.Status.Prefix, secretName, APIKeySecretKey)
	case changedFrom != "":
		emit(r.Recorder, &key, corev1.EventTypeWarning, ReasonKeyChanged, "Rotate", "Secret %s holds a new key %s; key %s no longer works", key.Status.SecretName, key.Status.Prefix, changedFrom)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// originOf says whether the key in sec was generated by this APIKey.
func originOf(key *posturev1.APIKey, sec *corev1.Secret) string {
	if metav1.IsControlledBy(sec, key) {
		return KeyOriginGenerated
	}
	return KeyOriginAdopted
}

// checkAdoptable checks that the api-key of sec may become this APIKey's
// key: it has the operator's format, and no other APIKey holds it (two
// APIKeys with one key would make revoking either meaningless). A non-empty
// reason says why not; the message never repeats the key.
func (r *APIKeyReconciler) checkAdoptable(ctx context.Context, key *posturev1.APIKey, sec *corev1.Secret) (prefix, reason, msg string, err error) {
	if owner := metav1.GetControllerOf(sec); owner != nil && owner.Kind == "APIKey" && owner.UID != key.UID {
		return "", ReasonSecretConflict, fmt.Sprintf("Secret %s belongs to APIKey %s; set spec.secretName to a Secret of this APIKey's own", sec.Name, owner.Name), nil
	}
	// Only a Secret named in spec.secretName is adopted: admission checked
	// that its author may read it. Under the default name, anyone who may
	// create APIKeys could otherwise put a Secret's key, one they cannot
	// read (say a revoked key's, left behind), back to work.
	if key.Spec.SecretName == "" && !metav1.IsControlledBy(sec, key) {
		return "", ReasonSecretConflict, fmt.Sprintf("Secret %s already exists and was not created by this APIKey; an existing Secret's key is adopted only when spec.secretName names it "+
			"(which needs get on the Secret): set spec.secretName to %s to adopt it, or use another APIKey name", sec.Name, sec.Name), nil
	}
	raw, ok := sec.Data[APIKeySecretKey]
	if !ok {
		return "", ReasonSecretConflict, fmt.Sprintf("Secret %s already exists and holds no %s; set spec.secretName to a free name, or put a key in its %s", sec.Name, APIKeySecretKey, APIKeySecretKey), nil
	}
	value := string(raw)
	prefix, perr := auth.ParseKey(value)
	if perr != nil {
		return "", ReasonKeyMalformed, fmt.Sprintf("Secret %s: its %s is not an API key of this operator (%v); write a key of the form pk_<8 lowercase letters or digits>.<43 or more base64url characters> there", sec.Name, APIKeySecretKey, perr), nil
	}
	var others posturev1.APIKeyList
	if err := r.List(ctx, &others, client.MatchingFields{auth.IndexAPIKeyPrefix: prefix}); err != nil {
		return "", "", "", fmt.Errorf("look up APIKeys with prefix %s: %w", prefix, err)
	}
	hash := auth.HashKey(value)
	for _, o := range others.Items {
		if o.UID != key.UID && o.Status.Hash == hash {
			return "", ReasonSecretConflict, fmt.Sprintf("the key in Secret %s (%s) is already APIKey %s/%s's; each APIKey needs a key of its own", sec.Name, prefix, o.Namespace, o.Name), nil
		}
	}
	return prefix, "", "", nil
}

// generate makes the key and its Secret. A Secret that already exists is
// adopted instead: one this APIKey owns (a previous attempt wrote the Secret
// but not the status), or one someone else wrote (Sealed Secrets, External
// Secrets, SOPS) that spec.secretName names, so that a cluster rebuilt from
// Git keeps its keys. An adopted Secret is never written, owned or deleted
// by the operator.
// A non-empty reason means the key cannot be delivered.
func (r *APIKeyReconciler) generate(ctx context.Context, key *posturev1.APIKey, secretName string) (prefix, hash, origin, reason, msg string, err error) {
	var sec corev1.Secret
	nn := types.NamespacedName{Namespace: key.Namespace, Name: secretName}
	err = r.Get(ctx, nn, &sec)
	switch {
	case err == nil:
		if metav1.IsControlledBy(&sec, key) {
			if _, perr := auth.ParseKey(string(sec.Data[APIKeySecretKey])); perr != nil {
				return "", "", "", ReasonSecretConflict, fmt.Sprintf("Secret %s belongs to this APIKey but its %s is not a key; delete the Secret to have a new key generated", secretName, APIKeySecretKey), nil
			}
		}
		p, reason, msg, err := r.checkAdoptable(ctx, key, &sec)
		if err != nil || reason != "" {
			return "", "", "", reason, msg, err
		}
		return p, auth.HashKey(string(sec.Data[APIKeySecretKey])), originOf(key, &sec), "", "", nil
	case !apierrors.IsNotFound(err):
		return "", "", "", "", "", fmt.Errorf("read Secret %s/%s: %w", key.Namespace, secretName, err)
	}

	value, p, err := auth.GenerateKey()
	if err != nil {
		return "", "", "", "", "", err
	}
	tenant := key.Namespace
	if t, terr := tenancy.ForNamespace(ctx, r.Client, key.Namespace); terr == nil && t != nil {
		tenant = t.Name
	}
	sec = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace,
			Name:      secretName,
			Labels: map[string]string{
				posturev1.LabelManagedBy: posturev1.ManagedByValue,
				posturev1.LabelTenant:    tenancy.LabelValue(tenant),
				LabelAPIKey:              tenancy.LabelValue(key.Name),
			},
			Annotations: map[string]string{"posture.dev/api-key-prefix": p, "posture.dev/user": key.Spec.User},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{APIKeySecretKey: []byte(value)},
	}
	if err := controllerutil.SetControllerReference(key, &sec, r.Scheme()); err != nil {
		return "", "", "", "", "", fmt.Errorf("own Secret %s: %w", secretName, err)
	}
	if err := r.Create(ctx, &sec); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Created meanwhile by someone else: the next reconcile adopts it.
			return "", "", "", "", "", fmt.Errorf("Secret %s/%s appeared while generating a key: %w", key.Namespace, secretName, err)
		}
		// The API server's message names the object, never its data.
		return "", "", "", "", "", fmt.Errorf("create Secret %s/%s: %w", key.Namespace, secretName, err)
	}
	return p, auth.HashKey(value), KeyOriginGenerated, "", "", nil
}

// readSecret reads Secret ns/name, nil when it does not exist.
func (r *APIKeyReconciler) readSecret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	var sec corev1.Secret
	nn := types.NamespacedName{Namespace: ns, Name: name}
	err := r.Get(ctx, nn, &sec)
	if apierrors.IsNotFound(err) && r.APIReader != nil {
		err = r.APIReader.Get(ctx, nn, &sec)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", ns, name, err)
	}
	return &sec, nil
}

// recordEnd fixes the key's expiry and records in status when it was revoked
// or expired. These records are what keep a key dead: the authenticator
// refuses a key whose status has either, whatever its spec says later.
func (r *APIKeyReconciler) recordEnd(key *posturev1.APIKey) {
	now := r.now()
	if key.Status.ExpiresAt == nil {
		// Fixed once, from creation: a later reconcile must not push it out.
		exp := metav1.NewTime(key.CreationTimestamp.Add(DefaultAPIKeyLifetime).UTC())
		key.Status.ExpiresAt = &exp
	}
	if auth.Revoked(key) && key.Status.RevokedAt == nil {
		at := metav1.NewTime(now.UTC().Truncate(time.Second))
		key.Status.RevokedAt = &at
	}
	// The expiry in force is judged before spec.expiresAt may move the
	// recorded one: moving it later once it has passed must not revive the key.
	if exp := auth.ExpiresAt(key); key.Status.ExpiredAt == nil && !now.Before(*exp) {
		at := metav1.NewTime(exp.UTC())
		key.Status.ExpiredAt = &at
	}
	switch {
	case key.Status.ExpiredAt != nil:
		key.Status.ExpiresAt = key.Status.ExpiredAt.DeepCopy()
	case key.Spec.ExpiresAt != nil:
		key.Status.ExpiresAt = key.Spec.ExpiresAt.DeepCopy()
	}
}

// SetupWithManager watches APIKeys and Tenants (a user removed from a Tenant
// makes that user's keys not Ready). Key Secrets are rechecked on a timer,
// not watched: see UncachedObjects.
func (r *APIKeyReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := auth.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&posturev1.APIKey{}).
		Watches(&posturev1.Tenant{}, handler.EnqueueRequestsFromMapFunc(r.keysOfTenant),
			// Only spec changes (users, namespace) matter, not status writes.
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("apikey").
		Complete(quietConflicts(r))
}

func (r *APIKeyReconciler) keysOfTenant(ctx context.Context, o client.Object) []reconcile.Request {
	return requestsInNamespace(ctx, r.Client, &posturev1.APIKeyList{}, o.(*posturev1.Tenant).NamespaceName())
}
