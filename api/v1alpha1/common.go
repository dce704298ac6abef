package v1alpha1

// ConditionReady is the one summary condition every kind carries, so that
// Argo CD, Flux and kstatus can read health without knowing the kind.
const ConditionReady = "Ready"

// ConditionStalled is true while an object cannot make progress until a
// person changes something; kstatus stops waiting on it.
const ConditionStalled = "Stalled"

// Labels and annotations shared by the operator's objects.
const (
	LabelTenant    = "posture.dev/tenant"
	LabelIngestion = "posture.dev/ingestion"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "posture"
)
