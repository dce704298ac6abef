package controllers

import (
	"context"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/tenancy"
)

// AttemptState is what an executor can tell about an attempt: whether
// something still runs it. What the attempt recorded is its run's (the store).
type AttemptState int

const (
	// AttemptActive: queued or running.
	AttemptActive AttemptState = iota
	// AttemptExited: the executor finished the attempt (it may or may not have
	// recorded an outcome in the store).
	AttemptExited
	// AttemptGone: nothing runs the attempt any more and it never reported, e.g.
	// the manager restarted under an in-process attempt or someone deleted the Job.
	AttemptGone
	// AttemptFailed: the executor gave up (Job backoff limit or deadline).
	AttemptFailed
)

// Observation is an executor's report on one attempt.
type Observation struct {
	State  AttemptState
	Reason string
}

// Executor runs the worker for an ingestion attempt somewhere.
type Executor interface {
	Name() string
	// Start begins the attempt; it is idempotent for the same attempt.
	// It returns the name of the Kubernetes Job when there is one.
	Start(ctx context.Context, ing *posturev1.Ingestion, attempt ingest.Attempt) (string, error)
	Observe(ctx context.Context, ing *posturev1.Ingestion, attempt ingest.Attempt) (Observation, error)
	// Release is called once the outcome is recorded in the Ingestion status.
	Release(ctx context.Context, ing *posturev1.Ingestion, attempt ingest.Attempt) error
	// Cancel stops every attempt of an Ingestion being deleted and reports
	// whether nothing runs any of them any more; until then the caller
	// asks again, and must not delete what a worker may still write to.
	Cancel(ctx context.Context, ing *posturev1.Ingestion) (stopped bool, err error)
}

// InProcessExecutor runs attempts in the manager's own worker pool.
type InProcessExecutor struct {
	Pool *ingest.Pool
}

func (e *InProcessExecutor) Name() string { return "inprocess" }

func (e *InProcessExecutor) Start(_ context.Context, _ *posturev1.Ingestion, attempt ingest.Attempt) (string, error) {
	return "", e.Pool.Submit(attempt)
}

func (e *InProcessExecutor) Observe(_ context.Context, _ *posturev1.Ingestion, attempt ingest.Attempt) (Observation, error) {
	if e.Pool.Active(attempt) {
		return Observation{State: AttemptActive}, nil
	}
	// The pool forgets an attempt once it returns, so "not active" is either
	// "exited" or "this process never had it" (a restart); the store decides.
	return Observation{State: AttemptGone, Reason: "no in-process worker holds this attempt (the manager restarted or the worker stopped)"}, nil
}

func (e *InProcessExecutor) Release(context.Context, *posturev1.Ingestion, ingest.Attempt) error {
	return nil
}

func (e *InProcessExecutor) Cancel(_ context.Context, ing *posturev1.Ingestion) (bool, error) {
	return e.Pool.Cancel(tenancy.Of(ing), ing.Name), nil
}

// JobExecutor runs each attempt as a batch/v1 Job in the operator namespace.
type JobExecutor struct {
	Client client.Client
	Config WorkerJobConfig
	// OwnerDeployment names the manager's Deployment in Config.Namespace,
	// which then owns every worker Job (see WorkerJobConfig.Owner). Reader
	// looks it up, uncached, at the first Job.
	OwnerDeployment string
	Reader          client.Reader

	ownerMu sync.Mutex
	owner   *metav1.OwnerReference
}

func (e *JobExecutor) Name() string { return "job" }

// jobOwner resolves OwnerDeployment into an owner reference, once it is
// found; until then (and without one) Jobs have no owner.
func (e *JobExecutor) jobOwner(ctx context.Context) (*metav1.OwnerReference, error) {
	if e.OwnerDeployment == "" {
		return nil, nil
	}
	e.ownerMu.Lock()
	defer e.ownerMu.Unlock()
	if e.owner != nil {
		return e.owner, nil
	}
	var d appsv1.Deployment
	if err := e.Reader.Get(ctx, client.ObjectKey{Namespace: e.Config.Namespace, Name: e.OwnerDeployment}, &d); err != nil {
		return nil, fmt.Errorf("look up the Deployment %s/%s that owns worker Jobs (--job-owner-deployment): %w", e.Config.Namespace, e.OwnerDeployment, err)
	}
	e.owner = &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID}
	return e.owner, nil
}

func (e *JobExecutor) Start(ctx context.Context, ing *posturev1.Ingestion, attempt ingest.Attempt) (string, error) {
	cfg := e.Config
	owner, err := e.jobOwner(ctx)
	if err != nil {
		return "", err
	}
	cfg.Owner = owner
	desired := BuildWorkerJob(cfg, ing, attempt)
	if err := e.Client.Create(ctx, desired); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create Job %s/%s: %w", desired.Namespace, desired.Name, err)
	}
	return desired.Name, nil
}

func (e *JobExecutor) Observe(ctx context.Context, ing *posturev1.Ingestion, attempt ingest.Attempt) (Observation, error) {
	var j batchv1.Job
	key := types.NamespacedName{Namespace: e.Config.Namespace, Name: WorkerJobName(ing, attempt.Attempt)}
	if err := e.Client.Get(ctx, key, &j); err != nil {
		if apierrors.IsNotFound(err) {
			return Observation{State: AttemptGone, Reason: fmt.Sprintf("Job %s no longer exists", key.Name)}, nil
		}
		return Observation{}, err
	}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return Observation{State: AttemptExited}, nil
		case batchv1.JobFailed:
			reason := c.Reason
			if c.Message != "" {
				reason += ": " + c.Message
			}
			return Observation{State: AttemptFailed, Reason: fmt.Sprintf("Job %s failed (%s)", key.Name, reason)}, nil
		}
	}
	return Observation{State: AttemptActive}, nil
}

// Release lets Kubernetes garbage-collect the Job only now that its result is
// recorded, so a finished Job is never removed before anyone read its outcome.
func (e *JobExecutor) Release(ctx context.Context, ing *posturev1.Ingestion, attempt ingest.Attempt) error {
	var j batchv1.Job
	key := types.NamespacedName{Namespace: e.Config.Namespace, Name: WorkerJobName(ing, attempt.Attempt)}
	if err := e.Client.Get(ctx, key, &j); err != nil {
		return client.IgnoreNotFound(err)
	}
	if j.Spec.TTLSecondsAfterFinished != nil {
		return nil
	}
	patch := client.MergeFrom(j.DeepCopy())
	ttl := e.Config.ttlAfterRecorded()
	j.Spec.TTLSecondsAfterFinished = &ttl
	return client.IgnoreNotFound(e.Client.Patch(ctx, &j, patch))
}

// Cancel deletes the worker Jobs of every attempt of ing, found by the
// Ingestion's UID label. Background propagation lets the garbage collector
// remove their pods; a pod stopped mid-run finds its run row gone and writes
// nothing more.
func (e *JobExecutor) Cancel(ctx context.Context, ing *posturev1.Ingestion) (bool, error) {
	var jobs batchv1.JobList
	if err := e.Client.List(ctx, &jobs, client.InNamespace(e.Config.Namespace), client.MatchingLabels{LabelIngestionUID: string(ing.UID)}); err != nil {
		return false, fmt.Errorf("list the Jobs of ingestion %s/%s: %w", ing.Namespace, ing.Name, err)
	}
	stopped := true
	for i := range jobs.Items {
		j := &jobs.Items[i]
		if !j.DeletionTimestamp.IsZero() {
			stopped = false
			continue
		}
		if err := e.Client.Delete(ctx, j, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &j.UID}); client.IgnoreNotFound(err) != nil {
			return false, fmt.Errorf("delete Job %s/%s of ingestion %s/%s: %w", j.Namespace, j.Name, ing.Namespace, ing.Name, err)
		}
	}
	return stopped, nil
}
