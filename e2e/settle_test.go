//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/k8s"
)

// settleRun is what one run of a workflow says of its settle: its AwaitChange results that
// completed the rollout, its Settle activities and their results, and how it ended.
type settleRun struct {
	completedMoving, completedAlone int
	settles                         []activities.SettleResult
	settleScheduled, settleDone     time.Time
	continuedAt                     time.Time
}

// settleRuns reads every run of the workflow for settleRun.
func settleRuns(t *testing.T, id string) []settleRun {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	var runs []settleRun
	kinds := map[int64]string{}
	eachRunEvent(t, id, func(ev *historypb.HistoryEvent) {
		if ev.GetWorkflowExecutionStartedEventAttributes() != nil {
			runs = append(runs, settleRun{})
			clear(kinds)
		}
		if len(runs) == 0 {
			return
		}
		r := &runs[len(runs)-1]
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			kinds[ev.GetEventId()] = a.GetActivityType().GetName()
			if a.GetActivityType().GetName() == "Settle" {
				r.settleScheduled = ev.GetEventTime().AsTime()
			}
		}
		if c := ev.GetActivityTaskCompletedEventAttributes(); c != nil {
			switch kinds[c.GetScheduledEventId()] {
			case "AwaitChange":
				var res activities.AwaitResult
				if err := dc.FromPayloads(c.GetResult(), &res); err != nil {
					t.Fatalf("AwaitChange result in %s: %v", id, err)
				}
				if res.Completed && res.OthersMoving {
					r.completedMoving++
				} else if res.Completed {
					r.completedAlone++
				}
			case "Settle":
				var res activities.SettleResult
				if err := dc.FromPayloads(c.GetResult(), &res); err != nil {
					t.Fatalf("Settle result in %s: %v", id, err)
				}
				r.settles = append(r.settles, res)
				r.settleDone = ev.GetEventTime().AsTime()
			}
		}
		if ev.GetWorkflowExecutionContinuedAsNewEventAttributes() != nil {
			r.continuedAt = ev.GetEventTime().AsTime()
		}
	})
	return runs
}

// TestSettleBeforeContinue rolls four Deployments at once, one of them slow (minReadySeconds
// 6). The three fast ones complete while the slow one's rollout is under way on the same
// worker: each one's wait reports OthersMoving, and its run settles (the Settle activity, with
// the change's version marker) before it continues as new, with the rollout already complete
// on the cluster and in the status query. The slow one completes alone and continues as new
// at once.
func TestSettleBeforeContinue(t *testing.T) {
	ns := newNamespace(t)
	fast := []string{"fast-a", "fast-b", "fast-c"}
	for _, name := range append(fast, "slow") {
		recordHistories(t, ns, name)
		d := newDeployment(ns, name, 2, "nginx:1.25", rolling("1", "0"))
		if name == "slow" {
			d.Spec.MinReadySeconds = 6
		}
		create(t, d)
	}
	for _, name := range append(fast, "slow") {
		waitComplete(t, ns, name)
	}
	for _, name := range append([]string{"slow"}, fast...) {
		setImage(t, ns, name, "nginx:1.26")
	}
	done := map[string]time.Time{}
	for _, name := range append(fast, "slow") {
		d := waitComplete(t, ns, name)
		done[name] = time.Now()
		rss := replicaSets(t, ns)
		var mine []string
		for _, rs := range rss {
			if rs.Labels["app"] == name {
				mine = append(mine, fmt.Sprintf("%s:%s:%d", rs.Spec.Template.Spec.Containers[0].Image, rs.Annotations[k8s.RevisionAnnotation], *rs.Spec.Replicas))
			}
		}
		if got, want := fmt.Sprint(mine), "[nginx:1.26:2:2 nginx:1.25:1:0]"; got != want && fmt.Sprint(mine) != "[nginx:1.25:1:0 nginx:1.26:2:2]" {
			t.Errorf("%s: ReplicaSets (image:revision:replicas) %s, want %s", name, got, want)
		}
		if got := d.Annotations[k8s.RevisionAnnotation]; got != "2" {
			t.Errorf("%s: revision %s, want 2", name, got)
		}
		if prog := k8s.GetCondition(d.Status, appsv1.DeploymentProgressing); prog == nil || prog.Reason != k8s.NewRSAvailableReason {
			t.Errorf("%s: Progressing %+v, want NewReplicaSetAvailable", name, prog)
		}
	}
	for _, name := range fast {
		// The status query answers the completed rollout whether or not its run still settles.
		if st := queryStatus(t, ns, name); st.Phase != string(k8s.PhaseComplete) || st.CurrentRevision != 2 {
			t.Errorf("%s: status query phase %s revision %d, want Complete at 2", name, st.Phase, st.CurrentRevision)
		}
	}

	// Every run has ended or settles no longer than settleMax (30 s) plus a margin.
	eventually(t, 45*time.Second, func() string {
		for _, name := range append(fast, "slow") {
			for _, r := range settleRuns(t, workflowID(ns, name)) {
				if r.completedMoving+r.completedAlone > 0 && r.continuedAt.IsZero() {
					return name + ": a run that completed a rollout has not continued as new"
				}
			}
		}
		return ""
	})
	for _, name := range fast {
		id := workflowID(ns, name)
		settled := 0
		for i, r := range settleRuns(t, id) {
			if r.completedMoving == 0 {
				if len(r.settles) != 0 {
					t.Errorf("%s run %d: %d Settle activities without a completion beside moving rollouts", name, i, len(r.settles))
				}
				continue
			}
			settled++
			if len(r.settles) != 1 {
				t.Errorf("%s run %d: %d Settle activities after a completion beside moving rollouts, want 1", name, i, len(r.settles))
				continue
			}
			res := r.settles[0]
			if res.Reason != activities.SettleQuiet && res.Reason != activities.SettleMax {
				t.Errorf("%s run %d: Settle returned %q, want %s or %s", name, i, res.Reason, activities.SettleQuiet, activities.SettleMax)
			}
			if r.continuedAt.Before(r.settleDone) || r.settleDone.Before(r.settleScheduled) {
				t.Errorf("%s run %d: Settle scheduled %s, done %s, run continued as new %s; want it to continue after the settle",
					name, i, r.settleScheduled.Format(time.RFC3339Nano), r.settleDone.Format(time.RFC3339Nano), r.continuedAt.Format(time.RFC3339Nano))
			}
		}
		if settled == 0 {
			t.Errorf("%s: no run completed its rollout while the slow one moved (AwaitChange OthersMoving), want the update's at least", name)
		}
		if n := versionMarkers(t, id, "settle-before-continue"); n != settled {
			t.Errorf("%s: %d settle-before-continue markers, want one per settled run (%d)", name, n, settled)
		}
	}
	// The slow one completed last, alone: its update's run did not settle.
	runs := settleRuns(t, workflowID(ns, "slow"))
	last := -1
	for i, r := range runs {
		if r.completedMoving+r.completedAlone > 0 {
			last = i
		}
	}
	if last < 0 || runs[last].completedAlone != 1 || len(runs[last].settles) != 0 {
		t.Errorf("slow: the last rollout's run %d of %d: %+v, want completed alone, no Settle", last, len(runs), runs)
	}
	if st := queryStatus(t, ns, "slow"); st.Phase != string(k8s.PhaseComplete) || st.CurrentRevision != 2 {
		t.Errorf("slow: status query phase %s revision %d, want Complete at 2", st.Phase, st.CurrentRevision)
	}
}
