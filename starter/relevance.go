package main

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/k8s"
)

// urgency says how soon a ReplicaSet status change is worth a sync. Every signal costs the
// workflow a signal event and a workflow task (four history events) before it reads anything,
// so the watcher asks the same pure engine the workflow uses what a sync would do with its own
// view, and spaces the signals by the answer.
type urgency int

const (
	// urgencyNone: a sync would write nothing. No signal.
	urgencyNone urgency = iota
	// urgencyStatus: a sync would only refresh the status counts of a rolling Deployment. The
	// signal waits up to --status-signal-interval; any more urgent change sends it sooner.
	urgencyStatus
	// urgencyMove: a sync would scale, create, adopt or clean up, or refresh the status of a
	// Deployment that is not rolling (a pod of an idle Deployment failed, say). Paced as any
	// change.
	urgencyMove
	// urgencyNow: a sync would end the rollout (complete, paused, deadline exceeded), or bring
	// up a Recreate Deployment's new ReplicaSet now that the old pods are gone. Nothing is
	// gained by waiting for more changes: sent after --coalesce, without pacing.
	urgencyNow
)

func (u urgency) String() string {
	switch u {
	case urgencyNone:
		return "none"
	case urgencyStatus:
		return "status"
	case urgencyMove:
		return "move"
	case urgencyNow:
		return "now"
	}
	return "unknown"
}

// classify runs k8s.Decide on the watcher's snapshot of a Deployment (for Recreate, with its
// running pods) and says how urgent a sync is. The watcher's view may lag our worker's last
// writes; the answer only spaces signals: a change the watcher misjudges as status-only is
// still signalled within the status interval, and the workflow resyncs on its own while a
// rollout is under way. A Decide error counts as a move: the workflow reports it.
func classify(s k8s.Snapshot, now time.Time) urgency {
	d := s.Deployment
	if d == nil {
		return urgencyMove
	}
	plan, err := k8s.Decide(s, k8s.Request{Chain: true}, now)
	if err != nil {
		return urgencyMove
	}
	if len(plan.Steps) == 0 {
		return urgencyNone
	}
	move := false
	for _, st := range plan.Steps {
		switch st.Kind {
		case k8s.StepUpdateStatus, k8s.StepEvent:
		case k8s.StepCreate, k8s.StepScaleUp:
			if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
				return urgencyNow
			}
			move = true
		default:
			move = true
		}
	}
	if move {
		return urgencyMove
	}
	if plan.Phase.Converged() {
		return urgencyNow
	}
	if !rolling(d) {
		return urgencyMove
	}
	return urgencyStatus
}

// rolling reports whether the Deployment's last written status shows a rollout under way: it
// has not observed its generation, or it is not complete by `kubectl rollout status` rules.
func rolling(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration < d.Generation || !k8s.DeploymentComplete(d, &d.Status)
}
