package controllers

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/sources"
	"github.com/posture-dev/posture/internal/store"
)

// One pure function per kind turns what a reconcile observed into the whole
// status summary: phase and message where the kind has them, Ready,
// Reconciling and Stalled. Reconcilers gather facts and write the result
// once; these functions decide, and are table-tested without a cluster.

// ReasonProviderOverLimit marks a Provider beyond its tenant's plan limit.
const ReasonProviderOverLimit = "ProviderLimitExceeded"

// ingestionFacts is what one reconcile of an Ingestion found and did: its
// steps record it, deriveIngestionStatus turns it into phase, message and
// conditions, and ingestionEvents into the events that announce them.
type ingestionFacts struct {
	// Executor names the executor attempts run with.
	Executor string
	// Refused says why the tenant the Ingestion claims cannot be trusted.
	Refused string
	// Accepted: the Ingestion was seen for the first time.
	Accepted bool
	// Waiting says what a declared source waits for; WaitUntil is when
	// the wait gives up.
	Waiting   string
	WaitUntil time.Time
	// Fetched: a declared source was just stored, as status.report says.
	Fetched bool
	// Billing is how the report's accounts were admitted, when this
	// reconcile admitted them.
	Billing *billingOutcome
	// Started is the attempt this reconcile started (0: none); Retry says
	// why the attempt before it was lost.
	Started int
	Retry   string
	// Run is the attempt's run as read; Ended is the run once it ended, as
	// its worker recorded it or as recorded for a worker that could not.
	Run, Ended *store.Run
	// ErrorCodes counts an ended ingestion's error rows by code.
	ErrorCodes map[string]int
}

// billingOutcome is how an ingestion's accounts were resolved to Providers:
// Message tells it, Denied says whether the plan refused some.
type billingOutcome struct {
	Message string
	Denied  bool
}

// deriveIngestionStatus sets an Ingestion's phase, message, observed
// generation and conditions from what its reconcile found. The first fact
// that decides the phase wins, in the order a reconcile meets them.
func deriveIngestionStatus(ing *posturev1.Ingestion, f ingestionFacts) {
	switch {
	case f.Refused != "":
		setIngestionPhase(ing, posturev1.IngestionFailed, ReasonFailed, f.Refused)
	case f.Ended != nil && f.Ended.Status == store.RunSucceeded:
		setIngestionPhase(ing, posturev1.IngestionCompleted, ReasonCompleted,
			fmt.Sprintf("Processed %s, %d invalid", counted(f.Ended.Processed, "record"), f.Ended.Invalid))
	case f.Ended != nil:
		setIngestionPhase(ing, posturev1.IngestionFailed, ReasonFailed, f.Ended.Message)
	case f.Started > 0 && f.Retry != "":
		setIngestionPhase(ing, posturev1.IngestionProcessing, ReasonRetrying, fmt.Sprintf("Attempt %d: %s", f.Started, f.Retry))
	case f.Started > 0:
		setIngestionPhase(ing, posturev1.IngestionProcessing, ReasonProcessing, "Processing records")
	case f.Waiting != "":
		setIngestionPhase(ing, posturev1.IngestionPending, ReasonPending,
			fmt.Sprintf("Waiting for the report: %s; retrying until %s", f.Waiting, f.WaitUntil.UTC().Format(time.RFC3339)))
	case f.Accepted && sources.Declared(ing):
		setIngestionPhase(ing, posturev1.IngestionPending, ReasonPending, "Reading the report from "+sources.Describe(ing))
	case f.Accepted:
		setIngestionPhase(ing, posturev1.IngestionPending, ReasonPending, "Queued for processing")
	case ing.Status.Phase.Terminal():
		// Restamped from the phase, so an ingestion that ended under an
		// older operator gains the conditions this one derives.
		setIngestionPhase(ing, ing.Status.Phase, ingestionReason(ing.Status.Phase), ing.Status.Message)
	}
	if b := f.Billing; b != nil {
		c := metav1.Condition{Type: ConditionProvidersResolved, Status: metav1.ConditionTrue, Reason: ReasonProvidersResolved,
			Message: b.Message, ObservedGeneration: ing.Generation}
		if b.Denied {
			c.Status, c.Reason = metav1.ConditionFalse, ReasonProviderLimit
		}
		meta.SetStatusCondition(&ing.Status.Conditions, c)
	}
}

// setIngestionPhase sets everything that follows from an ingestion's phase:
// the phase, its message, the generation observed and the conditions.
// reason is the transition (Pending, Processing, Retrying, Completed, Failed).
func setIngestionPhase(ing *posturev1.Ingestion, phase posturev1.IngestionPhase, reason, msg string) {
	ing.Status.Phase = phase
	ing.Status.Message = msg
	ing.Status.ObservedGeneration = ing.Generation
	v := verdict{reason: reason, message: msg}
	switch phase {
	case posturev1.IngestionCompleted:
		v.ready = metav1.ConditionTrue
	case posturev1.IngestionFailed:
		// A failed ingestion is never retried: a person submits a new one.
		v.ready, v.stalled = metav1.ConditionFalse, true
	default:
		v.ready, v.reconciling = metav1.ConditionUnknown, true
	}
	v.apply(&ing.Status.Conditions, ing.Generation)
}

// ingestionReason is the transition reason that describes a phase, for a
// reconcile that restamps a terminal ingestion without a transition.
func ingestionReason(phase posturev1.IngestionPhase) string {
	switch phase {
	case posturev1.IngestionCompleted:
		return ReasonCompleted
	case posturev1.IngestionFailed:
		return ReasonFailed
	case posturev1.IngestionProcessing:
		return ReasonProcessing
	}
	return ReasonPending
}

// tenantFacts is what a Tenant reconcile observed.
type tenantFacts struct {
	// Namespace is the namespace the tenant uses.
	Namespace string
	// NamespaceOwner is set when the namespace carries another tenant's label.
	NamespaceOwner string
	// NamespaceTerminating: the namespace is being deleted.
	NamespaceTerminating bool
	// UnknownRoles and MissingSecrets describe users, one entry each.
	UnknownRoles, MissingSecrets []string
	// Providers is the number of billed Providers (counted only when the
	// namespace is usable).
	Providers int
}

// deriveTenantStatus sets a Tenant's status from what its reconcile observed.
func deriveTenantStatus(t *posturev1.Tenant, f tenantFacts) {
	t.Status.ObservedGeneration = t.Generation
	t.Status.Namespace = f.Namespace
	t.Status.ProviderLimit = t.Spec.Subscription.ProviderLimit
	var v verdict
	switch {
	case f.NamespaceOwner != "":
		v = verdict{reason: ReasonNamespaceConflict, stalled: true,
			message: fmt.Sprintf("namespace %s belongs to tenant %s (label %s); choose another spec.namespace", f.Namespace, f.NamespaceOwner, posturev1.LabelTenant)}
	case f.NamespaceTerminating:
		v = verdict{reason: ReasonNamespaceTerminate, reconciling: true,
			message: fmt.Sprintf("namespace %s is being deleted; it is created again once it is gone", f.Namespace)}
	default:
		t.Status.Providers = int32(f.Providers)
		switch {
		case len(f.UnknownRoles) > 0:
			v = verdict{reason: ReasonUnknownRole, stalled: true,
				message: "unknown role: " + strings.Join(f.UnknownRoles, "; ") + "; users with an unknown role hold no permissions"}
		case len(f.MissingSecrets) > 0:
			v = verdict{reason: ReasonPasswordSecret, stalled: true,
				message: "password Secret missing: " + strings.Join(f.MissingSecrets, "; ") + "; these users cannot sign in"}
		default:
			usage := counted(f.Providers, "provider") + ", unlimited"
			if limit := t.Spec.Subscription.ProviderLimit; limit > 0 {
				usage = fmt.Sprintf("%d of %s", f.Providers, counted(limit, "provider"))
			}
			sub := "no active subscription (ingestion answers 402)"
			if t.Spec.Subscription.Active {
				sub = "subscription active"
			}
			v = verdict{ready: metav1.ConditionTrue, reason: ReasonTenantReady,
				message: fmt.Sprintf("Namespace %s, %s, %s, %s", f.Namespace, counted(len(t.Spec.Users), "user"), sub, usage)}
		}
	}
	v.apply(&t.Status.Conditions, t.Generation)
}

// apiKeyFacts is what an APIKey reconcile observed, beyond its status.
type apiKeyFacts struct {
	Now time.Time
	// DeliveryReason and DeliveryMessage say why the key's Secret cannot be
	// written or is gone (SecretConflict, SecretMissing); empty when fine.
	DeliveryReason, DeliveryMessage string
	// Tenant is the tenant of the key's namespace; empty when none.
	Tenant string
	// TenantProblem says why the namespace has no usable Tenant, when a
	// person must fix it (auth.Error).
	TenantProblem string
	// LookupError is a transient failure to look the tenant up.
	LookupError string
	// UserKnown: spec.user is a user of Tenant.
	UserKnown bool
}

// deriveAPIKeyStatus sets an APIKey's Ready, Usable, Reconciling and Stalled
// from its recorded end (status.revokedAt, status.expiredAt) and what the
// reconcile observed. Ready means reconciled as declared, so a key revoked or
// expired on purpose is Ready; whether it authenticates is Usable. It returns
// how soon the verdict changes by itself (the key expiring), zero for never.
func deriveAPIKeyStatus(key *posturev1.APIKey, f apiKeyFacts) time.Duration {
	key.Status.ObservedGeneration = key.Generation
	prefix := key.Status.Prefix
	var usable, ready verdict
	var next time.Duration
	switch {
	case key.Status.RevokedAt != nil:
		usable = verdict{ready: metav1.ConditionFalse, reason: ReasonKeyRevoked,
			message: fmt.Sprintf("API key %s was revoked at %s; revocation is permanent: create a new APIKey for a new key", prefix, key.Status.RevokedAt.UTC().Format(time.RFC3339))}
	case key.Status.ExpiredAt != nil:
		usable = verdict{ready: metav1.ConditionFalse, reason: ReasonKeyExpired,
			message: fmt.Sprintf("API key %s expired at %s; expiry is permanent: create a new APIKey for a new key", prefix, key.Status.ExpiredAt.UTC().Format(time.RFC3339))}
	case key.Status.Hash == "":
		usable = verdict{ready: metav1.ConditionFalse, reason: f.DeliveryReason, message: "no key has been issued: " + f.DeliveryMessage}
	case f.TenantProblem != "":
		usable = verdict{ready: metav1.ConditionFalse, reason: ReasonUserUnknown, message: f.TenantProblem}
	case f.LookupError != "":
		usable = verdict{ready: metav1.ConditionUnknown, reason: ReasonUserUnknown, message: f.LookupError}
	case f.Tenant == "":
		usable = verdict{ready: metav1.ConditionFalse, reason: ReasonUserUnknown,
			message: fmt.Sprintf("no Tenant uses namespace %s, so user %s is unknown", key.Namespace, key.Spec.User)}
	case !f.UserKnown:
		usable = verdict{ready: metav1.ConditionFalse, reason: ReasonUserUnknown,
			message: fmt.Sprintf("%s is not a user of tenant %s", key.Spec.User, f.Tenant)}
	default:
		usable = verdict{ready: metav1.ConditionTrue, reason: ReasonKeyActive,
			message: fmt.Sprintf("API key %s acts for %s in tenant %s; its key is in Secret %s", prefix, key.Spec.User, f.Tenant, key.Status.SecretName)}
		if exp := key.Status.ExpiresAt; exp != nil {
			// Wake up when it expires, so both conditions flip on time.
			next = exp.Sub(f.Now) + time.Second
		}
	}
	switch {
	case key.Status.RevokedAt != nil || key.Status.ExpiredAt != nil:
		// Ended as declared (or as its expiry said): nothing is left to do,
		// and its Secret no longer matters.
		ready = usable
		ready.ready = metav1.ConditionTrue
	case f.DeliveryReason != "":
		ready = verdict{reason: f.DeliveryReason, message: f.DeliveryMessage, stalled: true}
	case usable.ready == metav1.ConditionUnknown:
		ready = usable
		ready.reconciling = true
	default:
		ready = usable
		// An unknown user or tenant waits for a person to change the Tenant.
		ready.stalled = usable.ready != metav1.ConditionTrue
	}
	ready.apply(&key.Status.Conditions, key.Generation)
	meta.SetStatusCondition(&key.Status.Conditions, metav1.Condition{
		Type: posturev1.ConditionUsable, Status: usable.ready, Reason: usable.reason,
		Message: usable.message, ObservedGeneration: key.Generation,
	})
	return next
}

// providerFacts is what a Provider reconcile observed.
type providerFacts struct {
	// Tenant is the tenant billed; empty when none.
	Tenant string
	// TenantProblem says why the namespace has no usable Tenant (auth.Error).
	TenantProblem string
	// Limit is the tenant's plan limit (0: unlimited); Admitted says
	// whether the plan bills this Provider, and Billed how many Providers
	// it bills (see Billing.AdmitProvider).
	Limit    int32
	Admitted bool
	Billed   int
}

// deriveProviderStatus sets a Provider's status from what its reconcile observed.
func deriveProviderStatus(p *posturev1.Provider, f providerFacts) {
	p.Status.ObservedGeneration = p.Generation
	var v verdict
	switch {
	case f.TenantProblem != "":
		v = verdict{reason: ReasonNoTenant, stalled: true, message: f.TenantProblem}
	case f.Tenant == "":
		v = verdict{reason: ReasonNoTenant, stalled: true,
			message: fmt.Sprintf("no Tenant uses namespace %s, so this provider is not billed to anyone", p.Namespace)}
	case f.Limit > 0 && !f.Admitted:
		v = verdict{reason: ReasonProviderOverLimit, stalled: true,
			message: fmt.Sprintf("over the plan limit: tenant %s's plan bills for %s and bills %d already, so this %s account %s is not billed; delete a Provider or raise the Tenant's spec.subscription.providerLimit", f.Tenant, counted(f.Limit, "provider"), f.Billed, p.Spec.Type, p.Spec.UID)}
	default:
		origin := p.Spec.Origin
		if origin == "" {
			origin = posturev1.ProviderConnected
		}
		v = verdict{ready: metav1.ConditionTrue, reason: ReasonProviderBilled,
			message: fmt.Sprintf("%s account %s billed to tenant %s (%s)", p.Spec.Type, p.Spec.UID, f.Tenant, origin)}
	}
	v.apply(&p.Status.Conditions, p.Generation)
}

// mcpFacts is what an MCPServer reconcile observed. At most one of the
// problems is set; with none, Deployment is the server's Deployment.
type mcpFacts struct {
	NoImage bool
	// RefusedURL is the spec.apiBaseURL the operator does not allow.
	RefusedURL, DefaultURL string
	// NoAccess: the operator may not create workloads in the namespace;
	// TenantExists says whether a Tenant uses it (its access is on the way).
	NoAccess, TenantExists bool
	// Conflict says which object of the MCPServer's name is not its own.
	Conflict   string
	Deployment *appsv1.Deployment
}

// deriveMCPServerStatus sets an MCPServer's status from what its reconcile observed.
func deriveMCPServerStatus(m *posturev1.MCPServer, f mcpFacts) {
	m.Status.ObservedGeneration = m.Generation
	m.Status.URL = MCPServerURL(m)
	m.Status.ReadyReplicas = 0
	var v verdict
	switch {
	case f.NoImage:
		v = verdict{reason: ReasonMCPNoImage, stalled: true, message: "no image to run: start the manager with --mcp-image"}
	case f.RefusedURL != "":
		v = verdict{reason: ReasonMCPAPIBaseURLNotAllowed, stalled: true,
			message: fmt.Sprintf("spec.apiBaseURL %q is not an address the operator allows; leave it empty for %s, or ask the operator's administrator to add it to --mcp-allowed-api-base-urls", f.RefusedURL, f.DefaultURL)}
	case f.Conflict != "":
		v = verdict{reason: ReasonMCPNameConflict, stalled: true, message: f.Conflict}
	case f.NoAccess:
		v = verdict{reason: ReasonMCPNoAccess,
			message: fmt.Sprintf("the operator may not create Deployments or Services in namespace %s: MCPServers run only in the namespace of a Tenant", m.Namespace)}
		if f.TenantExists {
			// The Tenant's reconcile grants that right in a moment.
			v.reconciling = true
			v.message += "; waiting for the Tenant's access to be granted"
		} else {
			v.stalled = true
		}
	default:
		m.Status.ReadyReplicas = f.Deployment.Status.ReadyReplicas
		v = deploymentReadiness(f.Deployment)
	}
	v.apply(&m.Status.Conditions, m.Generation)
}

// deploymentReadiness says whether the server can take requests, and if not
// what it waits for, in words an operator can act on.
func deploymentReadiness(dep *appsv1.Deployment) verdict {
	want := int32(1)
	if dep.Spec.Replicas != nil {
		want = *dep.Spec.Replicas
	}
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse {
			return verdict{reason: ReasonMCPStalled, stalled: true,
				message: fmt.Sprintf("Deployment %s is not progressing: %s", dep.Name, c.Message)}
		}
	}
	if want == 0 {
		// Declared so: reconciled as declared, though nothing serves.
		return verdict{ready: metav1.ConditionTrue, reason: ReasonMCPScaledDown, message: "the Deployment is scaled to 0 replicas: no pod serves MCP"}
	}
	current := dep.Status.ObservedGeneration >= dep.Generation
	if current && dep.Status.UpdatedReplicas >= want && dep.Status.AvailableReplicas >= want {
		return verdict{ready: metav1.ConditionTrue, reason: ReasonMCPAvailable, message: fmt.Sprintf("%d of %d replicas available", dep.Status.AvailableReplicas, want)}
	}
	msg := fmt.Sprintf("waiting for available replicas: %d of %d available", dep.Status.AvailableReplicas, want)
	if !current {
		msg = fmt.Sprintf("waiting for the Deployment controller to observe generation %d; %d of %d replicas available", dep.Generation, dep.Status.AvailableReplicas, want)
	}
	// A bare control plane (make dev, envtest) runs neither the Deployment
	// controller nor kubelets: saying so saves an operator a search.
	msg += "; a bare control plane without controller-manager and nodes, such as make dev's, never runs the pods"
	return verdict{ready: metav1.ConditionFalse, reason: ReasonMCPProgressing, message: msg, reconciling: true}
}
