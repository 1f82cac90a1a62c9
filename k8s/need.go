package k8s

import appsv1 "k8s.io/api/apps/v1"

// Need is what a change seen on the informer cache asks of the workflow, once Decide has
// weighed it: nothing, a status refresh that the one watching writes at once, or a sync.
type Need int

const (
	// NeedNothing: a sync would write nothing.
	NeedNothing Need = iota
	// NeedStatus: a sync would only rewrite the Deployment's status counts (StatusOnly),
	// derived data that upstream rewrites on every ReplicaSet status change; the one watching
	// writes it at once, with no recorded sync.
	NeedStatus
	// NeedSync: the workflow syncs and records the writes (scale, create, adopt, clean up, a
	// condition with an event, the end of a rollout). The worker's wait may make a plain
	// rollout's scale moves itself (activities.inlineMoves); that is the wait's business.
	NeedSync
)

// Watch says who weighs a change: the two watch different Deployments and write different
// statuses at once.
type Watch int

const (
	// AtRest: the watcher, for a Deployment at rest (complete, paused, past its deadline; see
	// watcher.WorkerCovers), whose workflow waits for a signal. Any status-only plan is a
	// refresh: a complete Deployment that lost a pod is rewritten as progressing, and the
	// watcher then signals the rollout it started.
	AtRest Watch = iota
	// UnderWay: the worker's wait (activities.AwaitChange), between two syncs of a rollout
	// under way. A status-only plan is a refresh while the rollout progresses, and the
	// completing status of a plain rollout (full mode, no steps); a stepped rollout's hold
	// starting or ending (HoldChanges) and any other ending are the workflow's to write.
	UnderWay
)

// SyncNeed answers the one question the watcher and the worker's wait both ask of a change:
// does this need a sync? plan is Decide's on the cache's snapshot of cur, with req.
//
// A rollout under way whose pods became available: plan {Progressing, [UpdateStatus
// availableReplicas 7→8]} is NeedStatus for both. The last old pod gone: {Complete,
// [UpdateStatus NewReplicaSetAvailable]} is NeedStatus for the wait of a plain rollout, and
// NeedSync for a stepped one (its workflow has bookkeeping to do at the end). {Progressing,
// [ScaleUp new 3→5, UpdateStatus]} is NeedSync for both.
func SyncNeed(plan Plan, cur *appsv1.Deployment, req Request, w Watch) Need {
	switch {
	case len(plan.Steps) == 0:
		return NeedNothing
	case !StatusOnly(plan):
		return NeedSync
	case HoldChanges(cur, plan.Steps[0].Deployment) || RecordsStable(cur, plan.Steps[0].Deployment):
		// A stepped rollout's hold, and the template that completed it, are the workflow's to
		// write: it knows the steps. The watcher decides without them: a rollout held at a
		// pause after setWeight 100 (every pod on the new template, none on the old) looks
		// complete to it, and its refresh recorded the canary as the stable template, so an
		// abort or a rollback then took the stable template for a new rollout and held it at
		// the steps' pause. A wait whose workflow already moved on (a promote, an abort; its
		// cancellation reaches the activity only with its next heartbeat) would otherwise
		// write its old hold back over the sync's, and the two would make each other's
		// writes stale.
		return NeedSync
	case w == AtRest:
		return NeedStatus
	case plan.Phase == PhaseProgressing:
		return NeedStatus
	case plan.Phase == PhaseComplete && PlainRollout(req):
		// Upstream records no event for it: `kubectl rollout status` returns as soon as the
		// last old pod is gone, not after a round trip through the Temporal server.
		return NeedStatus
	}
	return NeedSync
}

// StatusOnly reports whether a plan's one write is the Deployment's status, with no event.
func StatusOnly(plan Plan) bool {
	if len(plan.Steps) != 1 {
		return false
	}
	st := plan.Steps[0]
	return st.Kind == StepUpdateStatus && len(st.Events) == 0 && st.Deployment != nil
}

// PlainRollout: a full-mode rollout with no steps.
func PlainRollout(req Request) bool { return !req.Managed && req.Canary == nil }

// RecordsStable reports whether a status write records another stable template
// (StableAnnotation) than the Deployment has.
func RecordsStable(cur, next *appsv1.Deployment) bool {
	return next != nil && cur != nil && next.Annotations[StableAnnotation] != cur.Annotations[StableAnnotation]
}

// HoldChanges reports whether the Progressing condition enters or leaves a stepped rollout's
// hold (reason CanaryPaused) between two Deployments (nil: no condition).
func HoldChanges(from, to *appsv1.Deployment) bool {
	reason := func(d *appsv1.Deployment) string {
		if d == nil {
			return ""
		}
		if c := GetCondition(d.Status, appsv1.DeploymentProgressing); c != nil {
			return c.Reason
		}
		return ""
	}
	a, b := reason(from), reason(to)
	return a != b && (a == CanaryPausedReason || b == CanaryPausedReason)
}
