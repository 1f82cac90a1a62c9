package lifecycle

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A refusal right after the API server started (its RBAC has not loaded the bootstrap roles:
// seen in e2e TestChaos after a kube-apiserver restart) is retried; a refusal of a server whose
// RBAC is loaded is not.
func TestRBACStarting(t *testing.T) {
	forbidden := func(msg string) error {
		return apierrors.NewForbidden(schema.GroupResource{}, "", errors.New(msg))
	}
	tests := []struct {
		name string
		give error
		want bool
	}{
		{name: "bootstrap roles not found: starting", give: forbidden(`RBAC: [clusterrole.rbac.authorization.k8s.io "system:service-account-issuer-discovery" not found, clusterrole.rbac.authorization.k8s.io "system:public-info-viewer" not found, clusterrole.rbac.authorization.k8s.io "system:basic-user" not found, clusterrole.rbac.authorization.k8s.io "system:discovery" not found, clusterrole.rbac.authorization.k8s.io "temporal-rollout" not found]`), want: true},
		{name: "only our role not found: a real refusal", give: forbidden(`RBAC: clusterrole.rbac.authorization.k8s.io "temporal-rollout" not found`)},
		{name: "no RBAC detail", give: forbidden(`User "x" cannot get path "/version"`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rbacStarting(tt.give); got != tt.want {
				t.Errorf("rbacStarting(%v) = %v, want %v", tt.give, got, tt.want)
			}
		})
	}
}
