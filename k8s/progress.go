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
		case DeploymentComplete(d, &st):
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
