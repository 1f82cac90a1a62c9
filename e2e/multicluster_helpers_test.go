//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/stack"
)

// testCluster is a second Kubernetes cluster beside the suite's (which is the cluster "",
// driven by the suite's worker and watcher without --cluster), with a worker of its own:
// `worker --cluster NAME --watch` on the suite's Temporal, polling the cluster's task queue
// (contract.TaskQueueFor) and starting workflows deployment/NAME/<namespace>/<name>.
type testCluster struct {
	name string
	k    *stack.KubeCluster
	kube kubernetes.Interface
	// worker is the stack's process name of its worker.
	worker string
	// kubeconfig is its worker's: deploy/'s ServiceAccount's permissions on the cluster, as the
	// suite's worker has on the suite's (worker_rbac_test.go).
	kubeconfig string
}

// startCluster starts cluster name (etcd, kube-apiserver, kube-controller-manager without the
// Deployment controller, kube-scheduler, kwok with one node) and its worker; t.Cleanup stops
// both.
func startCluster(t *testing.T, name string) *testCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	k, err := env.stack.StartKubeCluster(ctx, name)
	if err != nil {
		t.Fatalf("start cluster %s: %v", name, err)
	}
	c := &testCluster{name: name, k: k, kube: k.Client, worker: "worker-" + name, kubeconfig: k.Kubeconfig}
	t.Cleanup(func() {
		env.stack.StopProcess(c.worker)
		k.Stop()
		for _, p := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} {
			if k.Proc(p) != nil {
				t.Errorf("cluster %s: %s still running after Stop", name, p)
			}
		}
	})
	if env.workerKubeconfig != env.stack.Kubeconfig {
		if c.kubeconfig, err = serviceAccountAccess(ctx, k.Client, k.APIServer, k.Token, k.Dir); err != nil {
			t.Fatalf("cluster %s: the worker's credentials: %v", name, err)
		}
	}
	startClusterWorker(t, c)
	return c
}

// clusterWorkerArgs are the worker's flags for cluster c: its kubeconfig, --cluster, and
// --watch with the search attributes (so its runs carry RolloutCluster).
func clusterWorkerArgs(c *testCluster) []string {
	return []string{"--kubeconfig", c.kubeconfig, "--temporal-address", env.stack.TemporalAddress,
		"--log-format", "text", "--metrics-address", "",
		"--kube-qps", strconv.Itoa(env.qps), "--kube-burst", strconv.Itoa(env.burst),
		"--cluster", c.name, "--watch", "--search-attributes"}
}

// startClusterWorker starts cluster c's worker and waits until it polls its task queue.
func startClusterWorker(t *testing.T, c *testCluster) {
	t.Helper()
	if _, err := env.stack.StartProcess(c.worker, filepath.Join(env.bin, "worker"), clusterWorkerArgs(c)...); err != nil {
		t.Fatalf("start %s: %v", c.worker, err)
	}
	p := env.stack.Proc(c.worker)
	eventually(t, time.Minute, func() string {
		if exited, err := p.Exited(); exited {
			t.Fatalf("%s exited (%v); log tail:\n%s", c.worker, err, p.Tail(3000))
		}
		b, _ := os.ReadFile(p.LogPath)
		if !strings.Contains(string(b), `msg="Worker running"`) {
			return c.worker + " not running yet on task queue " + contract.TaskQueueFor(c.name)
		}
		return ""
	})
}

// killClusterWorker SIGKILLs cluster c's worker: a crash, nothing flushed.
func killClusterWorker(t *testing.T, c *testCluster) {
	t.Helper()
	if env.stack.Proc(c.worker) == nil {
		t.Fatalf("%s is not running", c.worker)
	}
	env.stack.KillProcess(c.worker)
}

// createNamespaceIn creates namespace ns in cluster c (the suite's newNamespace made it in the
// suite's cluster); t.Cleanup deletes it.
func createNamespaceIn(t *testing.T, c *testCluster, ns string) {
	t.Helper()
	if _, err := c.kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("cluster %s: create namespace %s: %v", c.name, ns, err)
	}
	t.Cleanup(func() {
		_ = c.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
}
