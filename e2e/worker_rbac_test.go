//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/temporal-rollout/rollout/kube"
)

// The suite's worker and watcher run with the permissions deploy/ gives the ServiceAccount, not
// with the admin's: a verb the code calls and deploy/base/rbac.yaml does not grant fails the
// test that needs it, as it would fail on a cluster installed from deploy/. At suite start (and
// whenever a test that applied and deleted deploy/ took the ClusterRole with it) the suite
// applies rbac.yaml's ClusterRole and ClusterRoleBinding unchanged, and writes a kubeconfig
// whose user is the admin impersonating system:serviceaccount:temporal-rollout:temporal-rollout
// (the admin is in system:masters, which may impersonate; the API server adds the
// ServiceAccount's groups). Impersonation rather than a ServiceAccount token: TestDeployManifests
// and TestManagedModeInstall delete the namespace temporal-rollout, and with it the
// ServiceAccount and every token of it. Those two tests run ours on a real token of theirs.
//
// E2E_WORKER_CREDENTIALS=admin runs ours on the admin's kubeconfig instead (to tell an RBAC
// failure from another). Tests themselves, and `starter` commands, keep the admin's.

const (
	saNamespace = "temporal-rollout"
	saName      = "temporal-rollout"
	saUser      = "system:serviceaccount:" + saNamespace + ":" + saName
	rbacFile    = "../deploy/base/rbac.yaml"
)

// workerCredentials sets up how ours reach the suite's cluster and returns the kubeconfig they
// use: the ServiceAccount's permissions (the default) or, with E2E_WORKER_CREDENTIALS=admin,
// the admin's.
func workerCredentials(ctx context.Context, dir string) (string, error) {
	switch v := os.Getenv("E2E_WORKER_CREDENTIALS"); v {
	case "admin":
		fmt.Fprintln(os.Stderr, "e2e: E2E_WORKER_CREDENTIALS=admin: the worker and watcher run with the admin's credentials, not deploy/'s ServiceAccount's")
		return env.stack.Kubeconfig, nil
	case "", "serviceaccount":
	default:
		return "", fmt.Errorf("E2E_WORKER_CREDENTIALS=%q: want serviceaccount (the default) or admin", v)
	}
	return serviceAccountAccess(ctx, env.kube, env.stack.APIServer, env.stack.Token, dir)
}

// serviceAccountAccess applies rbac.yaml's ClusterRole and ClusterRoleBinding to a cluster and
// writes a kubeconfig (in dir) acting as deploy/'s ServiceAccount there.
func serviceAccountAccess(ctx context.Context, kc kubernetes.Interface, server, adminToken, dir string) (string, error) {
	if err := applyWorkerRBAC(ctx, kc); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "worker-serviceaccount.kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: %s
  user:
    token: %s
    as: %s
contexts:
- name: local
  context:
    cluster: local
    user: %s
current-context: local
`, server, saName, adminToken, saUser, saName)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return "", fmt.Errorf("write the worker's kubeconfig: %w", err)
	}
	return path, nil
}

// applyWorkerRBAC creates or updates rbac.yaml's ClusterRole and ClusterRoleBinding as written.
func applyWorkerRBAC(ctx context.Context, kc kubernetes.Interface) error {
	role, binding, err := readRBAC()
	if err != nil {
		return err
	}
	roles, bindings := kc.RbacV1().ClusterRoles(), kc.RbacV1().ClusterRoleBindings()
	if cur, err := roles.Get(ctx, role.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		_, err = roles.Create(ctx, role, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create clusterrole %s: %w", role.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("get clusterrole %s: %w", role.Name, err)
	} else {
		cur.Rules = role.Rules
		if _, err := roles.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update clusterrole %s: %w", role.Name, err)
		}
	}
	if cur, err := bindings.Get(ctx, binding.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create clusterrolebinding %s: %w", binding.Name, err)
		}
	} else if err != nil {
		return fmt.Errorf("get clusterrolebinding %s: %w", binding.Name, err)
	} else if cur.RoleRef != binding.RoleRef {
		// roleRef is immutable.
		if err := bindings.Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
			return fmt.Errorf("delete clusterrolebinding %s: %w", binding.Name, err)
		}
		if _, err := bindings.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create clusterrolebinding %s: %w", binding.Name, err)
		}
	} else {
		cur.Subjects = binding.Subjects
		if _, err := bindings.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update clusterrolebinding %s: %w", binding.Name, err)
		}
	}
	return nil
}

// readRBAC reads rbac.yaml's ClusterRole and ClusterRoleBinding.
func readRBAC() (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, error) {
	b, err := os.ReadFile(rbacFile)
	if err != nil {
		return nil, nil, err
	}
	var role *rbacv1.ClusterRole
	var binding *rbacv1.ClusterRoleBinding
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", rbacFile, err)
		}
		switch meta.Kind {
		case "ClusterRole":
			role = &rbacv1.ClusterRole{}
			err = yaml.UnmarshalStrict(doc, role)
		case "ClusterRoleBinding":
			binding = &rbacv1.ClusterRoleBinding{}
			err = yaml.UnmarshalStrict(doc, binding)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %s: %w", rbacFile, meta.Kind, err)
		}
	}
	if role == nil || binding == nil {
		return nil, nil, fmt.Errorf("%s has no ClusterRole or no ClusterRoleBinding", rbacFile)
	}
	return role, binding, nil
}

// workerClient is a client with the worker's credentials, for tests that call activities
// directly.
func workerClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	cs, _, err := kube.NewClientsetAs("e2e-worker-credentials", env.workerKubeconfig, 100, 200)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// restoreWorkerRBAC applies rbac.yaml's ClusterRole and binding again, after a test deleted
// deploy/ (and them with it), so that the suite's worker keeps its permissions.
func restoreWorkerRBAC(t *testing.T) {
	t.Helper()
	if env.workerKubeconfig == env.stack.Kubeconfig {
		return
	}
	if err := applyWorkerRBAC(context.Background(), env.kube); err != nil {
		t.Errorf("restore the worker's RBAC: %v", err)
	}
}
