package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// AdmissionPolicies are the objects of config/admission (admission policies,
// their bindings, the posture-apikey-issuer ClusterRole), read from the files
// its kustomization lists, so tests and make dev install what ships.
func AdmissionPolicies() ([]*unstructured.Unstructured, error) {
	dir := filepath.Join(Root(), "config", "admission")
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("config/admission/kustomization.yaml: %w", err)
	}
	var objs []*unstructured.Unstructured
	for _, name := range k.Resources {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("config/admission/%s: %w", name, err)
			}
			if len(u.Object) > 0 {
				objs = append(objs, u)
			}
		}
	}
	return objs, nil
}

// InstallAdmissionPolicies creates the objects of config/admission, or
// replaces them when they exist. The API server enforces a new policy a moment
// after it is created, not at once.
func InstallAdmissionPolicies(ctx context.Context, c client.Client) error {
	objs, err := AdmissionPolicies()
	if err != nil {
		return err
	}
	for _, o := range objs {
		err := c.Create(ctx, o.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(o.GroupVersionKind())
			if err = c.Get(ctx, client.ObjectKeyFromObject(o), cur); err == nil {
				upd := o.DeepCopy()
				upd.SetResourceVersion(cur.GetResourceVersion())
				err = c.Update(ctx, upd)
			}
		}
		if err != nil {
			return fmt.Errorf("install %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}
