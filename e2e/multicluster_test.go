//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// TestTwoClusters: the suite's cluster (the cluster "", its worker and watcher without
// --cluster) and a second one, "b", with its own etcd, kube-apiserver,
// kube-controller-manager, scheduler, kwok and worker (--cluster b --watch), on one Temporal.
// The same namespace/name Deployment lives in both and is two workflows,
// deployment/<ns>/web and deployment/b/<ns>/web, on two task queues. An image change in one
// rolls only that one; RolloutCluster="b" finds b's; `starter pause --cluster b` pauses only
// b's; b's worker SIGKILLed mid-rollout, and b's kube-apiserver stopped mid-rollout while the
// suite's cluster rolls, lose nothing; deleting both ends both workflows.
func TestTwoClusters(t *testing.T) {
	if env.builtin {
		t.Skip("needs our worker")
	}
	ctx := context.Background()
	b := startCluster(t, "b")
	a := &testCluster{name: "", kube: env.kube}
	ns := newNamespace(t)
	createNamespaceIn(t, b, ns)
	const name = "web"
	idA, idB := contract.WorkflowIDIn("", ns, name), contract.WorkflowIDIn("b", ns, name)
	recordHistoriesOf(t, idB)

	for _, c := range []*testCluster{a, b} {
		if _, err := c.kube.AppsV1().Deployments(ns).Create(ctx, newDeployment(ns, name, 4, "app:v1", rolling("1", "0")), metav1.CreateOptions{}); err != nil {
			t.Fatalf("cluster %q: create deployment: %v", c.name, err)
		}
	}
	for _, c := range []*testCluster{a, b} {
		d := completeIn(t, c, ns, name)
		wantReplicaSets(t, c, d, map[string]int32{"app:v1": 4})
	}

	// Two workflows, each on its cluster's task queue; RolloutCluster marks b's.
	for id, queue := range map[string]string{idA: "deployment-controller", idB: "deployment-controller.b"} {
		desc, err := env.tc.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			t.Fatalf("describe %s: %v", id, err)
		}
		if got := desc.GetWorkflowExecutionInfo().GetTaskQueue(); got != queue {
			t.Errorf("%s runs on task queue %q, want %q", id, got, queue)
		}
	}
	query := fmt.Sprintf(`RolloutCluster = "b" AND K8sNamespace = %q`, ns)
	eventually(t, 30*time.Second, func() string { return listed(t, query, idB) })
	if out := temporalCLI(t, "workflow", "list", "--query", query, "-o", "json"); strings.Contains(out, `"`+idA+`"`) {
		t.Errorf("workflow list --query '%s' lists the suite cluster's %s:\n%s", query, idA, out)
	}
	eventually(t, 30*time.Second, func() string { return listed(t, fmt.Sprintf(`K8sNamespace = %q AND RolloutCluster IS NULL`, ns), idA) })

	// An image change in b rolls b only.
	setImageIn(t, b, ns, name, "app:v2")
	dB := completeIn(t, b, ns, name)
	wantReplicaSets(t, b, dB, map[string]int32{"app:v2": 4, "app:v1": 0})
	dA := getIn(t, a, ns, name)
	if dA.Generation != 1 || dA.Status.ObservedGeneration != 1 || dA.Spec.Template.Spec.Containers[0].Image != "app:v1" {
		t.Errorf("suite cluster's web: generation %d, observed %d, image %s; want 1, 1, app:v1 (untouched)",
			dA.Generation, dA.Status.ObservedGeneration, dA.Spec.Template.Spec.Containers[0].Image)
	}
	wantReplicaSets(t, a, dA, map[string]int32{"app:v1": 4})

	// The starter addresses one cluster's workflow with --cluster.
	stB := starterStatus(t, "--cluster", "b", ns+"/"+name)
	if stB.Cluster != "b" || stB.CurrentRevision != 2 || stB.Phase != string(k8s.PhaseComplete) {
		t.Errorf("status --cluster b: cluster %q, revision %d, phase %s; want b, 2, Complete", stB.Cluster, stB.CurrentRevision, stB.Phase)
	}
	stA := starterStatus(t, ns+"/"+name)
	if stA.Cluster != "" || stA.CurrentRevision != 1 {
		t.Errorf("status: cluster %q, revision %d; want \"\", 1", stA.Cluster, stA.CurrentRevision)
	}
	if out, err := starterCmd(t, "pause", "--cluster", "b", ns+"/"+name); err != nil {
		t.Fatalf("starter pause --cluster b: %v\n%s", err, out)
	}
	eventually(t, 30*time.Second, func() string {
		if d := getIn(t, b, ns, name); !d.Spec.Paused {
			return "cluster b's web not paused yet"
		}
		return ""
	})
	if d := getIn(t, a, ns, name); d.Spec.Paused {
		t.Errorf("pause --cluster b paused the suite cluster's web too")
	}
	if out, err := starterCmd(t, "resume", "--cluster", "b", ns+"/"+name); err != nil {
		t.Fatalf("starter resume --cluster b: %v\n%s", err, out)
	}
	eventually(t, 30*time.Second, func() string {
		if d := getIn(t, b, ns, name); d.Spec.Paused {
			return "cluster b's web still paused"
		}
		return ""
	})

	// b's worker SIGKILLed at a timed pause of a stepped rollout: the restarted worker
	// finishes it.
	updateIn(t, b, ns, name, func(d *appsv1.Deployment) {
		d.Annotations[k8s.StepsAnnotation] = `[{"setWeight":50},{"pause":{"duration":"15s"}}]`
		d.Spec.Template.Spec.Containers[0].Image = "app:v3"
	})
	waitWeight(t, b, ns, name, "app:v3", "app:v2")
	killClusterWorker(t, b)
	time.Sleep(3 * time.Second)
	dB = getIn(t, b, ns, name)
	wantReplicaSets(t, b, dB, map[string]int32{"app:v3": 2, "app:v2": 2, "app:v1": 0})
	startClusterWorker(t, b)
	dB = completeIn(t, b, ns, name)
	wantReplicaSets(t, b, dB, map[string]int32{"app:v3": 4, "app:v2": 0, "app:v1": 0})

	// b's kube-apiserver stopped at the pause of its next rollout: the suite's cluster rolls
	// out meanwhile; b completes once its API server is back.
	setImageIn(t, b, ns, name, "app:v4")
	waitWeight(t, b, ns, name, "app:v4", "app:v3")
	b.k.StopAPIServer()
	down := time.Now()
	setImageIn(t, a, ns, name, "app:v4")
	dA = completeIn(t, a, ns, name)
	wantReplicaSets(t, a, dA, map[string]int32{"app:v4": 4, "app:v1": 0})
	t.Logf("suite cluster rolled out in %s while cluster b's kube-apiserver was down", since(down))
	if rest := 10*time.Second - time.Since(down); rest > 0 {
		time.Sleep(rest)
	}
	if err := b.k.StartAPIServer(ctx); err != nil {
		t.Fatalf("start cluster b's kube-apiserver: %v", err)
	}
	t.Logf("cluster b's kube-apiserver was down %s", since(down))
	// A real cluster's kube-controller-manager runs with leader election: cut off from its
	// API server past --leader-elect-renew-deadline (10s) it exits, and its kubelet starts it
	// again. The stack's runs without (--leader-elect=false), so the test restarts it, as the
	// kubelet would. Left running, its ReplicaSet controller was seen to stall for minutes
	// after the API server came back (ReplicaSet status counts stuck, "read version ... is not
	// as new as written version"), with every pod Ready.
	if err := b.k.RestartControllerManager(float32(env.qps), env.burst); err != nil {
		t.Fatalf("restart cluster b's kube-controller-manager: %v", err)
	}
	if exited, err := env.stack.Proc(b.worker).Exited(); exited {
		t.Fatalf("cluster b's worker exited while its API server was down: %v\n%s", err, env.stack.Proc(b.worker).Tail(3000))
	}
	dB = completeIn(t, b, ns, name)
	wantReplicaSets(t, b, dB, map[string]int32{"app:v4": 4, "app:v3": 0, "app:v2": 0, "app:v1": 0})

	// Deleting both ends both workflows: nothing left running.
	for _, c := range []*testCluster{a, b} {
		if err := c.kube.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("cluster %q: delete deployment: %v", c.name, err)
		}
	}
	for _, id := range []string{idA, idB} {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		var res contract.Result
		err := env.tc.GetWorkflow(wctx, id, "").Get(wctx, &res)
		cancel()
		if err != nil || res.Outcome != contract.OutcomeDeleted {
			t.Errorf("%s ended with %+v, %v; want outcome %s", id, res, err, contract.OutcomeDeleted)
		}
		desc, err := env.tc.DescribeWorkflowExecution(ctx, id, "")
		if err != nil || desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			t.Errorf("%s: status %v, %v; want Completed", id, desc.GetWorkflowExecutionInfo().GetStatus(), err)
		}
	}
}

func getIn(t *testing.T, c *testCluster, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := c.kube.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("cluster %q: get deployment %s/%s: %v", c.name, ns, name, err)
	}
	return d
}

// updateIn applies f to the latest Deployment in cluster c, retrying conflicts.
func updateIn(t *testing.T, c *testCluster, ns, name string, f func(*appsv1.Deployment)) {
	t.Helper()
	for i := range conflictTries {
		time.Sleep(conflictPause(i))
		d := getIn(t, c, ns, name)
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		f(d)
		_, err := c.kube.AppsV1().Deployments(ns).Update(context.Background(), d, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("cluster %q: update deployment %s/%s: %v", c.name, ns, name, err)
		}
	}
	t.Fatalf("cluster %q: update deployment %s/%s: %d conflicts in a row", c.name, ns, name, conflictTries)
}

func setImageIn(t *testing.T, c *testCluster, ns, name, image string) {
	t.Helper()
	updateIn(t, c, ns, name, func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = image })
}

// completeIn waits until the rollout in cluster c is complete, as `kubectl rollout status`
// would say.
func completeIn(t *testing.T, c *testCluster, ns, name string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	eventually(t, waitTimeout, func() string {
		d = getIn(t, c, ns, name)
		if why := rolloutPending(d); why != "" {
			return fmt.Sprintf("cluster %q: %s (replicasets %s)", c.name, why, replicaSetsIn(t, c, ns))
		}
		return ""
	})
	return d
}

// templateRS is the name of d's ReplicaSet for d's template with image.
func templateRS(d *appsv1.Deployment, image string) string {
	tpl := d.Spec.Template.DeepCopy()
	tpl.Spec.Containers[0].Image = image
	return k8s.ReplicaSetName(d.Name, k8s.PodTemplateHash(tpl, d.Status.CollisionCount))
}

// replicaSetsIn renders cluster c's ReplicaSets in ns as "name=spec/available", sorted.
func replicaSetsIn(t *testing.T, c *testCluster, ns string) string {
	t.Helper()
	list, err := c.kube.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return "<" + err.Error() + ">"
	}
	var out []string
	for _, rs := range list.Items {
		out = append(out, fmt.Sprintf("%s=%d/%d", rs.Name, *rs.Spec.Replicas, rs.Status.AvailableReplicas))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// wantReplicaSets checks that cluster c's ReplicaSets in d's namespace are exactly one per
// image given, named after d's template with that image, at the given spec.replicas (and as
// many available).
func wantReplicaSets(t *testing.T, c *testCluster, d *appsv1.Deployment, want map[string]int32) {
	t.Helper()
	var wantParts []string
	for image, n := range want {
		wantParts = append(wantParts, fmt.Sprintf("%s=%d/%d", templateRS(d, image), n, n))
	}
	sort.Strings(wantParts)
	if got := replicaSetsIn(t, c, d.Namespace); got != strings.Join(wantParts, " ") {
		t.Errorf("cluster %q: replicasets (spec/available) %s, want %s (%v)", c.name, got, strings.Join(wantParts, " "), want)
	}
}

// waitWeight waits until cluster c's stepped rollout to image holds at setWeight 50 of 4: the
// new ReplicaSet at 2 available, the old at 2.
func waitWeight(t *testing.T, c *testCluster, ns, name, image, old string) {
	t.Helper()
	eventually(t, waitTimeout, func() string {
		d := getIn(t, c, ns, name)
		list, err := c.kube.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		got := map[string][2]int32{}
		for _, rs := range list.Items {
			got[rs.Name] = [2]int32{*rs.Spec.Replicas, rs.Status.AvailableReplicas}
		}
		if got[templateRS(d, image)] != [2]int32{2, 2} || got[templateRS(d, old)] != [2]int32{2, 2} {
			return fmt.Sprintf("cluster %q not at weight 50 yet: %s", c.name, replicaSetsIn(t, c, ns))
		}
		return ""
	})
}

// starterStatus runs `starter status -o json` with args and decodes its standard output.
func starterStatus(t *testing.T, args ...string) contract.Status {
	t.Helper()
	full := append(append([]string{"status", "-o", "json"}, args...), "--temporal-address", env.stack.TemporalAddress, "--log-format", "text")
	cmd := exec.Command(filepath.Join(env.bin, "starter"), full...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("starter %s: %v\n%s%s", strings.Join(full, " "), err, out, stderr.String())
	}
	var st contract.Status
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("starter %s: %v\n%s", strings.Join(full, " "), err, out)
	}
	return st
}
