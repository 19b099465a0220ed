package rollout

import rbacv1 "k8s.io/api/rbac/v1"

// PolicyRules are the permissions a node's controller needs for rollouts,
// in the Leases' namespace: its own and the turn Lease, and Events.
func PolicyRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "create", "update"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
	}
}
