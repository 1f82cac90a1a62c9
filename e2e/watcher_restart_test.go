//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/temporal-rollout/rollout/k8s"
)

// TestChangesWhileNoWatcherRuns (issue 23, defect 5): two `worker --watch` processes, as
// deploy/ runs them, both SIGKILLed; five Deployments at rest are changed while neither runs
// (a new image on each, and one scaled from 3 to 4 as well); one worker starts again. Its
// start-up resync signals the five generations no sync has observed, and each rolls out to
// exactly its new ReplicaSet at revision 2 with the old one at 0, its status observing
// generation 2. It used to signal none ("Resync done, signalled 0"): the watcher took an
// unobserved generation for a rollout under way that it had signalled itself.
func TestChangesWhileNoWatcherRuns(t *testing.T) {
	if env.builtin {
		t.Skip("our worker is not running")
	}
	ns := newNamespace(t)
	restartSuite := stopOurs(t)
	names := []string{"worker-a", "worker-b"}
	t.Cleanup(func() {
		for _, n := range names {
			env.stack.StopProcess(n)
		}
		restartSuite()
	})
	args := append(workerArgs(), "--watch")
	for _, n := range names {
		if err := startNamed(n, "worker", args...); err != nil {
			t.Fatal(err)
		}
	}

	deps := []string{"app-0", "app-1", "app-2", "app-3", "app-4"}
	old := map[string]string{}
	for _, name := range deps {
		create(t, newDeployment(ns, name, 3, "nginx:1.25", rolling("1", "0")))
	}
	for _, name := range deps {
		waitComplete(t, ns, name)
		old[name] = ownedReplicaSets(t, ns, name)[0].Name
	}

	for _, n := range names {
		env.stack.KillProcess(n)
	}
	for _, name := range deps {
		setImage(t, ns, name, "nginx:1.26")
	}
	update(t, ns, "app-4", func(d *appsv1.Deployment) { d.Spec.Replicas = ptrTo(int32(4)) })
	for _, name := range deps {
		d := getDeployment(t, ns, name)
		if d.Generation <= d.Status.ObservedGeneration {
			t.Fatalf("%s: generation %d, observedGeneration %d with no worker running, want the change unobserved", name, d.Generation, d.Status.ObservedGeneration)
		}
	}

	start := time.Now()
	if err := startNamed("worker-a", "worker", args...); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, func() string {
		var pending []string
		for _, name := range deps {
			if why := rolloutPending(getDeployment(t, ns, name)); why != "" {
				pending = append(pending, name+": "+why)
			}
		}
		return strings.Join(pending, "; ")
	})
	t.Logf("all %d rolled out %s after the worker started", len(deps), since(start))

	for _, name := range deps {
		replicas := int32(3)
		if name == "app-4" {
			replicas = 4
		}
		d := getDeployment(t, ns, name)
		if got := d.Annotations["deployment.kubernetes.io/revision"]; got != "2" {
			t.Errorf("%s: revision %s, want 2", name, got)
		}
		st := d.Status
		if st.ObservedGeneration != d.Generation || st.Replicas != replicas || st.UpdatedReplicas != replicas || st.AvailableReplicas != replicas {
			t.Errorf("%s: generation %d, status observedGeneration/replicas/updated/available = %d/%d/%d/%d, want %d/%d/%d/%d",
				name, d.Generation, st.ObservedGeneration, st.Replicas, st.UpdatedReplicas, st.AvailableReplicas, d.Generation, replicas, replicas, replicas)
		}
		want := fmt.Sprintf("%s:r2:%d %s:r1:0", expectedRSName(d), replicas, old[name])
		if got := rsSummary(ownedReplicaSets(t, ns, name)); got != want {
			t.Errorf("%s: replicasets = %s, want %s", name, got, want)
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.26" {
			t.Errorf("%s: image %s, want nginx:1.26", name, got)
		}
	}
	if log := readLog("worker-a"); !strings.Contains(log, "Resync done") {
		t.Errorf("no \"Resync done\" in worker-a's log")
	}
}

// TestRecreatedRightAfterUpdate (issue 23, defect 6), as kubectl's test/cmd/apps.sh does
// between "Set env" and "Get rollout history": a Deployment given a new env, deleted at once
// while its sync's wait may still be catching up with its last writes, and created again
// under the same name; three rounds, the delete 0, 100 and 200 ms after the update, to land
// in that wait. Each new Deployment (a new UID) gets its own first ReplicaSet at revision 1,
// nothing of the old one survives, and it completes. Its first ReplicaSet used to come ~2 s
// late when the delete landed in the wait (catchUpBound ran out first). The delays are
// logged; the exact objects are asserted.
func TestRecreatedRightAfterUpdate(t *testing.T) {
	if env.builtin {
		t.Skip("our worker is not running")
	}
	ns := newNamespace(t)
	create(t, newDeployment(ns, "nginx-deployment", 3, "nginx:1.25", rolling("1", "0")))
	waitComplete(t, ns, "nginx-deployment")
	for round, pause := range []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond} {
		recreateRightAfterUpdate(t, ns, round, pause)
	}
}

func recreateRightAfterUpdate(t *testing.T, ns string, round int, pause time.Duration) {
	t.Helper()
	ctx := context.Background()
	first := getDeployment(t, ns, "nginx-deployment")
	rsw, err := env.kube.AppsV1().ReplicaSets(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rsw.Stop()
	update(t, ns, "nginx-deployment", func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KEY_2", Value: "bar"}}
	})
	time.Sleep(pause)
	if err := env.kube.AppsV1().Deployments(ns).Delete(ctx, "nginx-deployment", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		_, err := env.kube.AppsV1().Deployments(ns).Get(ctx, "nginx-deployment", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		return fmt.Sprintf("deployment still there (%v)", err)
	})
	second := create(t, newDeployment(ns, "nginx-deployment", 3, "nginx:1.25", rolling("1", "0")))
	created := time.Now()
	if second.UID == first.UID {
		t.Fatalf("round %d: the Deployment created again has the first one's UID %s", round, first.UID)
	}

	// The first ReplicaSet the new Deployment controls, from the watch.
	var firstRS time.Duration
	deadline := time.After(30 * time.Second)
	for firstRS == 0 {
		select {
		case ev, ok := <-rsw.ResultChan():
			if !ok {
				t.Fatalf("round %d: replicaset watch closed", round)
			}
			rs, isRS := ev.Object.(*appsv1.ReplicaSet)
			if isRS && ev.Type == watch.Added && controlledBy(rs, second.UID) {
				firstRS = time.Since(created)
			}
		case <-deadline:
			t.Fatalf("round %d: no ReplicaSet of the new Deployment 30s after its creation; replicasets: %s", round, rsSummary(replicaSets(t, ns)))
		}
	}
	t.Logf("round %d (delete %s after the update): the new Deployment's first ReplicaSet came %s after its creation", round, pause, firstRS.Round(time.Millisecond))

	d := waitComplete(t, ns, "nginx-deployment")
	if d.UID != second.UID {
		t.Fatalf("round %d: UID %s, want the new Deployment's %s", round, d.UID, second.UID)
	}
	if got := d.Annotations["deployment.kubernetes.io/revision"]; got != "1" {
		t.Errorf("round %d: revision %s, want 1: the new Deployment's history starts over", round, got)
	}
	if st := d.Status; st.ObservedGeneration != d.Generation || st.Replicas != 3 || st.UpdatedReplicas != 3 || st.AvailableReplicas != 3 {
		t.Errorf("round %d: status %+v, want generation %d observed and 3 replicas, all updated and available", round, st, d.Generation)
	}
	// The old Deployment's ReplicaSets go with it (the garbage collector); only the new one's
	// stays.
	want := fmt.Sprintf("%s:r1:3", expectedRSName(d))
	eventually(t, 60*time.Second, func() string {
		if got := rsSummary(replicaSets(t, ns)); got != want {
			return fmt.Sprintf("round %d: replicasets = %s, want %s", round, got, want)
		}
		return ""
	})
	for _, rs := range replicaSets(t, ns) {
		if !controlledBy(&rs, second.UID) {
			t.Errorf("round %d: replicaset %s is controlled by %v, want the new Deployment %s", round, rs.Name, metav1.GetControllerOf(&rs), second.UID)
		}
		if len(rs.Spec.Template.Spec.Containers[0].Env) != 0 {
			t.Errorf("round %d: replicaset %s has env %v, want none: the new Deployment's template", round, rs.Name, rs.Spec.Template.Spec.Containers[0].Env)
		}
	}
}

// ownedReplicaSets lists the ReplicaSets the Deployment ns/name controls, newest revision
// first.
func ownedReplicaSets(t *testing.T, ns, name string) []appsv1.ReplicaSet {
	t.Helper()
	d := getDeployment(t, ns, name)
	var out []appsv1.ReplicaSet
	for _, rs := range replicaSets(t, ns) {
		if controlledBy(&rs, d.UID) {
			out = append(out, rs)
		}
	}
	return out
}

// controlledBy reports whether the Deployment of that UID controls rs.
func controlledBy(rs *appsv1.ReplicaSet, uid types.UID) bool {
	ref := metav1.GetControllerOf(rs)
	return ref != nil && ref.UID == uid
}

func ptrTo[T any](v T) *T { return &v }

// Defect 5 in managed mode: kube-controller-manager's own Deployment controller writes
// observedGeneration for a parked (paused) Deployment at once, so a change made while our
// worker and watcher were down is not an unobserved generation there. The watcher's first
// resync weighs each parked Deployment against its ReplicaSets instead: each rolls out once
// they are back.
func TestManagedChangesWhileNoWatcherRuns(t *testing.T) {
	inManagedMode(t)
	ns := newNamespace(t)
	deps := []string{"app-0", "app-1", "app-2"}
	old := map[string]string{}
	for _, name := range deps {
		create(t, newDeployment(ns, name, 3, "nginx:1.25", rolling("1", "0"), managed()))
	}
	for _, name := range deps {
		waitParked(t, ns, name, "1", "0")
		old[name] = ownedReplicaSets(t, ns, name)[0].Name
	}

	env.stack.KillProcess("watcher")
	env.stack.KillProcess("worker")
	for _, name := range deps {
		setImage(t, ns, name, "nginx:1.26")
	}
	// kube-controller-manager observes the new generation of each parked Deployment, and
	// nothing rolls.
	eventually(t, 30*time.Second, func() string {
		for _, name := range deps {
			if d := getDeployment(t, ns, name); d.Status.ObservedGeneration != d.Generation {
				return fmt.Sprintf("%s: observedGeneration %d, generation %d", name, d.Status.ObservedGeneration, d.Generation)
			}
		}
		return ""
	})
	for _, name := range deps {
		if got := rsSummary(ownedReplicaSets(t, ns, name)); got != old[name]+":r1:3" {
			t.Fatalf("%s with no worker running: replicasets %s, want only %s at 3", name, got, old[name])
		}
	}

	start := time.Now()
	if err := startWorker("--mode", "managed"); err != nil {
		t.Fatal(err)
	}
	if err := startWatcher("--mode", "managed"); err != nil {
		t.Fatal(err)
	}
	for _, name := range deps {
		d := waitParked(t, ns, name, "1", "0")
		if got := d.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.26" {
			t.Errorf("%s: image %s, want nginx:1.26", name, got)
		}
		if got := d.Annotations[k8s.RevisionAnnotation]; got != "2" {
			t.Errorf("%s: revision %s, want 2", name, got)
		}
		want := fmt.Sprintf("%s:r2:3 %s:r1:0", expectedRSName(d), old[name])
		if got := rsSummary(ownedReplicaSets(t, ns, name)); got != want {
			t.Errorf("%s: replicasets %s, want %s", name, got, want)
		}
	}
	t.Logf("all %d rolled out %s after the worker and the watcher started", len(deps), since(start))
}
