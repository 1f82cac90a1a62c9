package activities

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/temporal-rollout/rollout/k8s"
)

// The gate: the only code that writes an HTTPRoute or a Service selector (TestGateOnlyWriter
// holds every other file to it). Each write is weighed by k8s.GateTraffic or k8s.GateSelector
// against the Deployment's ReplicaSets read just before it (podsNow), not against what the
// workflow saw when it decided: a decision made on an older snapshot cannot put weight on pods
// that have gone since.

// podsNow reads the Deployment's ReplicaSets as they are now (the watch-fed cache once it is
// current, live otherwise) and returns each template's available pods (k8s.AvailablePods) and
// replicas. A Deployment that is gone has none.
func (a *Activities) podsNow(ctx context.Context, ref DeploymentRef) (available, sizes map[string]int32, err error) {
	available, sizes, _, err = a.podsUpNow(ctx, ref)
	return available, sizes, err
}

// podsUpNow is podsNow with each template's pods up as well (k8s.PodsUp: a ReplicaSet just
// scaled down keeps serving on its going pods until they are deleted), which the status
// reports.
func (a *Activities) podsUpNow(ctx context.Context, ref DeploymentRef) (available, sizes, up map[string]int32, err error) {
	obs, err := a.observe(ctx, ObserveInput{Namespace: ref.Namespace, Name: ref.Name})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read the replicasets of %s: %w", ref, err)
	}
	available, sizes, up = map[string]int32{}, map[string]int32{}, map[string]int32{}
	if !obs.Found || (ref.UID != "" && obs.Snapshot.Deployment.UID != ref.UID) {
		return available, sizes, up, nil
	}
	rss := obs.Snapshot.ReplicaSets
	available, up = k8s.AvailablePods(rss), k8s.PodsUp(rss)
	for _, rs := range rss {
		if h := rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; h != "" && rs.Spec.Replicas != nil {
			sizes[h] += *rs.Spec.Replicas
		}
	}
	return available, sizes, up, nil
}

// gatedSizes is each template's replicas through a sync: as just read, and no more than the
// sync's plan leaves it (after, from the workflow).
func gatedSizes(now, after map[string]int32) map[string]int32 {
	out := make(map[string]int32, len(now))
	for h, n := range now {
		out[h] = n
		if v, ok := after[h]; ok {
			out[h] = min(n, v)
		}
	}
	return out
}

// setSelector points a Service's selector at a pod-template-hash ("" removes the key, giving
// the Service back its own selector). The one Service write; callers have passed the gate.
func (a *Activities) setSelector(ctx context.Context, services typedcorev1.ServiceInterface, svc *corev1.Service, hash string) (*corev1.Service, error) {
	cur, has := svc.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey]
	if (hash == "" && !has) || (hash != "" && cur == hash) {
		return svc, nil
	}
	obj := svc.DeepCopy()
	obj.ManagedFields = nil
	if obj.Spec.Selector == nil {
		obj.Spec.Selector = map[string]string{}
	}
	if hash == "" {
		delete(obj.Spec.Selector, appsv1.DefaultDeploymentUniqueLabelKey)
	} else {
		obj.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	}
	out, err := services.Update(ctx, obj, metav1.UpdateOptions{FieldManager: fieldManager})
	a.countWrite("update", "services", err)
	if err != nil {
		what := fmt.Sprintf("point service %s/%s at pod-template-hash %s", svc.Namespace, svc.Name, hash)
		if hash == "" {
			what = fmt.Sprintf("give service %s/%s its selector back", svc.Namespace, svc.Name)
		}
		return nil, classify(what, err)
	}
	return out, nil
}

// writeRouteObject writes a route the gate let through. The one HTTPRoute write.
func (a *Activities) writeRouteObject(ctx context.Context, routes dynamic.ResourceInterface, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	out, err := routes.Update(ctx, obj, metav1.UpdateOptions{FieldManager: fieldManager})
	a.countWrite("update", "httproutes", err)
	return out, err
}

// gateSwitch is a blue-green Service switch through the gate (k8s.GateSelector): the active
// Service moves only to a fully available template. It returns why it holds ("" when the
// switch may be made).
func gateSwitch(sw ServiceSwitch, available, sizes map[string]int32) string {
	if sw.Hash == "" {
		return ""
	}
	return k8s.GateSelector(sw.Service, sw.Hash, sw.Active, available, sizes)
}
