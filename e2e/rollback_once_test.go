//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// TestRollbackAppliedOnce (issue 23, defect 2): a rollback to the previous revision, with the
// worker SIGKILLed the moment the sync after it bumps the restored ReplicaSet's revision, is
// applied once. Before, that sync ran in the workflow task that rolled back (held open by a
// local wait), so the kill lost the task; its retry replayed from before the rollback with
// "the previous revision", which by then was the bad one, and wrote the bad template back.
// The worker runs with --local-wait, the layout in which the task stays open longest.
func TestRollbackAppliedOnce(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	env.stack.KillProcess("worker")
	if err := startWorker("--local-wait", "500ms"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.stack.KillProcess("worker")
		if err := startWorker(); err != nil {
			t.Error(err)
		}
	})
	create(t, newDeployment(ns, "web", 4, "nginx:1.25", rolling("1", "0")))
	d1 := waitComplete(t, ns, "web")
	rs1 := expectedRSName(d1)
	setImage(t, ns, "web", "nginx:1.26")
	d2 := waitComplete(t, ns, "web")
	rs2 := expectedRSName(d2)

	// Kill the worker as soon as the restored ReplicaSet is revision 3.
	w, err := env.kube.AppsV1().ReplicaSets(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: d2.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	killed := make(chan time.Time, 1)
	var once sync.Once
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			rs, ok := ev.Object.(*appsv1.ReplicaSet)
			if !ok || ev.Type == watch.Deleted || rs.Name != rs1 || rs.Annotations[k8s.RevisionAnnotation] != "3" {
				continue
			}
			once.Do(func() {
				env.stack.KillProcess("worker")
				killed <- time.Now()
			})
			return
		}
	}()
	signal(t, ns, "web", contract.SignalRollback, `{"revision":0}`)
	select {
	case <-killed:
	case <-time.After(60 * time.Second):
		w.Stop()
		t.Fatalf("the restored ReplicaSet %s never became revision 3: %s", rs1, rsSummary(replicaSets(t, ns)))
	}
	if err := startWorker("--local-wait", "500ms"); err != nil {
		t.Fatal(err)
	}
	d := waitComplete(t, ns, "web")
	// Settle: a second rollback would show within a few syncs.
	time.Sleep(3 * time.Second)
	d = getDeployment(t, ns, "web")
	if got := d.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.25" {
		t.Fatalf("image = %s, want nginx:1.25 (rolled back once)", got)
	}
	if got, want := rsSummary(replicaSets(t, ns)), fmt.Sprintf("%s:r3:4 %s:r2:0", rs1, rs2); got != want {
		t.Fatalf("replicasets = %s, want %s", got, want)
	}
	if got := d.Annotations[k8s.RevisionAnnotation]; got != "3" {
		t.Fatalf("deployment revision = %s, want 3", got)
	}
	var once1, to2 bool
	for _, e := range events(t, ns, "web") {
		once1 = once1 || e == `DeploymentRollback: Rolled back deployment "web" to revision 1`
		to2 = to2 || e == `DeploymentRollback: Rolled back deployment "web" to revision 2`
	}
	if !once1 || to2 {
		t.Errorf("events %q: want the rollback to revision 1 and none to revision 2", events(t, ns, "web"))
	}
}
