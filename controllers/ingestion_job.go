package controllers

import (
	"fmt"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/billing"
	"github.com/posture-dev/posture/internal/ingest"
)

// Labels that link a worker Job back to its Ingestion across namespaces
// (an owner reference cannot cross namespaces).
const (
	LabelIngestionNamespace = "posture.dev/ingestion-namespace"
	LabelIngestionUID       = "posture.dev/ingestion-uid"
	LabelAttempt            = "posture.dev/attempt"
	LabelComponent          = "app.kubernetes.io/component"
)

// WorkerJobConfig is how worker Jobs are built; it comes from the manager's flags.
type WorkerJobConfig struct {
	// Namespace the Jobs run in: the operator's own.
	Namespace       string
	Image           string
	ImagePullPolicy corev1.PullPolicy
	// StoreDriver is "postgres" in clusters; the DSN comes from a Secret so it
	// never appears in the Job spec.
	StoreDriver    string
	StoreSecret    string
	StoreSecretKey string
	// BackoffLimit is how many failed pods the Job tolerates.
	BackoffLimit int32
	// ActiveDeadlineSeconds bounds one attempt's run time.
	ActiveDeadlineSeconds int64
	// TTLSecondsAfterRecorded is set on the Job once its outcome is recorded.
	TTLSecondsAfterRecorded int32
	Resources               corev1.ResourceRequirements
	ServiceAccountName      string
	// Pod is the worker section of --pod-config; its image, pull policy and
	// resources win over the fields above.
	Pod WorkerPodSettings
	// Owner, when set, owns every worker Job: the manager's Deployment, so
	// that deleting it (helm uninstall) deletes the Jobs and their pods,
	// which nothing else would remove before their TTL.
	Owner *metav1.OwnerReference
}

func (c WorkerJobConfig) ttlAfterRecorded() int32 {
	if c.TTLSecondsAfterRecorded > 0 {
		return c.TTLSecondsAfterRecorded
	}
	return 3600
}

// WorkerJobName is deterministic so that a repeated Start finds the Job it
// already created instead of creating a second one.
func WorkerJobName(ing *posturev1.Ingestion, attempt int) string {
	return fmt.Sprintf("ingest-%s-%d", ing.UID, attempt)
}

// BuildWorkerJob is the pure spec builder for the Job that runs one attempt.
func BuildWorkerJob(cfg WorkerJobConfig, ing *posturev1.Ingestion, attempt ingest.Attempt) *batchv1.Job {
	labels := map[string]string{
		posturev1.LabelManagedBy: posturev1.ManagedByValue,
		LabelComponent:           "ingestion-worker",
		posturev1.LabelTenant:    attempt.Tenant,
		posturev1.LabelIngestion: ing.Name,
		LabelIngestionNamespace:  ing.Namespace,
		LabelIngestionUID:        string(ing.UID),
		LabelAttempt:             strconv.Itoa(attempt.Attempt),
	}
	backoff := cfg.BackoffLimit
	if backoff <= 0 {
		backoff = 2
	}
	deadline := cfg.ActiveDeadlineSeconds
	if deadline <= 0 {
		deadline = 3600
	}
	storeKey := cfg.StoreSecretKey
	if storeKey == "" {
		storeKey = "dsn"
	}
	resources := cfg.Resources
	if cfg.Pod.Resources != nil {
		resources = *cfg.Pod.Resources
	}
	if resources.Requests == nil && resources.Limits == nil {
		resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		}
	}
	args := []string{
		"worker",
		"--tenant=" + attempt.Tenant,
		"--ingestion=" + attempt.IngestionID,
		"--blob=" + attempt.BlobID,
		"--attempt=" + strconv.Itoa(attempt.Attempt),
		"--total=" + strconv.Itoa(attempt.Total),
	}
	if attempt.ReportSHA256 != "" {
		args = append(args, "--report-sha256="+attempt.ReportSHA256)
	}
	if attempt.AllowedAccounts != nil {
		args = append(args, "--allowed-accounts="+billing.FormatAllowedAccounts(attempt.AllowedAccounts))
	}
	image, pullPolicy := cfg.Image, cfg.ImagePullPolicy
	if cfg.Pod.Image != "" {
		image = cfg.Pod.Image
	}
	if cfg.Pod.ImagePullPolicy != "" {
		pullPolicy = cfg.Pod.ImagePullPolicy
	}
	env := []corev1.EnvVar{
		{Name: "POSTURE_STORE_DRIVER", Value: cfg.StoreDriver},
		{Name: "POSTURE_STORE_DSN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: cfg.StoreSecret},
			Key:                  storeKey,
		}}},
	}
	out := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      WorkerJobName(ing, attempt.Attempt),
			Namespace: cfg.Namespace,
			Labels:    labels,
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          &backoff,
			ActiveDeadlineSeconds: &deadline,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					ServiceAccountName:           cfg.ServiceAccountName,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            "worker",
						Image:           image,
						ImagePullPolicy: pullPolicy,
						Args:            args,
						// Of repeated names the kubelet keeps the last: the
						// store's come after the extra ones, so that an extra
						// variable cannot redirect the worker's store.
						Env:       append(slices.Clone(cfg.Pod.ExtraEnv), env...),
						Resources: resources,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						VolumeMounts: append([]corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}, cfg.Pod.ExtraVolumeMounts...),
					}},
					Volumes: append([]corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}, cfg.Pod.ExtraVolumes...),
				},
			},
		},
	}
	applyPodSettings(&out.Spec.Template, cfg.Pod.PodSettings)
	if cfg.Owner != nil {
		out.OwnerReferences = []metav1.OwnerReference{*cfg.Owner}
	}
	return out
}
