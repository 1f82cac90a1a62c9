//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
	"github.com/temporal-rollout/rollout/kube"
)

// inManagedMode runs the rest of the test on a managed cluster's terms: kube-controller-
// manager with its own Deployment controller on, and our worker and watcher with --mode
// managed. The suite's setup comes back when the test ends.
func inManagedMode(t *testing.T) {
	t.Helper()
	if env.builtin {
		t.Skip("E2E_CONTROLLER=built-in runs no worker")
	}
	restart := func(managed bool) error {
		// As on kubeadm, GKE and EKS, each controller acts as its own ServiceAccount
		// (system:serviceaccount:kube-system:deployment-controller for the Deployment one).
		env.stack.Opts.BuiltinDeploymentController, env.stack.Opts.ServiceAccountCredentials = managed, managed
		if err := env.stack.RestartControllerManager(float32(env.qps), env.burst); err != nil {
			return err
		}
		mode := "full"
		if managed {
			mode = "managed"
		}
		env.stack.StopProcess("watcher")
		env.stack.StopProcess("worker")
		if err := startWorker("--mode", mode); err != nil {
			return err
		}
		return startWatcher("--mode", mode)
	}
	t.Cleanup(func() {
		if err := restart(false); err != nil {
			t.Errorf("back to full mode: %v", err)
		}
	})
	if err := restart(true); err != nil {
		t.Fatalf("managed mode: %v", err)
	}
}

func managed() deployOpt { return withAnnotation(k8s.ManagedAnnotation, "true") }

// waitParked waits until the Deployment is parked with the user's RollingUpdate surge/unavailable
// saved (Recreate for surge ""), and its rollout complete by the counts, with the new ReplicaSet's desired-replicas
// given back and no other ReplicaSet scaled up.
func waitParked(t *testing.T, ns, name, surge, unavailable string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	eventually(t, waitTimeout, func() string {
		d = getDeployment(t, ns, name)
		ps, parked, err := k8s.Parked(d)
		switch {
		case err != nil || !parked:
			return fmt.Sprintf("not parked (%v): annotations %v", err, d.Annotations)
		case !d.Spec.Paused || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType:
			return fmt.Sprintf("parked spec: paused %t strategy %s", d.Spec.Paused, d.Spec.Strategy.Type)
		case surge == "" && ps.Strategy.Type != appsv1.RecreateDeploymentStrategyType:
			return fmt.Sprintf("saved strategy %+v, want Recreate", ps.Strategy)
		case surge != "" && (ps.Strategy.RollingUpdate == nil || ps.Strategy.RollingUpdate.MaxSurge.String() != surge || ps.Strategy.RollingUpdate.MaxUnavailable.String() != unavailable):
			return fmt.Sprintf("saved strategy %+v, want RollingUpdate %s/%s", ps.Strategy, surge, unavailable)
		}
		return managedPending(t, d)
	})
	return d
}

// managedPending says what keeps a parked Deployment's rollout from being complete: the counts
// (as kubectl rollout status reads them), and the ReplicaSets: only the new one scaled up, with
// its desired-replicas given back. The Progressing condition stays DeploymentPaused while parked.
func managedPending(t *testing.T, d *appsv1.Deployment) string {
	t.Helper()
	want := *d.Spec.Replicas
	st := d.Status
	switch {
	case st.ObservedGeneration < d.Generation:
		return fmt.Sprintf("observedGeneration %d < generation %d", st.ObservedGeneration, d.Generation)
	case st.UpdatedReplicas != want || st.Replicas != want || st.AvailableReplicas != want:
		return fmt.Sprintf("status %d/%d/%d (replicas/updated/available), want %d", st.Replicas, st.UpdatedReplicas, st.AvailableReplicas, want)
	case condition(d, appsv1.DeploymentProgressing) != "Unknown/"+k8s.PausedDeployReason:
		return "Progressing " + condition(d, appsv1.DeploymentProgressing) + ", want Unknown/DeploymentPaused (the paused sync's)"
	}
	newName := expectedRSName(d)
	for _, rs := range replicaSets(t, d.Namespace) {
		if ref := metav1.GetControllerOf(&rs); ref == nil || ref.UID != d.UID {
			continue
		}
		switch {
		case rs.Name == newName && rs.Annotations[k8s.DesiredReplicasAnnotation] != fmt.Sprint(want):
			return fmt.Sprintf("new ReplicaSet %s desired-replicas %q, want %d", rs.Name, rs.Annotations[k8s.DesiredReplicasAnnotation], want)
		case rs.Name != newName && *rs.Spec.Replicas != 0:
			return fmt.Sprintf("old ReplicaSet %s at %d", rs.Name, *rs.Spec.Replicas)
		}
	}
	return ""
}

// builtinScalings lists the ScalingReplicaSet events kube-controller-manager's Deployment
// controller recorded on the Deployment (ours come from another component), each as
// "message (count)", so a later list can be told apart from an earlier one (since).
func builtinScalings(t *testing.T, ns, name string) []string {
	t.Helper()
	list, err := env.kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",involvedObject.kind=Deployment"})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Reason == "ScalingReplicaSet" && e.Source.Component == "deployment-controller" {
			out = append(out, fmt.Sprintf("%s (%d)", e.Message, e.Count))
		}
	}
	return out
}

// builtinScalingsSince is what builtinScalings lists now and did not in before.
func builtinScalingsSince(t *testing.T, ns, name string, before []string) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, e := range before {
		seen[e] = true
	}
	var out []string
	for _, e := range builtinScalings(t, ns, name) {
		if !seen[e] {
			out = append(out, e)
		}
	}
	return out
}

// replicasOwners lists, per ReplicaSet of the namespace, the field managers owning
// spec.replicas in its managedFields.
func replicasOwners(t *testing.T, ns string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, rs := range replicaSets(t, ns) {
		for _, e := range rs.ManagedFields {
			if e.FieldsV1 == nil {
				continue
			}
			var fields map[string]any
			if json.Unmarshal(e.FieldsV1.Raw, &fields) != nil {
				continue
			}
			if spec, ok := fields["f:spec"].(map[string]any); ok {
				if _, ok := spec["f:replicas"]; ok {
					out[rs.Name] = append(out[rs.Name], e.Manager)
				}
			}
		}
	}
	return out
}

// waitNewScaledUp waits until the namespace has n ReplicaSets, the newest scaled up.
func waitNewScaledUp(t *testing.T, ns string, n int) {
	t.Helper()
	eventually(t, 30*time.Second, func() string {
		if rss := replicaSets(t, ns); len(rss) < n || *rss[0].Spec.Replicas == 0 {
			return "no new ReplicaSet scaled up yet: " + rsSummary(rss)
		}
		return ""
	})
}

func podUIDs(t *testing.T, ns string) string {
	t.Helper()
	list, err := env.kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	var uids []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			uids = append(uids, string(p.UID))
		}
	}
	return strings.Join(uids, ",")
}

func workflowOutcome(t *testing.T, ns, name string) string {
	t.Helper()
	out, err := temporalCLIErr("workflow", "describe", "--workflow-id", workflowID(ns, name), "-o", "json")
	if err != nil {
		return "no workflow: " + strings.TrimSpace(out)
	}
	var res struct {
		WorkflowExecutionInfo struct {
			Status string `json:"status"`
		} `json:"workflowExecutionInfo"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("decode describe %q: %v", out, err)
	}
	return res.WorkflowExecutionInfo.Status
}

// TestManagedMode runs managed mode beside kube-controller-manager's own Deployment controller:
// an opted-in Deployment is parked and rolled out by our steps (a 50% step holds while the
// built-in controller runs; nothing but our worker scales its ReplicaSets), paused and resumed
// and rolled back by signal, and handed back exactly as the user wrote it when it opts out,
// with no pod restarted; a Deployment that did not opt in is the built-in controller's alone.
func TestManagedMode(t *testing.T) {
	inManagedMode(t)
	ns, nsOther := newNamespace(t), newNamespace(t)
	recordHistories(t, ns, "web")
	create(t, newDeployment(nsOther, "other", 4, "nginx:1.25", rolling("25%", "25%")))
	create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("25%", "25%"), managed(), withSteps(`[{"setWeight":50},{"pause":{}}]`)))
	waitParked(t, ns, "web", "25%", "25%")
	// The built-in controller drives the other Deployment; we start no workflow for it.
	setImage(t, nsOther, "other", "nginx:1.26")
	other := waitComplete(t, nsOther, "other")
	if other.Spec.Paused || other.Annotations[k8s.ParkedAnnotation] != "" || other.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		t.Errorf("the Deployment that did not opt in was changed: paused %t, strategy %s, annotations %v", other.Spec.Paused, other.Spec.Strategy.Type, other.Annotations)
	}
	if got := workflowOutcome(t, nsOther, "other"); !strings.HasPrefix(got, "no workflow") {
		t.Errorf("workflow of the Deployment that did not opt in: %s, want none", got)
	}
	if got := builtinScalings(t, nsOther, "other"); len(got) == 0 {
		t.Errorf("no ScalingReplicaSet event by the built-in controller on the other Deployment")
	}

	baseline := builtinScalings(t, ns, "web")
	obs := observe(t, ns, 13, 8)
	setImage(t, ns, "web", "nginx:1.26")
	waitSteps(t, ns, "web", 2, contract.WaitingForPromote, "nginx:1.26=5/5 nginx:1.25=5/5")
	time.Sleep(3 * time.Second)
	if got := sizes(t, ns); got != "nginx:1.26=5/5 nginx:1.25=5/5" {
		t.Errorf("at the 50%% step, 3 s later: %s, want it held while the built-in controller runs", got)
	}
	out, err := runKubectl("--kubeconfig", env.stack.Kubeconfig, "rollout", "status", "deployment/web", "-n", ns, "--timeout=2s")
	if err == nil || !strings.Contains(out, "5 out of 10 new replicas have been updated") {
		t.Errorf("kubectl rollout status at the step: %v\n%s\nwant it waiting at 5 out of 10", err, out)
	}
	if out, err := updateCLI(ns, "web", contract.UpdatePromote); err != nil {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	waitParked(t, ns, "web", "25%", "25%")
	obs.stop()
	if got := builtinScalingsSince(t, ns, "web", baseline); len(got) > 0 {
		t.Errorf("the built-in controller scaled the opted-in Deployment's ReplicaSets: %q", got)
	}
	for rs, owners := range replicasOwners(t, ns) {
		if strings.Join(owners, ",") != kube.FieldManager {
			t.Errorf("ReplicaSet %s: spec.replicas owned by %v, want only %s", rs, owners, kube.FieldManager)
		}
	}

	// Pause and resume by signal: the user's paused flag lives in the parked annotation.
	update(t, ns, "web", func(d *appsv1.Deployment) { delete(d.Annotations, k8s.StepsAnnotation) })
	signal(t, ns, "web", contract.SignalPause)
	eventually(t, 30*time.Second, func() string {
		d := getDeployment(t, ns, "web")
		if ps, _, _ := k8s.Parked(d); !ps.Paused || !d.Spec.Paused {
			return fmt.Sprintf("saved paused %t, spec.paused %t; want both true", ps.Paused, d.Spec.Paused)
		}
		return ""
	})
	setImage(t, ns, "web", "nginx:1.27")
	time.Sleep(2 * time.Second)
	if got := sizes(t, ns); got != "nginx:1.26=10/10 nginx:1.25=0/0" {
		t.Errorf("paused, 2 s after an image change: %s, want nothing rolled", got)
	}
	obs = observe(t, ns, 13, 8)
	signal(t, ns, "web", contract.SignalResume)
	d := waitParked(t, ns, "web", "25%", "25%")
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.27" {
		t.Errorf("after resume: image %s, want nginx:1.27", img)
	}
	// Roll back by signal (kubectl rollout undo refuses a paused Deployment): back to 1.26,
	// still parked and opted in.
	signal(t, ns, "web", contract.SignalRollback, `{"revision":0}`)
	eventually(t, waitTimeout, func() string {
		d = getDeployment(t, ns, "web")
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.26" {
			return "image " + img + ", want nginx:1.26"
		}
		if !k8s.WantsManaged(d) {
			return fmt.Sprintf("annotations after the rollback %v, want still opted in", d.Annotations)
		}
		return ""
	})
	// The rollback restores the annotations of the revision it returns to, as upstream does,
	// and that revision carried the steps: promote it through them.
	eventually(t, waitTimeout, func() string {
		if st := queryStatus(t, ns, "web"); st.Steps != nil && st.Steps.WaitingFor == contract.WaitingForPromote {
			if out, err := updateCLI(ns, "web", contract.UpdatePromote, `{"full":true}`); err != nil {
				return fmt.Sprintf("promote: %v %s", err, out)
			}
		}
		return managedPending(t, getDeployment(t, ns, "web"))
	})
	obs.stop()
	if got := builtinScalingsSince(t, ns, "web", baseline); len(got) > 0 {
		t.Errorf("the built-in controller scaled the opted-in Deployment's ReplicaSets: %q", got)
	}
	if out := kubectl(t, "rollout", "history", "deployment/web", "-n", ns); !strings.Contains(out, "REVISION") || strings.Count(out, "\n") < 4 {
		t.Errorf("kubectl rollout history:\n%s\nwant three revisions", out)
	}

	// Opt out at rest: the user's spec back, our annotations gone, no pod restarted, and the
	// built-in controller drives it from there.
	pods := podUIDs(t, ns)
	update(t, ns, "web", func(d *appsv1.Deployment) { delete(d.Annotations, k8s.ManagedAnnotation) })
	eventually(t, 30*time.Second, func() string {
		d = getDeployment(t, ns, "web")
		switch {
		case d.Spec.Paused || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType:
			return fmt.Sprintf("spec: paused %t strategy %s, want the user's", d.Spec.Paused, d.Spec.Strategy.Type)
		case d.Spec.Strategy.RollingUpdate.MaxSurge.String() != "25%" || d.Spec.Strategy.RollingUpdate.MaxUnavailable.String() != "25%":
			return fmt.Sprintf("strategy %+v, want 25%%/25%%", d.Spec.Strategy.RollingUpdate)
		case d.Annotations[k8s.ParkedAnnotation] != "":
			return "parked annotation still there"
		}
		return ""
	})
	eventually(t, 30*time.Second, func() string {
		if got := workflowOutcome(t, ns, "web"); got != "WORKFLOW_EXECUTION_STATUS_COMPLETED" && got != "Completed" {
			return "workflow " + got + ", want completed (Released)"
		}
		return ""
	})
	for _, rs := range replicaSets(t, ns) {
		if _, ok := rs.Annotations[k8s.ParkedAnnotation]; ok || rs.Annotations[k8s.DesiredReplicasAnnotation] == k8s.WithheldReplicas {
			t.Errorf("ReplicaSet %s keeps managed mode's marks: %v", rs.Name, rs.Annotations)
		}
	}
	time.Sleep(time.Second)
	if got := podUIDs(t, ns); got != pods {
		t.Errorf("pods changed on opt-out:\n%s\nwant\n%s", got, pods)
	}
	before := builtinScalings(t, ns, "web")
	setImage(t, ns, "web", "nginx:1.28")
	waitComplete(t, ns, "web")
	if got := builtinScalingsSince(t, ns, "web", before); len(got) == 0 {
		t.Errorf("after opt-out, no ScalingReplicaSet event by the built-in controller")
	}
}

// TestManagedModeFaults: a worker SIGKILLed mid-rollout (the Deployment stays parked and the
// built-in controller scales nothing until the restarted worker finishes; killed again and
// opted out while no worker runs, it is handed back by the restarted worker), opting out and
// deleting mid-rollout (nothing left paused, parked or at 0), opting in mid-way through the
// built-in controller's rollout (finished by ours), and a strategy that cannot be
// parked (a warning event; the built-in controller keeps it).
func TestManagedModeFaults(t *testing.T) {
	inManagedMode(t)

	t.Run("worker killed mid-rollout", func(t *testing.T) {
		ns := newNamespace(t)
		recordHistories(t, ns, "web")
		create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("3", "2"), managed()))
		waitParked(t, ns, "web", "3", "2")
		baseline := builtinScalings(t, ns, "web")
		obs := observe(t, ns, 13, 8)
		setImage(t, ns, "web", "nginx:1.26")
		waitNewScaledUp(t, ns, 2)
		env.stack.KillProcess("worker")
		before := sizes(t, ns)
		time.Sleep(3 * time.Second)
		if got := sizes(t, ns); strings.Split(got, "/")[0] != strings.Split(before, "/")[0] {
			t.Logf("sizes moved while no worker ran: %s -> %s", before, got)
		}
		if d := getDeployment(t, ns, "web"); !d.Spec.Paused {
			t.Errorf("the Deployment was unparked while no worker ran")
		}
		if err := startWorker("--mode", "managed"); err != nil {
			t.Fatal(err)
		}
		waitParked(t, ns, "web", "3", "2")
		obs.stop()
		if got := builtinScalingsSince(t, ns, "web", baseline); len(got) > 0 {
			t.Errorf("the built-in controller scaled ReplicaSets: %q", got)
		}

		// Killed again mid-rollout, and opted out while no worker runs: the restarted worker
		// hands it back, and kube-controller-manager finishes the rollout.
		obs = observe(t, ns, 13, 8)
		setImage(t, ns, "web", "nginx:1.27")
		waitNewScaledUp(t, ns, 3)
		env.stack.KillProcess("worker")
		update(t, ns, "web", func(d *appsv1.Deployment) { delete(d.Annotations, k8s.ManagedAnnotation) })
		time.Sleep(2 * time.Second)
		if d := getDeployment(t, ns, "web"); !d.Spec.Paused {
			t.Errorf("unparked while no worker ran")
		}
		if err := startWorker("--mode", "managed"); err != nil {
			t.Fatal(err)
		}
		d := waitComplete(t, ns, "web")
		obs.stop()
		if d.Spec.Paused || d.Annotations[k8s.ParkedAnnotation] != "" || *d.Spec.Replicas != 10 || d.Spec.Strategy.RollingUpdate == nil || d.Spec.Strategy.RollingUpdate.MaxSurge.String() != "3" {
			t.Errorf("after opt-out with the worker down: paused %t replicas %d strategy %+v annotations %v", d.Spec.Paused, *d.Spec.Replicas, d.Spec.Strategy, d.Annotations)
		}
		if got := sizes(t, ns); !strings.HasPrefix(got, "nginx:1.27=10/10 ") {
			t.Errorf("after kube-controller-manager finished: %s", got)
		}
	})

	t.Run("opt out mid-rollout", func(t *testing.T) {
		ns := newNamespace(t)
		recordHistories(t, ns, "web")
		create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("25%", "25%"), managed(), withSteps(`[{"setWeight":50},{"pause":{}}]`)))
		waitParked(t, ns, "web", "25%", "25%")
		obs := observe(t, ns, 13, 8)
		setImage(t, ns, "web", "nginx:1.26")
		waitSteps(t, ns, "web", 2, contract.WaitingForPromote, "nginx:1.26=5/5 nginx:1.25=5/5")
		update(t, ns, "web", func(d *appsv1.Deployment) { delete(d.Annotations, k8s.ManagedAnnotation) })
		// The built-in controller finishes the rollout from the ReplicaSets as they are.
		d := waitComplete(t, ns, "web")
		obs.stop()
		if d.Spec.Paused || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || d.Annotations[k8s.ParkedAnnotation] != "" {
			t.Errorf("after opt-out mid-rollout: paused %t strategy %s annotations %v", d.Spec.Paused, d.Spec.Strategy.Type, d.Annotations)
		}
		if got := sizes(t, ns); got != "nginx:1.26=10/10 nginx:1.25=0/0" {
			t.Errorf("after the built-in controller finished: %s", got)
		}
	})

	t.Run("opt in mid-rollout", func(t *testing.T) {
		// kube-controller-manager rolls a Deployment it owns (maxSurge 1, maxUnavailable 0:
		// ten steps); opted in half-way, it is parked where it stands and our worker finishes
		// the rollout from the ReplicaSets as they are: no third ReplicaSet, no scaling by the
		// built-in controller once parked, the bounds kept across the handover.
		ns := newNamespace(t)
		recordHistories(t, ns, "web")
		create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("1", "0")))
		waitComplete(t, ns, "web")
		obs := observe(t, ns, 11, 10)
		setImage(t, ns, "web", "nginx:1.26")
		waitNewScaledUp(t, ns, 2)
		update(t, ns, "web", func(d *appsv1.Deployment) {
			if d.Annotations == nil {
				d.Annotations = map[string]string{}
			}
			d.Annotations[k8s.ManagedAnnotation] = "true"
		})
		var atPark string
		eventually(t, waitTimeout, func() string {
			d := getDeployment(t, ns, "web")
			if _, parked, _ := k8s.Parked(d); !parked || !d.Spec.Paused {
				return fmt.Sprintf("not parked yet: paused %t annotations %v", d.Spec.Paused, d.Annotations)
			}
			atPark = sizes(t, ns)
			return ""
		})
		baseline := builtinScalings(t, ns, "web")
		if strings.HasSuffix(atPark, "nginx:1.25=0/0") {
			t.Fatalf("the built-in controller finished the rollout before the opt-in took effect (%s): nothing was handed over mid-rollout", atPark)
		}
		t.Logf("parked mid-rollout at %s", atPark)
		waitParked(t, ns, "web", "1", "0")
		obs.stop()
		if got := sizes(t, ns); got != "nginx:1.26=10/10 nginx:1.25=0/0" {
			t.Errorf("after our worker finished: %s, want nginx:1.26=10/10 nginx:1.25=0/0", got)
		}
		if got := builtinScalingsSince(t, ns, "web", baseline); len(got) > 0 {
			t.Errorf("the built-in controller scaled ReplicaSets after the Deployment was parked: %q", got)
		}
		for rs, owners := range replicasOwners(t, ns) {
			if strings.Join(owners, ",") != kube.FieldManager {
				t.Errorf("ReplicaSet %s: spec.replicas owned by %v, want only %s (our worker's last scale)", rs, owners, kube.FieldManager)
			}
		}
	})

	t.Run("deleted mid-rollout", func(t *testing.T) {
		ns := newNamespace(t)
		create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("25%", "25%"), managed(), withSteps(`[{"setWeight":50},{"pause":{}}]`)))
		waitParked(t, ns, "web", "25%", "25%")
		setImage(t, ns, "web", "nginx:1.26")
		waitSteps(t, ns, "web", 2, contract.WaitingForPromote, "nginx:1.26=5/5 nginx:1.25=5/5")
		fg := metav1.DeletePropagationForeground
		if err := env.kube.AppsV1().Deployments(ns).Delete(context.Background(), "web", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, func() string {
			if got := workflowOutcome(t, ns, "web"); got != "WORKFLOW_EXECUTION_STATUS_COMPLETED" && got != "Completed" {
				return "workflow " + got + ", want completed (Deleted)"
			}
			return ""
		})
	})

	t.Run("abort at a step", func(t *testing.T) {
		ns := newNamespace(t)
		recordHistories(t, ns, "web")
		create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("25%", "25%"), managed(), withSteps(`[{"setWeight":50},{"pause":{}}]`)))
		waitParked(t, ns, "web", "25%", "25%")
		baseline := builtinScalings(t, ns, "web")
		obs := observe(t, ns, 13, 8)
		setImage(t, ns, "web", "nginx:1.26")
		waitSteps(t, ns, "web", 2, contract.WaitingForPromote, "nginx:1.26=5/5 nginx:1.25=5/5")
		if out, err := updateCLI(ns, "web", contract.UpdateAbort, `{"reason":"e2e abort"}`); err != nil {
			t.Fatalf("abort: %v\n%s", err, out)
		}
		d := waitParked(t, ns, "web", "25%", "25%")
		obs.stop()
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.25" || !k8s.WantsManaged(d) {
			t.Errorf("after abort: image %s, annotations %v; want nginx:1.25, still opted in", img, d.Annotations)
		}
		if got := sizes(t, ns); got != "nginx:1.25=10/10 nginx:1.26=0/0" {
			t.Errorf("after abort: %s", got)
		}
		waitEvent(t, ns, "web", "RolloutAborted")
		if got := builtinScalingsSince(t, ns, "web", baseline); len(got) > 0 {
			t.Errorf("the built-in controller scaled ReplicaSets: %q", got)
		}
	})

	t.Run("progress deadline", func(t *testing.T) {
		ns := newNamespace(t)
		recordHistories(t, ns, "web")
		create(t, newDeployment(ns, "web", 4, "nginx:1.25", rolling("1", "0"), progressDeadline(5), managed()))
		waitParked(t, ns, "web", "1", "0")
		setImage(t, ns, "web", "nginx:404")
		// Past the deadline the stored condition says so, and stays so (the built-in
		// controller's paused sync keeps that reason): kubectl rollout status fails as usual.
		eventually(t, time.Minute, func() string {
			if got := condition(getDeployment(t, ns, "web"), appsv1.DeploymentProgressing); got != "False/"+k8s.TimedOutReason {
				return "Progressing " + got + ", want False/ProgressDeadlineExceeded"
			}
			return ""
		})
		time.Sleep(2 * time.Second)
		if got := condition(getDeployment(t, ns, "web"), appsv1.DeploymentProgressing); got != "False/"+k8s.TimedOutReason {
			t.Errorf("2 s later Progressing = %s, want it kept", got)
		}
		out, err := runKubectl("-n", ns, "rollout", "status", "deployment/web", "--timeout=10s")
		if err == nil || !strings.Contains(out, "exceeded its progress deadline") {
			t.Errorf("kubectl rollout status: %v\n%s\nwant it to fail on the deadline", err, out)
		}
		signal(t, ns, "web", contract.SignalRollback, `{"revision":0}`)
		d := waitParked(t, ns, "web", "1", "0")
		if got := d.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.25" {
			t.Errorf("template after the rollback = %s, want nginx:1.25", got)
		}
	})

	t.Run("auto-rollback on the progress deadline", func(t *testing.T) {
		ns := newNamespace(t)
		recordHistories(t, ns, "web")
		create(t, newDeployment(ns, "web", 4, "nginx:1.25", rolling("1", "0"), progressDeadline(5), managed(), withAnnotation(k8s.AutoRollbackAnnotation, "true")))
		waitParked(t, ns, "web", "1", "0")
		setImage(t, ns, "web", "nginx:404")
		waitEvent(t, ns, "web", "RolloutAborted: Rollout of revision 2 aborted: progress deadline exceeded")
		d := waitParked(t, ns, "web", "1", "0")
		if got := d.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.25" {
			t.Errorf("template after auto-rollback = %s, want nginx:1.25", got)
		}
		if got := sizes(t, ns); got != "nginx:1.25=4/4 nginx:404=0/0" {
			t.Errorf("after auto-rollback: %s", got)
		}
	})

	t.Run("strategy that cannot be parked", func(t *testing.T) {
		ns := newNamespace(t)
		create(t, newDeployment(ns, "web", 4, "nginx:1.25", recreate(), managed()))
		waitEvent(t, ns, "web", "ManagedStrategyUnsupported: strategy Recreate cannot be driven")
		setImage(t, ns, "web", "nginx:1.26")
		d := waitComplete(t, ns, "web")
		if d.Spec.Paused || d.Annotations[k8s.ParkedAnnotation] != "" {
			t.Errorf("a Recreate Deployment was parked: paused %t, annotations %v", d.Spec.Paused, d.Annotations)
		}
		if got := builtinScalings(t, ns, "web"); len(got) == 0 {
			t.Errorf("no ScalingReplicaSet event by the built-in controller")
		}
	})
}

// TestManagedModeInstall applies deploy/managed/ (mode managed, the same least-privilege RBAC,
// and the guard), runs our worker and watcher on the ServiceAccount's token alone, and checks
// the guard: while a Deployment is parked, `kubectl rollout resume`, a strategy edit and an
// edit of the parked annotation by anyone else are denied with a message naming what to do,
// while an image change and opting out go through; once handed back, nothing is denied.
func TestManagedModeInstall(t *testing.T) {
	inManagedMode(t)
	// deploy/'s namespace may still be terminating after TestDeployManifests.
	eventually(t, 2*time.Minute, func() string {
		ns, err := env.kube.CoreV1().Namespaces().Get(context.Background(), "temporal-rollout", metav1.GetOptions{})
		if err == nil && ns.DeletionTimestamp != nil {
			return "namespace temporal-rollout is terminating"
		}
		return ""
	})
	out := kubectl(t, "apply", "--server-side", "-k", "../deploy/managed")
	for _, want := range []string{"validatingadmissionpolicy.admissionregistration.k8s.io/temporal-rollout-parked-deployments",
		"validatingadmissionpolicybinding.admissionregistration.k8s.io/temporal-rollout-parked-deployments",
		"configmap/temporal-rollout", "statefulset.apps/temporal-rollout-worker", "clusterrole.rbac.authorization.k8s.io/temporal-rollout"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %s:\n%s", want, out)
		}
	}
	t.Cleanup(func() {
		_, _ = runKubectl("delete", "-k", "../deploy/managed", "--wait=false")
		restoreWorkerRBAC(t)
	})
	if cfg := kubectl(t, "get", "configmap", "temporal-rollout", "-n", "temporal-rollout", "-o", "jsonpath={.data.config\\.yaml}"); !strings.Contains(cfg, "mode: managed") {
		t.Errorf("deploy/managed config.yaml:\n%s\nwant mode: managed", cfg)
	}
	kc := saKubeconfig(t)
	env.stack.StopProcess("watcher")
	env.stack.StopProcess("worker")
	args := []string{"--kubeconfig", kc, "--temporal-address", env.stack.TemporalAddress, "--log-format", "text", "--metrics-address", "", "--mode", "managed", "--managed-guard"}
	if _, err := env.stack.StartProcess("worker", filepath.Join(env.bin, "worker"), args...); err != nil {
		t.Fatal(err)
	}
	if _, err := env.stack.StartProcess("watcher", filepath.Join(env.bin, "starter"), append([]string{"watch", "--search-attributes"}, args...)...); err != nil {
		t.Fatal(err)
	}

	ns := newNamespace(t)
	create(t, newDeployment(ns, "web", 4, "nginx:1.25", rolling("1", "1"), managed()))
	waitParked(t, ns, "web", "1", "1")
	denied := func(what string, args ...string) {
		t.Helper()
		eventually(t, 30*time.Second, func() string {
			out, err := runKubectl(append([]string{"-n", ns}, args...)...)
			if err == nil || !strings.Contains(out, "temporal-rollout-parked-deployments") || !strings.Contains(out, "opt out by removing the temporal-rollout.io/managed annotation") {
				return fmt.Sprintf("%s: %v\n%s\nwant it denied by the guard", what, err, out)
			}
			return ""
		})
	}
	denied("kubectl rollout resume", "rollout", "resume", "deployment/web")
	denied("a strategy edit", "patch", "deployment/web", "--type=merge", "-p", `{"spec":{"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":2}}}}`)
	denied("removing the parked annotation", "annotate", "deployment/web", k8s.ParkedAnnotation+"-")
	if d := getDeployment(t, ns, "web"); !d.Spec.Paused || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Fatalf("the guard let the parked spec change: paused %t strategy %s", d.Spec.Paused, d.Spec.Strategy.Type)
	}
	obs := observe(t, ns, 5, 3)
	setImage(t, ns, "web", "nginx:1.26")
	waitParked(t, ns, "web", "1", "1")
	obs.stop()
	update(t, ns, "web", func(d *appsv1.Deployment) { delete(d.Annotations, k8s.ManagedAnnotation) })
	eventually(t, 30*time.Second, func() string {
		d := getDeployment(t, ns, "web")
		if d.Spec.Paused || d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || d.Annotations[k8s.ParkedAnnotation] != "" {
			return fmt.Sprintf("after opt-out: paused %t strategy %s annotations %v", d.Spec.Paused, d.Spec.Strategy.Type, d.Annotations)
		}
		return ""
	})
	if out, err := runKubectl("-n", ns, "rollout", "pause", "deployment/web"); err != nil {
		t.Errorf("kubectl rollout pause after hand-back: %v\n%s", err, out)
	}
	if out, err := runKubectl("-n", ns, "rollout", "resume", "deployment/web"); err != nil {
		t.Errorf("kubectl rollout resume after hand-back: %v\n%s", err, out)
	}

	// With --managed-guard the ReplicaSet policy lets us drive Recreate and maxSurge 0: the
	// built-in controller's paused sync is denied every scale it tries on the way.
	denials := vapDenials(t, "temporal-rollout-parked-replicasets")
	nsDB, nsAPI := newNamespace(t), newNamespace(t)
	create(t, newDeployment(nsDB, "db", 4, "postgres:16", recreate(), managed()))
	create(t, newDeployment(nsAPI, "api", 4, "nginx:1.25", rolling("0", "1"), managed()))
	db := waitParked(t, nsDB, "db", "", "")
	waitParked(t, nsAPI, "api", "0", "1")
	baseline := map[string][]string{"db": builtinScalings(t, nsDB, "db"), "api": builtinScalings(t, nsAPI, "api")}
	next := db.DeepCopy()
	next.Spec.Template.Spec.Containers[0].Image = "postgres:17"
	obsDB, obsAPI := observe(t, nsDB, 4, 0), observe(t, nsAPI, 4, 3)
	obsDB.recreateNew = k8s.PodTemplateHash(&next.Spec.Template, nil)
	setImage(t, nsDB, "db", "postgres:17")
	setImage(t, nsAPI, "api", "nginx:1.26")
	waitParked(t, nsDB, "db", "", "")
	waitParked(t, nsAPI, "api", "0", "1")
	obsDB.stop()
	obsAPI.stop()
	for ns, name := range map[string]string{nsDB: "db", nsAPI: "api"} {
		if got := builtinScalingsSince(t, ns, name, baseline[name]); len(got) > 0 {
			t.Errorf("%s: the built-in controller scaled ReplicaSets: %q", name, got)
		}
	}
	t.Logf("the ReplicaSet guard denied kube-controller-manager %d times during the Recreate and maxSurge 0 rollouts", vapDenials(t, "temporal-rollout-parked-replicasets")-denials)
}

// vapDenials reads kube-apiserver's count of requests a ValidatingAdmissionPolicy denied.
func vapDenials(t *testing.T, policy string) int {
	t.Helper()
	out := kubectl(t, "get", "--raw", "/metrics")
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "apiserver_validating_admission_policy_check_total{") && strings.Contains(line, `policy="`+policy+`"`) && strings.Contains(line, `enforcement_action="deny"`) {
			var v float64
			if _, err := fmt.Sscanf(line[strings.LastIndex(line, " ")+1:], "%g", &v); err == nil {
				n += int(v)
			}
		}
	}
	return n
}
