package v1alpha1

// ConditionReady is the one summary condition every kind carries, so that
// Argo CD, Flux and kstatus can read health without knowing the kind. It
// means "reconciled as declared": a key declared revoked is Ready.
const ConditionReady = "Ready"

// ConditionReconciling is present, True, while the controller has work in
// flight that ends on its own (an ingestion running, a Deployment rolling
// out); kstatus reads it as InProgress. It is removed, not set False, when the
// work ends, as kstatus' "abnormal-true" conditions are.
const ConditionReconciling = "Reconciling"

// ConditionStalled is present, True, while an object cannot make progress
// until a person changes something (its spec, a Secret, the plan); kstatus
// reads it as Failed and stops waiting. Removed once that changes.
const ConditionStalled = "Stalled"

// ConditionUsable says whether an APIKey's key authenticates now. It is
// separate from Ready because a key revoked or expired on purpose is
// reconciled as declared (Ready) yet refused (Usable=False).
const ConditionUsable = "Usable"

// Labels and annotations shared by the operator's objects.
const (
	LabelTenant    = "posture.dev/tenant"
	LabelIngestion = "posture.dev/ingestion"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "posture"
)
