//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// TestHeldAtRest (issue 47): a canary held at its pause, once its pods have settled, waits with
// no activity (no AwaitChange, no heartbeats); a canary pod that dies meanwhile is the
// watcher's to signal, and the sync it wakes writes the Deployment's status as the pods come
// back; promote then completes the rollout.
func TestHeldAtRest(t *testing.T) {
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	create(t, newDeployment(ns, "web", 4, "nginx:v1", rolling("25%", "25%"), withSteps(`[{"setWeight":50},{"pause":{}}]`)))
	waitComplete(t, ns, "web")
	setImage(t, ns, "web", "nginx:v2")
	waitHeld(t, ns, 2, contract.WaitingForPromote)
	id := workflowID(ns, "web")
	ctx := context.Background()
	atRest := func() string {
		desc, err := env.tc.DescribeWorkflowExecution(ctx, id, "")
		if err != nil {
			return err.Error()
		}
		if n := len(desc.PendingActivities); n > 0 {
			return fmt.Sprintf("%d pending activities (%s), want none at rest", n, desc.PendingActivities[0].GetActivityType().GetName())
		}
		return ""
	}
	eventually(t, time.Minute, atRest)
	// It stays at rest: nothing is added to the history while nothing changes.
	events := func() int {
		n := 0
		iter := env.tc.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			if _, err := iter.Next(); err != nil {
				t.Fatalf("history: %v", err)
			}
			n++
		}
		return n
	}
	before := events()
	time.Sleep(25 * time.Second) // past the old wait's heartbeat timeout (20 s)
	if msg := atRest(); msg != "" {
		t.Fatalf("25 s later: %s", msg)
	}
	if n := events(); n != before {
		t.Errorf("history at rest: %d events, then %d 25 s later; want none added", before, n)
	}
	signalled := func() int {
		n := 0
		iter := env.tc.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			e, err := iter.Next()
			if err != nil {
				t.Fatalf("history: %v", err)
			}
			if a := e.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == contract.SignalTrigger {
				n++
			}
		}
		return n
	}
	triggers := signalled()

	// A canary pod dies: its ReplicaSet makes another, and the watcher wakes the rollout.
	h := hashOf(t, ns, "nginx:v2")
	pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: appsv1.DefaultDeploymentUniqueLabelKey + "=" + h})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("canary pods: %v (%d)", err, len(pods.Items))
	}
	if err := env.kube.CoreV1().Pods(ns).Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatalf("delete pod: %v", err)
	}
	eventually(t, time.Minute, func() string {
		if n := signalled(); n <= triggers {
			return fmt.Sprintf("%d trigger signals, want more than %d after the pod died", n, triggers)
		}
		return ""
	})
	eventually(t, time.Minute, func() string {
		d := getDeployment(t, ns, "web")
		if d.Status.AvailableReplicas != 4 || d.Status.UpdatedReplicas != 2 {
			return fmt.Sprintf("status available %d, updated %d; want 4 and 2", d.Status.AvailableReplicas, d.Status.UpdatedReplicas)
		}
		if c := k8s.GetCondition(d.Status, appsv1.DeploymentProgressing); c == nil || c.Reason != k8s.CanaryPausedReason {
			return fmt.Sprintf("Progressing %+v, want CanaryPaused", c)
		}
		return ""
	})
	eventually(t, time.Minute, atRest)
	if st := queryStatus(t, ns, "web"); st.Steps == nil || st.Steps.Step != 2 || st.Steps.WaitingFor != contract.WaitingForPromote {
		t.Errorf("after the pod came back: steps %+v, want still at step 2 waiting for promote", st.Steps)
	}
	if out, err := updateCLI(ns, "web", contract.UpdatePromote, `{}`); err != nil {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	waitCompleteImage(t, ns, "nginx:v2")
}
