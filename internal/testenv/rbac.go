package testenv

import (
	"context"
	"fmt"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AggregateClusterRoles does once what kube-controller-manager's
// clusterrole-aggregation controller does all the time: every ClusterRole
// with an aggregationRule (view, edit, admin among them) gets the rules of
// the ClusterRoles its selectors match. A control plane of kube-apiserver and
// etcd alone (make dev, tests) runs no controller-manager, so without this a
// role aggregated into view (posture-data-view) grants view nothing, and a
// view user gets 403 where a cluster would let them read.
//
// Roles aggregating roles that are aggregated themselves (admin takes edit's
// rules through edit's label) settle over a few passes, as the controller's
// requeues settle them.
func AggregateClusterRoles(ctx context.Context, c client.Client) error {
	for pass := 0; pass < 5; pass++ {
		var roles rbacv1.ClusterRoleList
		if err := c.List(ctx, &roles); err != nil {
			return fmt.Errorf("list ClusterRoles: %w", err)
		}
		changed := false
		for i := range roles.Items {
			role := &roles.Items[i]
			if role.AggregationRule == nil {
				continue
			}
			rules, err := aggregatedRules(role, roles.Items)
			if err != nil {
				return err
			}
			if equality.Semantic.DeepEqual(rules, role.Rules) {
				continue
			}
			changed = true
			err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				var current rbacv1.ClusterRole
				if err := c.Get(ctx, client.ObjectKeyFromObject(role), &current); err != nil {
					return err
				}
				current.Rules = rules
				return c.Update(ctx, &current)
			})
			if err != nil {
				return fmt.Errorf("aggregate the rules of ClusterRole %s: %w", role.Name, err)
			}
		}
		if !changed {
			return nil
		}
	}
	return nil
}

// aggregatedRules are the rules of the roles role's selectors match, in the
// controller's order (by selector, then by role name), each once.
func aggregatedRules(role *rbacv1.ClusterRole, all []rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	for _, sel := range role.AggregationRule.ClusterRoleSelectors {
		selector, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			return nil, fmt.Errorf("ClusterRole %s: aggregation selector: %w", role.Name, err)
		}
		var matched []*rbacv1.ClusterRole
		for i := range all {
			if all[i].Name != role.Name && selector.Matches(labels.Set(all[i].Labels)) {
				matched = append(matched, &all[i])
			}
		}
		sort.Slice(matched, func(i, j int) bool { return matched[i].Name < matched[j].Name })
		for _, m := range matched {
			for _, r := range m.Rules {
				if !hasRule(rules, r) {
					rules = append(rules, r)
				}
			}
		}
	}
	return rules, nil
}

func hasRule(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	for _, have := range rules {
		if equality.Semantic.DeepEqual(have, r) {
			return true
		}
	}
	return false
}
