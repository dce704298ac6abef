package controllers

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/ingest"
	"github.com/posture-dev/posture/internal/sources"
	"github.com/posture-dev/posture/internal/tenancy"
)

// resolveTenant is the first step: it decides under which tenant the
// report, the run, the error rows and the findings are stored, and records
// an Ingestion seen for the first time.
//
// Anyone who may create Ingestions in a namespace can write the tenant
// label, so one naming another tenant than the namespace's is refused
// before the store is touched, in the status alone: it would write into, or
// delete from, that tenant's data. A declared Ingestion gets the label an
// upload gets from the API.
func (r *IngestionReconciler) resolveTenant(ctx context.Context, ing *posturev1.Ingestion, f *ingestionFacts) (next, error) {
	foreign, err := r.foreignTenant(ctx, ing)
	if err != nil {
		return goOn, err
	}
	if foreign != "" {
		f.Refused = foreign
		if ing.Status.RequestedAt == nil {
			requested := ing.CreationTimestamp
			ing.Status.RequestedAt = &requested
		}
		if ing.Status.CompletedAt == nil {
			done := r.now()
			ing.Status.CompletedAt = &done
		}
		return stopFor(0), nil
	}
	if ing.Status.Phase == "" {
		// The accepted submission: total as counted at upload.
		f.Accepted = true
		requested := ing.CreationTimestamp
		ing.Status.Summary = posturev1.IngestionSummary{Total: ing.Spec.RecordCount}
		ing.Status.RequestedAt = &requested
	}
	if ing.Status.Phase.Terminal() || !declared(ing) || ing.Labels[posturev1.LabelTenant] != "" {
		return goOn, nil
	}
	if err := r.labelTenant(ctx, ing); err != nil {
		return r.sourceFailed(ctx, ing, f, err)
	}
	return goOn, nil
}

// foreignTenant says why the tenant an Ingestion would be stored under
// cannot be trusted (tenancy.ForeignClaim); a declared Ingestion not
// labelled yet is exempt: labelTenant labels it with the owner, or fails it.
func (r *IngestionReconciler) foreignTenant(ctx context.Context, ing *posturev1.Ingestion) (string, error) {
	if ing.Labels[posturev1.LabelTenant] == "" && declared(ing) {
		return "", nil
	}
	return tenancy.ForeignClaim(ctx, r.Client, ing)
}

// labelTenant gives a declared Ingestion the tenant label an upload gets
// from the API, so that its report, run and findings are stored under the
// tenant whose users read them. The Tenant of the namespace is looked up;
// GitOps tools may create it after the Ingestion, so none is a wait. The
// label is added by a merge patch, which a GitOps tool leaves alone: it is
// not in the manifest it applies. The patch answers with the stored
// object, whose status lacks what this reconcile has decided so far: that
// is kept.
func (r *IngestionReconciler) labelTenant(ctx context.Context, ing *posturev1.Ingestion) error {
	t, err := tenancy.ForNamespace(ctx, r.Client, ing.Namespace)
	var te *tenancy.Error
	switch {
	case errors.As(err, &te):
		return &sources.Error{Code: CodeTenantNotFound, Message: te.Reason}
	case err != nil:
		return err
	case t == nil:
		return &sources.Error{Code: ingest.CodeUnreadable, Message: fmt.Sprintf("no Tenant uses namespace %s", ing.Namespace), Transient: true}
	}
	decided := ing.Status.DeepCopy()
	orig := ing.DeepCopy()
	if ing.Labels == nil {
		ing.Labels = map[string]string{}
	}
	ing.Labels[posturev1.LabelTenant] = t.Name
	err = r.Patch(ctx, ing, client.MergeFrom(orig))
	ing.Status = *decided
	if err != nil {
		return fmt.Errorf("label Ingestion %s/%s with its tenant %s: %w", ing.Namespace, ing.Name, t.Name, err)
	}
	return nil
}
