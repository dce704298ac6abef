package controllers_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/controllers"
	"github.com/posture-dev/posture/internal/ingest"
)

func TestBuildWorkerJob(t *testing.T) {
	ing := &posturev1.Ingestion{ObjectMeta: metav1.ObjectMeta{
		Name: "5f0e8a52-1b7e-4c53-9c55-0d6f3b2a9e11", Namespace: "tenant-demo", UID: "0b7a1c1e-2f0d-4a43-8d0f-6d1b0e9d4c21",
	}}
	job := ingest.Attempt{Tenant: "demo", Namespace: "tenant-demo", IngestionID: ing.Name, BlobID: "blob-1", Attempt: 2, Total: 1500}
	cfg := controllers.WorkerJobConfig{
		Namespace: "posture-system", Image: "ghcr.io/posture/manager:v1", StoreDriver: "postgres",
		StoreSecret: "posture-store", StoreSecretKey: "dsn",
	}
	got := controllers.BuildWorkerJob(cfg, ing, job)
	again := controllers.BuildWorkerJob(cfg, ing, job)
	pod := got.Spec.Template.Spec
	c := pod.Containers[0]

	checks := []struct {
		name string
		ok   bool
	}{
		{"name is deterministic from the ingestion UID and attempt", got.Name == "ingest-0b7a1c1e-2f0d-4a43-8d0f-6d1b0e9d4c21-2" && again.Name == got.Name},
		{"runs in the operator namespace", got.Namespace == "posture-system"},
		{"labels link back to the Ingestion", got.Labels[posturev1.LabelIngestion] == ing.Name &&
			got.Labels[controllers.LabelIngestionNamespace] == "tenant-demo" &&
			got.Labels[controllers.LabelIngestionUID] == string(ing.UID) &&
			got.Labels[posturev1.LabelTenant] == "demo" && got.Labels[controllers.LabelAttempt] == "2"},
		{"pods carry the same labels", pod.RestartPolicy != "" && got.Spec.Template.Labels[posturev1.LabelIngestion] == ing.Name},
		{"restartPolicy Never", pod.RestartPolicy == corev1.RestartPolicyNever},
		{"bounded retries", got.Spec.BackoffLimit != nil && *got.Spec.BackoffLimit == 2},
		{"bounded run time", got.Spec.ActiveDeadlineSeconds != nil && *got.Spec.ActiveDeadlineSeconds == 3600},
		{"no TTL before the result is recorded", got.Spec.TTLSecondsAfterFinished == nil},
		{"no service-account token", pod.AutomountServiceAccountToken != nil && !*pod.AutomountServiceAccountToken},
		{"non-root pod", pod.SecurityContext != nil && pod.SecurityContext.RunAsNonRoot != nil && *pod.SecurityContext.RunAsNonRoot},
		{"read-only root filesystem", c.SecurityContext != nil && c.SecurityContext.ReadOnlyRootFilesystem != nil && *c.SecurityContext.ReadOnlyRootFilesystem},
		{"no privilege escalation, no capabilities", c.SecurityContext != nil && !*c.SecurityContext.AllowPrivilegeEscalation &&
			slices.Equal(c.SecurityContext.Capabilities.Drop, []corev1.Capability{"ALL"})},
		{"the image is the configured one", c.Image == cfg.Image},
		{"the worker subcommand with the attempt", len(c.Args) > 0 && c.Args[0] == "worker" &&
			slices.Contains(c.Args, "--tenant=demo") && slices.Contains(c.Args, "--ingestion="+ing.Name) &&
			slices.Contains(c.Args, "--blob=blob-1") && slices.Contains(c.Args, "--attempt=2") && slices.Contains(c.Args, "--total=1500")},
		{"writable /tmp only", len(c.VolumeMounts) == 1 && c.VolumeMounts[0].MountPath == "/tmp"},
		{"memory is limited", !c.Resources.Limits.Memory().IsZero()},
	}
	for _, check := range checks {
		if !check.ok {
			t.Errorf("%s: not so in %+v", check.name, got)
		}
	}

	// The store DSN only by Secret reference: never a value in the Job.
	var dsn *corev1.EnvVar
	for i := range c.Env {
		if c.Env[i].Name == "POSTURE_STORE_DSN" {
			dsn = &c.Env[i]
		}
		if strings.Contains(c.Env[i].Value, "postgres://") {
			t.Errorf("env %s carries a DSN value", c.Env[i].Name)
		}
	}
	if dsn == nil || dsn.Value != "" || dsn.ValueFrom == nil || dsn.ValueFrom.SecretKeyRef == nil ||
		dsn.ValueFrom.SecretKeyRef.Name != "posture-store" || dsn.ValueFrom.SecretKeyRef.Key != "dsn" {
		t.Errorf("POSTURE_STORE_DSN = %+v, want a reference to Secret posture-store key dsn", dsn)
	}
}
