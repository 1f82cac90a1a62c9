package k8s

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestSyncNeed(t *testing.T) {
	d := webDeployment(3, "nginx:2")
	held := d.DeepCopy()
	SetCondition(&held.Status, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionUnknown, CanaryPausedReason, "held", ago(0)))
	stable := d.DeepCopy()
	stable.Annotations = map[string]string{StableAnnotation: "5d8b6f9c7"}
	status := func(events ...Event) Step { return Step{Kind: StepUpdateStatus, Deployment: d, Events: events} }
	plan := func(phase Phase, steps ...Step) Plan { return Plan{Phase: phase, Steps: steps} }
	stepped := Request{Canary: &Canary{Weight: 100}}
	tests := []struct {
		name         string
		give         Plan
		giveCur      *appsv1.Deployment // d when nil
		giveReq      Request
		wantAtRest   Need
		wantUnderWay Need
	}{
		{name: "nothing", give: plan(PhaseProgressing), wantAtRest: NeedNothing, wantUnderWay: NeedNothing},
		{name: "nothing, complete", give: plan(PhaseComplete), wantAtRest: NeedNothing, wantUnderWay: NeedNothing},
		{name: "one status write while progressing", give: plan(PhaseProgressing, status()), wantAtRest: NeedStatus, wantUnderWay: NeedStatus},
		{name: "a status write with an event", give: plan(PhaseProgressing, status(Event{Reason: "X"})), wantAtRest: NeedSync, wantUnderWay: NeedSync},
		{name: "a status write without a deployment", give: plan(PhaseProgressing, Step{Kind: StepUpdateStatus}), wantAtRest: NeedSync, wantUnderWay: NeedSync},
		{name: "a scale", give: plan(PhaseProgressing, Step{Kind: StepScaleUp}), wantAtRest: NeedSync, wantUnderWay: NeedSync},
		{name: "a scale and a status write", give: plan(PhaseProgressing, Step{Kind: StepScaleDown}, status()), wantAtRest: NeedSync, wantUnderWay: NeedSync},
		{name: "a status write past the deadline", give: plan(PhaseDeadlineExceeded, status()), wantAtRest: NeedStatus, wantUnderWay: NeedSync},
		{name: "a stepped rollout's hold starts", give: plan(PhaseProgressing, Step{Kind: StepUpdateStatus, Deployment: held}), wantAtRest: NeedSync, wantUnderWay: NeedSync},
		// The watcher, deciding without the steps, would end a hold at setWeight 100 (every
		// pod on the new template) as a completion: the workflow decides.
		{name: "a stepped rollout's hold ends", give: plan(PhaseProgressing, status()), giveCur: held, wantAtRest: NeedSync, wantUnderWay: NeedSync},
		{name: "held at setWeight 100, seen complete without the steps", give: plan(PhaseComplete, Step{Kind: StepUpdateStatus, Deployment: stable}), giveCur: held, wantAtRest: NeedSync, wantUnderWay: NeedSync},
		{name: "a completion records the stable template", give: plan(PhaseComplete, Step{Kind: StepUpdateStatus, Deployment: stable}), wantAtRest: NeedSync, wantUnderWay: NeedSync},
		{name: "held, counts refreshed", give: plan(PhaseProgressing, Step{Kind: StepUpdateStatus, Deployment: held}), giveCur: held, wantAtRest: NeedStatus, wantUnderWay: NeedStatus},
		{name: "a plain rollout completes", give: plan(PhaseComplete, status()), wantAtRest: NeedStatus, wantUnderWay: NeedStatus},
		{name: "a stepped rollout completes", give: plan(PhaseComplete, status()), giveReq: stepped, wantAtRest: NeedStatus, wantUnderWay: NeedSync},
		{name: "a managed rollout completes", give: plan(PhaseComplete, status()), giveReq: Request{Managed: true}, wantAtRest: NeedStatus, wantUnderWay: NeedSync},
		{name: "completes with an event", give: plan(PhaseComplete, status(Event{Type: "Normal", Reason: "X"})), wantAtRest: NeedSync, wantUnderWay: NeedSync},
		{name: "completes with a cleanup", give: plan(PhaseComplete, Step{Kind: StepCleanup}, status()), wantAtRest: NeedSync, wantUnderWay: NeedSync},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur := tt.giveCur
			if cur == nil {
				cur = d
			}
			if got := SyncNeed(tt.give, cur, tt.giveReq, AtRest); got != tt.wantAtRest {
				t.Errorf("SyncNeed(AtRest) = %d, want %d", got, tt.wantAtRest)
			}
			if got := SyncNeed(tt.give, cur, tt.giveReq, UnderWay); got != tt.wantUnderWay {
				t.Errorf("SyncNeed(UnderWay) = %d, want %d", got, tt.wantUnderWay)
			}
		})
	}
}

func TestHoldChanges(t *testing.T) {
	withReason := func(reason string) *appsv1.Deployment {
		d := webDeployment(3, "nginx:2")
		SetCondition(&d.Status, NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, reason, "", ago(0)))
		return d
	}
	tests := []struct {
		name     string
		give     *appsv1.Deployment
		giveNext *appsv1.Deployment
		want     bool
	}{
		{name: "no condition either side", give: webDeployment(3, "nginx:2"), giveNext: webDeployment(3, "nginx:2")},
		{name: "hold starts", give: withReason(ReplicaSetUpdatedReason), giveNext: withReason(CanaryPausedReason), want: true},
		{name: "hold ends", give: withReason(CanaryPausedReason), giveNext: withReason(NewRSAvailableReason), want: true},
		{name: "hold kept", give: withReason(CanaryPausedReason), giveNext: withReason(CanaryPausedReason)},
		{name: "no hold either side", give: withReason(ReplicaSetUpdatedReason), giveNext: withReason(NewRSAvailableReason)},
		{name: "nil to hold", give: nil, giveNext: withReason(CanaryPausedReason), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HoldChanges(tt.give, tt.giveNext); got != tt.want {
				t.Errorf("HoldChanges() = %t, want %t", got, tt.want)
			}
		})
	}
}
