package activities

import (
	"context"
	"fmt"

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
		obj := svc.DeepCopy()
		obj.ManagedFields = nil
		if obj.Spec.Selector == nil {
			obj.Spec.Selector = map[string]string{}
		}
		obj.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey] = sw.Hash
		_, err = services.Update(ctx, obj, metav1.UpdateOptions{FieldManager: fieldManager})
		a.countWrite("update", "services", err)
		if err != nil {
			a.record(in.Deployment, events)
			return res, classify(fmt.Sprintf("point service %s/%s at pod-template-hash %s", ns, sw.Service, sw.Hash), err)
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
