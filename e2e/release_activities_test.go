//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/k8s"
)

// TestReleaseActivities runs the release activities (activities/release.go) against the
// suite's cluster, with our worker as its Deployment controller: a change applied (twice: the
// second writes nothing) and awaited; the template restored, which rolls back to the exact old
// ReplicaSet (no new one); an abort of a stepped rollout and a missed progress deadline each
// end the wait as failed, with the reason.
func TestReleaseActivities(t *testing.T) {
	if env.builtin {
		t.Skip("needs our worker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	suite := &testCluster{name: "", kube: env.kube}
	ns := newNamespace(t)
	create(t, newDeployment(ns, "web", 4, "app:v1", rolling("1", "0")))
	d1 := waitComplete(t, ns, "web")
	// With the worker's credentials: deploy/'s ServiceAccount's permissions (worker_rbac_test.go).
	a := &activities.Activities{Client: workerClient(t)}

	got, err := a.ReadTargets(ctx, activities.ReadTargetsInput{Namespace: ns, Names: []string{"web", "nope"}})
	if err != nil {
		t.Fatalf("ReadTargets: %v", err)
	}
	want := activities.Target{Name: "web", UID: d1.UID, Generation: d1.Generation, ObservedGeneration: d1.Generation, Revision: 1,
		TemplateHash: k8s.PodTemplateHash(&d1.Spec.Template, nil)}
	if len(got.Targets) != 1 || got.Targets[0] != want || len(got.Missing) != 1 || got.Missing[0] != "nope" {
		t.Fatalf("ReadTargets = %+v, want [%+v] and missing [nope]", got, want)
	}

	// Apply, twice; the second writes nothing and names the same template to restore.
	in := activities.ApplyInput{Namespace: ns, Name: "web", Images: map[string]string{"app": "app:v2"},
		Annotations: map[string]string{"example.com/release": "r1"}, ExpectUID: d1.UID}
	applied, err := a.ApplyTemplateChange(ctx, in)
	if err != nil {
		t.Fatalf("ApplyTemplateChange: %v", err)
	}
	if !applied.Changed || applied.Revision != 1 || applied.Template.Spec.Containers[0].Image != "app:v1" || applied.Generation != d1.Generation+1 {
		t.Errorf("ApplyTemplateChange = changed %t, revision %d, template image %s, generation %d; want true, 1, app:v1, %d",
			applied.Changed, applied.Revision, applied.Template.Spec.Containers[0].Image, applied.Generation, d1.Generation+1)
	}
	again, err := a.ApplyTemplateChange(ctx, in)
	if err != nil {
		t.Fatalf("ApplyTemplateChange again: %v", err)
	}
	if again.Changed || again.Generation != applied.Generation || again.Revision != 1 || again.Template.Spec.Containers[0].Image != "app:v1" || again.TemplateHash != applied.TemplateHash {
		t.Errorf("ApplyTemplateChange again = %+v, want unchanged at generation %d, restoring revision 1 (app:v1)", again, applied.Generation)
	}
	done := await(t, a, activities.AwaitDoneInput{Namespace: ns, Name: "web", Generation: applied.Generation, TemplateHash: applied.TemplateHash})
	if !done.Complete {
		t.Fatalf("AwaitRolloutDone = %+v, want complete", done)
	}
	d := getDeployment(t, ns, "web")
	wantReplicaSets(t, suite, d, map[string]int32{"app:v2": 4, "app:v1": 0})
	v1RS := templateRS(d, "app:v1")

	// Restore: back on the very ReplicaSet of app:v1, at a new revision; no third ReplicaSet.
	restored, err := a.RestoreTemplate(ctx, activities.RestoreInput{Namespace: ns, Name: "web", Template: applied.Template,
		Annotations: map[string]string{"example.com/release": ""}, ExpectUID: d1.UID})
	if err != nil || !restored.Changed || restored.TemplateHash != want.TemplateHash {
		t.Fatalf("RestoreTemplate = %+v, %v; want changed, hash %s", restored, err, want.TemplateHash)
	}
	done = await(t, a, activities.AwaitDoneInput{Namespace: ns, Name: "web", Generation: restored.Generation, TemplateHash: restored.TemplateHash})
	if !done.Complete {
		t.Fatalf("AwaitRolloutDone after restore = %+v, want complete", done)
	}
	d = getDeployment(t, ns, "web")
	wantReplicaSets(t, suite, d, map[string]int32{"app:v1": 4, "app:v2": 0})
	if d.Annotations[k8s.RevisionAnnotation] != "3" || d.Annotations["example.com/release"] != "" {
		t.Errorf("after restore: revision %q, release annotation %q; want 3 and none", d.Annotations[k8s.RevisionAnnotation], d.Annotations["example.com/release"])
	}
	if rs := replicaSets(t, ns); rs[0].Name != v1RS || rs[0].Annotations[k8s.RevisionAnnotation] != "3" {
		t.Errorf("newest ReplicaSet %s at revision %s, want %s (app:v1's) at 3", rs[0].Name, rs[0].Annotations[k8s.RevisionAnnotation], v1RS)
	}

	// A stepped rollout aborted at its pause: the wait fails with the abort's reason.
	applied, err = a.ApplyTemplateChange(ctx, activities.ApplyInput{Namespace: ns, Name: "web", Images: map[string]string{"app": "app:v3"},
		Annotations: map[string]string{k8s.StepsAnnotation: `[{"setWeight":50},{"pause":{}}]`}})
	if err != nil {
		t.Fatalf("ApplyTemplateChange v3: %v", err)
	}
	type answer struct {
		res activities.AwaitDoneResult
		err error
	}
	out := make(chan answer, 1)
	go func() {
		res, err := a.AwaitRolloutDone(ctx, activities.AwaitDoneInput{Namespace: ns, Name: "web", Generation: applied.Generation, TemplateHash: applied.TemplateHash})
		out <- answer{res, err}
	}()
	waitWeight(t, suite, ns, "web", "app:v3", "app:v1")
	select {
	case r := <-out:
		t.Fatalf("AwaitRolloutDone returned %+v, %v at the pause", r.res, r.err)
	default:
	}
	if o, err := starterCmd(t, "abort", "--reason", "bad canary", ns+"/web"); err != nil {
		t.Fatalf("starter abort: %v\n%s", err, o)
	}
	select {
	case r := <-out:
		if r.err != nil || !r.res.Failed || !strings.HasPrefix(r.res.Reason, "aborted: ") || !strings.Contains(r.res.Reason, "bad canary") {
			t.Errorf("AwaitRolloutDone after abort = %+v, %v; want failed, reason aborted: ... bad canary", r.res, r.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("AwaitRolloutDone did not return within a minute of the abort")
	}
	d = waitComplete(t, ns, "web")
	wantReplicaSets(t, suite, d, map[string]int32{"app:v1": 4, "app:v2": 0, "app:v3": 0})

	// A missed progress deadline fails the wait.
	update(t, ns, "web", func(d *appsv1.Deployment) {
		delete(d.Annotations, k8s.StepsAnnotation)
		d.Spec.ProgressDeadlineSeconds = new(int32)
		*d.Spec.ProgressDeadlineSeconds = 8
	})
	waitComplete(t, ns, "web")
	applied, err = a.ApplyTemplateChange(ctx, activities.ApplyInput{Namespace: ns, Name: "web", Images: map[string]string{"app": "app:404"}})
	if err != nil {
		t.Fatalf("ApplyTemplateChange app:404: %v", err)
	}
	done = await(t, a, activities.AwaitDoneInput{Namespace: ns, Name: "web", Generation: applied.Generation, TemplateHash: applied.TemplateHash})
	if !done.Failed || !strings.HasPrefix(done.Reason, k8s.TimedOutReason+": ") {
		t.Errorf("AwaitRolloutDone on app:404 = %+v, want failed with %s", done, k8s.TimedOutReason)
	}
}

// await runs AwaitRolloutDone for up to waitTimeout.
func await(t *testing.T, a *activities.Activities, in activities.AwaitDoneInput) activities.AwaitDoneResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res, err := a.AwaitRolloutDone(ctx, in)
	if err != nil {
		t.Fatalf("AwaitRolloutDone(%+v): %v", in, err)
	}
	return res
}
