package activities

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/temporal-rollout/rollout/k8s"
)

// ErrBlueGreen: a blue-green Service cannot be switched (it does not exist). The workflow
// retries after a backoff.
const ErrBlueGreen = "BlueGreenError"

// ServiceSwitch is one Service of a blue-green rollout: the pod-template-hash it should select
// ("" leaves it as it is), and the event to record when the switch is written.
type ServiceSwitch struct {
	Service string    `json:"service"`
	Hash    string    `json:"hash,omitempty"`
	Event   k8s.Event `json:"event"`
	// Active: the active Service, which the gate moves only to a fully available template
	// (k8s.GateSelector).
	Active bool `json:"active,omitempty"`
}

// SyncBlueGreenInput points a blue-green rollout's Services at their ReplicaSets.
type SyncBlueGreenInput struct {
	Deployment DeploymentRef   `json:"deployment"`
	Switches   []ServiceSwitch `json:"switches"`
}

// SyncBlueGreenResult is the pod-template-hash each Service selects after the sync, and which
// were switched.
type SyncBlueGreenResult struct {
	Selects  map[string]string `json:"selects"`
	Switched []string          `json:"switched,omitempty"`
	// Hold: why the gate left a Service where it was ("" when every switch was made).
	Hold string `json:"hold,omitempty"`
}

// SyncBlueGreen sets each Service's pod-template-hash selector, in the order given (the
// workflow gives the active Service first), keeping its other selector keys. Each write
// carries the resourceVersion it was read at: a conflict is a stale decision (ErrStale). A
// missing Service fails the sync (ErrBlueGreen); the workflow backs off and tries again.
// Writing an absolute selector is idempotent. An event is recorded for each Service switched.
func (a *Activities) SyncBlueGreen(ctx context.Context, in SyncBlueGreenInput) (SyncBlueGreenResult, error) {
	ns := in.Deployment.Namespace
	services := a.client(ctx).CoreV1().Services(ns)
	res := SyncBlueGreenResult{Selects: map[string]string{}}
	var events []k8s.Event
	var available, sizes map[string]int32
	for _, sw := range in.Switches {
		svc, err := services.Get(ctx, sw.Service, metav1.GetOptions{})
		if err != nil {
			err = classify("get service "+ns+"/"+sw.Service, err)
			if IsKind(err, ErrNotFound) {
				// A missing Service is not a missing Deployment: back off, do not re-observe.
				return res, nonRetryable(ErrBlueGreen, "%v", err)
			}
			return res, err
		}
		cur := svc.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey]
		if sw.Hash == "" || cur == sw.Hash {
			res.Selects[sw.Service] = cur
			continue
		}
		if sw.Active && available == nil {
			if available, sizes, err = a.podsNow(ctx, in.Deployment); err != nil {
				a.record(in.Deployment, events)
				return res, err
			}
		}
		if hold := gateSwitch(sw, available, sizes); hold != "" {
			res.Selects[sw.Service] = cur
			res.Hold = hold
			events = append(events, k8s.Event{Type: "Warning", Reason: "TrafficHeld", Message: "Service switch held by the gate: " + hold})
			continue
		}
		if _, err := a.setSelector(ctx, services, svc, sw.Hash); err != nil {
			a.record(in.Deployment, events)
			return res, err
		}
		res.Selects[sw.Service] = sw.Hash
		res.Switched = append(res.Switched, sw.Service)
		if sw.Event.Reason != "" {
			events = append(events, sw.Event)
		}
	}
	a.record(in.Deployment, events)
	return res, nil
}
