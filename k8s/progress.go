package k8s

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// syncRolloutStatus is syncDeploymentStatus plus the Progressing condition: complete,
// progressing, or timed out against progressDeadlineSeconds, and ReplicaFailure copied up.
func (p *planner) syncRolloutStatus(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) {
	d := p.d
	st := p.calculateStatus(all, newRS)
	if !HasProgressDeadline(d) {
		RemoveCondition(&st, appsv1.DeploymentProgressing)
	}
	cur := GetCondition(d.Status, appsv1.DeploymentProgressing)
	complete := st.Replicas == st.UpdatedReplicas && cur != nil && cur.Reason == NewRSAvailableReason
	if HasProgressDeadline(d) && !complete && !p.holding() {
		switch {
		case p.rolloutComplete(&st):
			msg := fmt.Sprintf("Deployment %q has successfully progressed.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q has successfully progressed.", newRS.Name)
			}
			SetCondition(&st, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, NewRSAvailableReason, msg, p.now))
		case DeploymentProgressing(d, &st):
			msg := fmt.Sprintf("Deployment %q is progressing.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q is progressing.", newRS.Name)
			}
			c := NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReplicaSetUpdatedReason, msg, p.now)
			if cur != nil {
				if cur.Status == corev1.ConditionTrue {
					c.LastTransitionTime = cur.LastTransitionTime
				}
				RemoveCondition(&st, appsv1.DeploymentProgressing)
			}
			SetCondition(&st, c)
		case p.timedOut(&st):
			msg := fmt.Sprintf("Deployment %q has timed out progressing.", d.Name)
			if newRS != nil {
				msg = fmt.Sprintf("ReplicaSet %q has timed out progressing.", newRS.Name)
			}
			SetCondition(&st, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, TimedOutReason, msg, p.now))
		}
	}
	if failures := replicaFailures(all, newRS); len(failures) > 0 {
		SetCondition(&st, failures[0])
	} else {
		RemoveCondition(&st, appsv1.DeploymentReplicaFailure)
	}
	if !equality.Semantic.DeepEqual(d.Status, st) {
		d.Status = st
	}
	p.recheck = recheckAt(d, &st)
}

// rolloutComplete is DeploymentComplete for the phase and the Progressing condition. A stepped
// rollout with a step in force (Request.Canary) is not complete, whatever its counts: a
// setWeight that covers every replica (1 replica at 20%, or any at 100%) leaves the counts
// complete while a pause or an analysis after it still holds. It completes once the workflow
// asks for no step (every step passed, or promoted in full).
func (p *planner) rolloutComplete(st *appsv1.DeploymentStatus) bool {
	return p.canary == nil && DeploymentComplete(p.d, st)
}

// timedOut reports whether the Progressing condition was last updated more than
// progressDeadlineSeconds ago.
func (p *planner) timedOut(st *appsv1.DeploymentStatus) bool {
	return timedOut(p.d, st, p.now.Time)
}

func timedOut(d *appsv1.Deployment, st *appsv1.DeploymentStatus, now time.Time) bool {
	if !HasProgressDeadline(d) {
		return false
	}
	c := GetCondition(*st, appsv1.DeploymentProgressing)
	if c == nil || c.Reason == NewRSAvailableReason || c.Reason == CanaryPausedReason {
		return false
	}
	if c.Reason == TimedOutReason {
		return true
	}
	return c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Before(now)
}

// recheckAt is when a rollout that makes no progress must be checked against its deadline: one
// second after the Progressing condition's last update plus progressDeadlineSeconds.
func recheckAt(d *appsv1.Deployment, st *appsv1.DeploymentStatus) *metav1.Time {
	c := GetCondition(*st, appsv1.DeploymentProgressing)
	if !HasProgressDeadline(d) || c == nil || DeploymentComplete(d, st) || c.Reason == TimedOutReason || c.Reason == CanaryPausedReason {
		return nil
	}
	t := metav1.NewTime(c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds)*time.Second + time.Second))
	return &t
}

func replicaFailures(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) []appsv1.DeploymentCondition {
	var out []appsv1.DeploymentCondition
	collect := func(rs *appsv1.ReplicaSet) {
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure {
				out = append(out, replicaSetToDeploymentCondition(c))
			}
		}
	}
	if newRS != nil {
		collect(newRS)
	}
	if len(out) > 0 {
		return out
	}
	for _, rs := range all {
		if rs != nil {
			collect(rs)
		}
	}
	return out
}

// TemplateChangeStatus is the status refresh a new pod template calls for before any sync has
// acted on it. Until a ReplicaSet runs the new template no pod is updated, so upstream's
// calculateStatus (over a nil new ReplicaSet) gives status.updatedReplicas 0, while the old
// ReplicaSets' pods still count in replicas and availableReplicas, whose counts the template
// does not change. Worked: 10 replicas at rest (10/10/10), image changed: the status is
// 10 replicas, 0 updated, 10 available from the moment of the change, not from the sync's
// first write, which may be a ReplicaSet create and a scale-down later.
//
// It returns a copy of s.Deployment with updatedReplicas 0 and nothing else changed:
// observedGeneration and the conditions are the sync's to write, once it has acted, so
// `kubectl rollout status` still waits for the new generation to be observed. It returns nil
// when there is nothing to refresh: the Deployment was never synced (observedGeneration 0) or
// its generation is observed already, it is being deleted, a ReplicaSet of the snapshot runs
// the template already (a rollback to an earlier revision, an orphan to adopt, or a sync got
// there first: its counts are the sync's to weigh), or the status says 0 already.
func TemplateChangeStatus(s Snapshot) *appsv1.Deployment {
	d := s.Deployment
	if d == nil || d.DeletionTimestamp != nil || d.Status.ObservedGeneration == 0 ||
		d.Status.ObservedGeneration >= d.Generation || d.Status.UpdatedReplicas == 0 {
		return nil
	}
	if FindNewReplicaSet(d, s.ReplicaSets) != nil {
		return nil
	}
	out := d.DeepCopy()
	out.Status.UpdatedReplicas = 0
	return out
}
