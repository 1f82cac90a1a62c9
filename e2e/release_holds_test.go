//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/temporal-rollout/rollout/release"
)

// Freezes that hold within a wave, rollouts held by the fleet freeze, lost change results and
// rollbacks that keep later changes (issue 39: 4-7), on the real stack.

// freezeFleet runs `starter freeze` for 30m; t.Cleanup thaws unless thaw was called.
func freezeFleet(t *testing.T, reason string) (thaw func()) {
	t.Helper()
	if out, err := starterCmd(t, "freeze", "--until", "30m", "--reason", reason, "--identity", "ops"); err != nil {
		t.Fatalf("starter freeze: %v\n%s", err, out)
	}
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			_, _ = starterCmd(t, "thaw")
		}
	})
	return func() {
		t.Helper()
		if out, err := starterCmd(t, "thaw", "--identity", "ops"); err != nil {
			t.Fatalf("starter thaw: %v\n%s", err, out)
		}
		thawed = true
	}
}

func imageOf(d *appsv1.Deployment) string { return d.Spec.Template.Spec.Containers[0].Image }

// waitImage waits until the Deployment's template has the image.
func waitImage(t *testing.T, ns, name, image string) {
	t.Helper()
	eventually(t, time.Minute, func() string {
		if got := imageOf(getDeployment(t, ns, name)); got != image {
			return fmt.Sprintf("%s has %s, want %s", name, got, image)
		}
		return ""
	})
}

// TestReleaseFreezeStopsAWave: a wave of three Deployments, maxConcurrent 1; web-a's rollout
// takes at least 15s (minReadySeconds). `starter freeze` right after web-a's change stops the
// wave: for 20s web-b and web-c keep their template, the release waits for the fleet freeze
// with web-a Done and the other two Pending. After `starter thaw` the release changes them and
// succeeds.
func TestReleaseFreezeStopsAWave(t *testing.T) {
	if env.builtin {
		t.Skip("needs our worker")
	}
	ns := newNamespace(t)
	slow := func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 15 }
	create(t, newDeployment(ns, "web-a", 2, "nginx:1.25", rolling("1", "0"), slow))
	create(t, newDeployment(ns, "web-b", 2, "nginx:1.25", rolling("1", "0")))
	create(t, newDeployment(ns, "web-c", 2, "nginx:1.25", rolling("1", "0")))
	for _, n := range []string{"web-a", "web-b", "web-c"} {
		waitComplete(t, ns, n)
	}
	name := "freeze-wave-" + ns[len(ns)-4:]
	applyRelease(t, fmt.Sprintf(`
name: %s
change: {images: {app: "nginx:1.26"}}
targets: [{name: all, namespace: %s, names: [web-a, web-b, web-c]}]
waves: [{name: all, targets: [all], maxConcurrent: 1}]
`, name, ns))
	waitImage(t, ns, "web-a", "nginx:1.26")
	reason := "e2e wave freeze " + ns
	thaw := freezeFleet(t, reason)
	frozenAt := time.Now()
	if d := getDeployment(t, ns, "web-a"); d.Status.AvailableReplicas == 2 && d.Status.UpdatedReplicas == 2 {
		t.Fatalf("web-a completed before the freeze (%s): the probe needs the freeze mid-wave", time.Since(frozenAt))
	}
	st := waitRelease(t, name, waitingFor(release.WaitingForFleetFreeze))
	if got := strings.Join(targetStatesOf(st), ", "); got != "web-a Done, web-b Pending, web-c Pending" || st.FreezeReason != reason ||
		!strings.Contains(st.Message, "wave 1 (all), 1 of 3 Deployments started, waits for the fleet freeze to end") {
		t.Errorf("held: targets %s, freeze reason %q, message %q", got, st.FreezeReason, st.Message)
	}
	for time.Since(frozenAt) < 20*time.Second {
		for _, n := range []string{"web-b", "web-c"} {
			if got := imageOf(getDeployment(t, ns, n)); got != "nginx:1.25" {
				t.Fatalf("%s into the freeze: %s has %s, want nginx:1.25 until the thaw", time.Since(frozenAt).Round(time.Second), n, got)
			}
		}
		time.Sleep(time.Second)
	}
	thaw()
	if r := releaseResult(t, name); r.Phase != release.PhaseSucceeded {
		t.Fatalf("result %+v, want Succeeded", r)
	}
	for _, n := range []string{"web-a", "web-b", "web-c"} {
		if got := imageOf(waitComplete(t, ns, n)); got != "nginx:1.26" {
			t.Errorf("%s: %s, want nginx:1.26", n, got)
		}
	}
}

func targetStatesOf(st release.Status) []string {
	var out []string
	for _, tg := range st.Targets {
		out = append(out, tg.Name+" "+tg.State)
	}
	return out
}

// TestReleaseStepHeldByFreeze: a stepped Deployment (setWeight 50, pause 10s) changed by a
// release with rolloutTimeout 45s; `starter freeze` during its first step holds the rollout
// before its next. For 60s (more than rolloutTimeout) the release waits, its status saying the
// rollout is held by the fleet freeze, with no rollback: the template stays the release's.
// After `starter thaw` the rollout goes on and the release succeeds.
func TestReleaseStepHeldByFreeze(t *testing.T) {
	if env.builtin {
		t.Skip("needs our worker")
	}
	ns := newNamespace(t)
	create(t, newDeployment(ns, "web", 4, "nginx:1.25", rolling("1", "0"), withSteps(`[{"setWeight":50},{"pause":{"duration":"10s"}}]`)))
	waitComplete(t, ns, "web")
	name := "held-" + ns[len(ns)-4:]
	applyRelease(t, fmt.Sprintf(`
name: %s
change: {images: {app: "nginx:1.26"}}
targets: [{name: web, namespace: %s, names: [web]}]
waves: [{name: only, targets: [web]}]
rolloutTimeout: 45s
`, name, ns))
	waitImage(t, ns, "web", "nginx:1.26")
	reason := "e2e step freeze " + ns
	thaw := freezeFleet(t, reason)
	st := waitRelease(t, name, func(st release.Status) string {
		if st.WaitingFor != release.WaitingForFleetFreeze || !strings.HasPrefix(st.Targets[0].Reason, "held by the fleet freeze (rolloutTimeout stopped): Held before") {
			return fmt.Sprintf("phase %s waiting %s (%s), target %s %q: want held by the fleet freeze", st.Phase, st.WaitingFor, st.Message, st.Targets[0].State, st.Targets[0].Reason)
		}
		return ""
	})
	if st.Phase != release.PhaseWaiting || st.Targets[0].State != release.TargetUpdating || !strings.Contains(st.Targets[0].Reason, reason) {
		t.Errorf("held: phase %s, target %s %q", st.Phase, st.Targets[0].State, st.Targets[0].Reason)
	}
	heldAt := time.Now()
	for time.Since(heldAt) < 60*time.Second {
		st, err := queryRelease(name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Phase != release.PhaseWaiting || st.FailureReason != "" {
			t.Fatalf("%s held: phase %s, failure %q; want still waiting (held time is not rolloutTimeout's)", time.Since(heldAt).Round(time.Second), st.Phase, st.FailureReason)
		}
		if got := imageOf(getDeployment(t, ns, "web")); got != "nginx:1.26" {
			t.Fatalf("%s held: image %s, want nginx:1.26 (no rollback)", time.Since(heldAt).Round(time.Second), got)
		}
		time.Sleep(2 * time.Second)
	}
	thaw()
	if r := releaseResult(t, name); r.Phase != release.PhaseSucceeded {
		t.Fatalf("result %+v, want Succeeded", r)
	}
	d := waitComplete(t, ns, "web")
	if got := sizes(t, ns); imageOf(d) != "nginx:1.26" || got != "nginx:1.26=4/4 nginx:1.25=0/0" {
		t.Errorf("after the thaw: image %s, replicasets %s, want all on nginx:1.26", imageOf(d), got)
	}
	waitEvent(t, ns, "web", "RolloutThawed: Fleet freeze over")
}

// TestReleaseLostChangeReadBack: wave 1 is web-a (cluster ""), wave 2 web-b (cluster b),
// clusterTimeout 20s. During wave 1's bake b's worker is killed, so wave 2's change of web-b is
// never answered; web-b then gets exactly the release's change (what a write that landed while
// its result was lost leaves: the test makes it, as no worker can answer), and b's worker
// comes back only after clusterTimeout. The release reads web-b back, counts the landed change
// and rolls back both: web-b and web-a end on nginx:1.25, RolledBack. Before, web-b counted as
// not changed and stayed on nginx:1.26.
func TestReleaseLostChangeReadBack(t *testing.T) {
	if env.builtin {
		t.Skip("needs our worker")
	}
	b := startCluster(t, "b")
	a := &testCluster{name: "", kube: env.kube}
	ns := newNamespace(t)
	createNamespaceIn(t, b, ns)
	create(t, newDeployment(ns, "web-a", 2, "nginx:1.25", rolling("1", "0")))
	if _, err := b.kube.AppsV1().Deployments(ns).Create(context.Background(), newDeployment(ns, "web-b", 2, "nginx:1.25", rolling("1", "0")), metav1.CreateOptions{}); err != nil {
		t.Fatalf("cluster b: create web-b: %v", err)
	}
	completeIn(t, a, ns, "web-a")
	completeIn(t, b, ns, "web-b")
	name := "lost-" + ns[len(ns)-4:]
	applyRelease(t, fmt.Sprintf(`
name: %s
change: {images: {app: "nginx:1.26"}}
targets:
  - {name: a, namespace: %s, names: [web-a]}
  - {name: b, cluster: b, namespace: %s, names: [web-b]}
waves:
  - {name: one, targets: [a], bake: 20s}
  - {name: two, targets: [b]}
clusterTimeout: 20s
`, name, ns, ns))
	waitRelease(t, name, waitingFor(release.WaitingForBake))
	killClusterWorker(t, b)
	waitRelease(t, name, func(st release.Status) string {
		if st.Targets[1].State != release.TargetUpdating {
			return fmt.Sprintf("web-b %s, want Updating (wave 2's change sent)", st.Targets[1].State)
		}
		return ""
	})
	sent := time.Now()
	updateIn(t, b, ns, "web-b", func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Image = "nginx:1.26"
		d.Annotations = mergeMap(d.Annotations, release.AnnotationRelease, name)
	})
	time.Sleep(time.Until(sent.Add(25 * time.Second)))
	startClusterWorker(t, b)
	r := releaseResult(t, name)
	if r.Phase != release.PhaseRolledBack || !strings.Contains(r.Reason, "wave two: b:"+ns+"/web-b: change: ") ||
		!strings.Contains(r.Reason, "; read back: the change landed, so it is rolled back with the rest") {
		t.Fatalf("result %+v, want RolledBack with web-b's change read back", r)
	}
	for _, x := range []struct {
		c    *testCluster
		name string
	}{{a, "web-a"}, {b, "web-b"}} {
		if got := imageOf(completeIn(t, x.c, ns, x.name)); got != "nginx:1.25" {
			t.Errorf("cluster %q %s: %s, want nginx:1.25 back", x.c.name, x.name, got)
		}
	}
	st, err := queryRelease(name)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(targetStatesOf(st), ", "); got != "web-a RolledBack, web-b RolledBack" {
		t.Errorf("targets %s, want both RolledBack", got)
	}
}

// TestReleaseRollbackKeepsHotfix: wave 1 (web-a) bakes 20s; meanwhile `kubectl set image`
// hotfixes web-a to nginx:1.27. Wave 2 (web-b) misses its progress deadline. The rollback
// restores web-b, leaves web-a on the hotfix (RollbackSkipped, with what changed, and a
// ReleaseRollbackSkipped event), and the release ends Halted naming web-a. Before, the
// rollback put web-a back on nginx:1.25.
func TestReleaseRollbackKeepsHotfix(t *testing.T) {
	if env.builtin {
		t.Skip("needs our worker")
	}
	ns := newNamespace(t)
	label := "release-e2e-" + ns[len(ns)-4:]
	setNodeLabel(t, env.kube, label, "yes")
	t.Cleanup(func() { setNodeLabel(t, env.kube, label, "") })
	create(t, newDeployment(ns, "web-a", 2, "nginx:1.25", rolling("1", "0")))
	create(t, newDeployment(ns, "web-b", 2, "nginx:1.25", rolling("1", "0"), progressDeadline(10), func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.NodeSelector = map[string]string{label: "yes"}
	}))
	waitComplete(t, ns, "web-a")
	waitComplete(t, ns, "web-b")
	setNodeLabel(t, env.kube, label, "")
	name := "hotfix-" + ns[len(ns)-4:]
	applyRelease(t, fmt.Sprintf(`
name: %s
change: {images: {app: "nginx:1.26"}}
targets:
  - {name: a, namespace: %s, names: [web-a]}
  - {name: b, namespace: %s, names: [web-b]}
waves:
  - {name: one, targets: [a], bake: 20s}
  - {name: two, targets: [b]}
`, name, ns, ns))
	waitRelease(t, name, waitingFor(release.WaitingForBake))
	kubectl(t, "-n", ns, "set", "image", "deployment/web-a", "app=nginx:1.27")
	const drift = "container app: image nginx:1.26 → nginx:1.27"
	r := releaseResult(t, name)
	if r.Phase != release.PhaseHalted || !strings.Contains(r.Reason, "wave two: "+ns+"/web-b: rollout failed: ProgressDeadlineExceeded") ||
		!strings.Contains(r.Reason, "; not rolled back, changed since the release: "+ns+"/web-a (changed since the release wrote it: "+drift+")") {
		t.Fatalf("result %+v, want Halted naming web-a's hotfix", r)
	}
	if got := imageOf(waitComplete(t, ns, "web-a")); got != "nginx:1.27" {
		t.Errorf("web-a: %s, want the hotfix nginx:1.27 kept", got)
	}
	dB := waitComplete(t, ns, "web-b")
	if got := imageOf(dB); got != "nginx:1.25" {
		t.Errorf("web-b: %s, want nginx:1.25 back", got)
	}
	if !strings.HasPrefix(dB.Annotations[release.AnnotationRolledBack], name+": wave two") {
		t.Errorf("web-b: %s = %q", release.AnnotationRolledBack, dB.Annotations[release.AnnotationRolledBack])
	}
	if got := getDeployment(t, ns, "web-a").Annotations[release.AnnotationRolledBack]; got != "" {
		t.Errorf("web-a: %s = %q, want none (not rolled back)", release.AnnotationRolledBack, got)
	}
	waitEvent(t, ns, "web-a", "ReleaseRollbackSkipped: Release "+name+" did not roll this Deployment back")
	st, err := queryRelease(name)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(targetStatesOf(st), ", "); got != "web-a RollbackSkipped, web-b RolledBack" || st.Targets[0].Reason != "changed since the release wrote it: "+drift {
		t.Errorf("targets %s, web-a's reason %q", got, st.Targets[0].Reason)
	}
}
