package activities

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/temporal-rollout/rollout/k8s"
)

// ParkInput names the Deployment to park or release, with the events to record once done.
type ParkInput struct {
	Deployment DeploymentRef `json:"deployment"`
	Events     []k8s.Event   `json:"events,omitempty"`
}

// ParkResult says whether the Deployment changed, and at which version.
type ParkResult struct {
	Changed bool                `json:"changed"`
	Wrote   []k8s.ObjectVersion `json:"wrote,omitempty"`
	// Skipped says why nothing was written (the Deployment no longer opts in, say).
	Skipped string `json:"skipped,omitempty"`
}

// Why ParkDeployment or ReleaseDeployment wrote nothing to the Deployment (ParkResult.Skipped)
// in the cases that leave its ReplicaSets alone too.
const (
	skippedGone     = "deployment is gone"
	skippedOptedOut = "it no longer opts in"
)

// ParkDeployment (managed mode) parks an opted-in Deployment: spec.paused true and strategy
// Recreate, the user's paused flag and strategy saved in the temporal-rollout.io/parked
// annotation (k8s.Park), so kube-controller-manager's Deployment controller runs only its
// paused sync. A parked Deployment whose parked fields someone changed is parked again, taking
// their values as the user's. It reads the Deployment live and writes with its UID and
// resourceVersion as preconditions, retrying conflicts on a fresh read; it does nothing to a
// Deployment that no longer opts in or whose strategy cannot be parked.
func (a *Activities) ParkDeployment(ctx context.Context, in ParkInput) (ParkResult, error) {
	res, err := a.parkDeployment(ctx, in)
	if err != nil || res.Skipped == skippedGone || res.Skipped == skippedOptedOut {
		return res, err
	}
	return res, a.markReplicaSets(ctx, in.Deployment, &res)
}

func (a *Activities) parkDeployment(ctx context.Context, in ParkInput) (ParkResult, error) {
	return a.rewriteDeployment(ctx, in, "park", func(d *appsv1.Deployment) (string, error) {
		if !k8s.WantsManaged(d) {
			return skippedOptedOut, nil
		}
		if _, parked, _ := k8s.Parked(d); !parked {
			if why := k8s.CanPark(d.Spec.Strategy, a.ManagedGuard); why != "" {
				return why, nil
			}
		} else if !k8s.ParkedDrift(d) {
			return "already parked", nil
		}
		return "", k8s.Park(d)
	})
}

// ReleaseDeployment (managed mode) hands a parked Deployment back to kube-controller-manager:
// the user's paused flag and strategy written back and the parked annotation removed, in one
// update that changes no pod template (no pod restarts). Then each of its ReplicaSets loses
// our marks: the copied parked annotation, and a withheld desired-replicas becomes the
// Deployment's replicas again. An unparked or deleted Deployment needs nothing.
func (a *Activities) ReleaseDeployment(ctx context.Context, in ParkInput) (ParkResult, error) {
	res, err := a.rewriteDeployment(ctx, in, "release", func(d *appsv1.Deployment) (string, error) {
		if _, parked, _ := k8s.Parked(d); !parked {
			return "not parked", nil
		}
		if err := k8s.Unpark(d); err != nil {
			return "", err
		}
		return "", nil
	})
	if err != nil || res.Skipped == skippedGone {
		return res, err
	}
	return res, a.unmarkReplicaSets(ctx, in.Deployment, &res)
}

// rewriteDeployment reads the Deployment live, lets change mutate it (or say why not), and
// updates it with resourceVersion as precondition, retrying conflicts on a fresh read.
func (a *Activities) rewriteDeployment(ctx context.Context, in ParkInput, what string, change func(*appsv1.Deployment) (string, error)) (ParkResult, error) {
	ref := in.Deployment
	dc := a.Client.AppsV1().Deployments(ref.Namespace)
	for i := 0; ; i++ {
		d, err := dc.Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && ref.UID != "" && d.UID != ref.UID) {
			return ParkResult{Skipped: skippedGone}, nil
		}
		if err != nil {
			return ParkResult{}, classify("get deployment "+ref.String(), err)
		}
		why, err := change(d)
		if err != nil {
			return ParkResult{}, nonRetryable(ErrInvalid, "%s deployment %s: %v", what, ref, err)
		}
		if why != "" {
			return ParkResult{Skipped: why}, nil
		}
		d.ManagedFields = nil
		updated, err := dc.Update(ctx, d, metav1.UpdateOptions{FieldManager: fieldManager})
		a.countWrite("update", "deployments", err)
		if err == nil {
			a.record(refOf(updated), in.Events)
			return ParkResult{Changed: true, Wrote: []k8s.ObjectVersion{k8s.DeploymentVersion(updated)}}, nil
		}
		if !apierrors.IsConflict(err) || i >= conflictRetries {
			return ParkResult{}, classify(fmt.Sprintf("%s deployment %s", what, ref), err)
		}
	}
}

// markReplicaSets puts the parked annotation on every ReplicaSet the Deployment controls that
// lacks it (those created before it opted in; later ones get it copied from the Deployment, by
// either controller): deploy/managed/guard.yaml's ReplicaSet policy keys on it.
func (a *Activities) markReplicaSets(ctx context.Context, ref DeploymentRef, res *ParkResult) error {
	return a.annotateReplicaSets(ctx, ref, res, "mark", func(d *appsv1.Deployment, rs *appsv1.ReplicaSet) map[string]any {
		mark, parked := d.Annotations[k8s.ParkedAnnotation]
		if _, ok := rs.Annotations[k8s.ParkedAnnotation]; ok || !parked {
			return nil
		}
		return map[string]any{k8s.ParkedAnnotation: mark}
	})
}

// unmarkReplicaSets removes managed mode's marks from the ReplicaSets the Deployment controls:
// the parked annotation, the managed one when the Deployment no longer has it, and a withheld
// desired-replicas, which becomes the Deployment's replicas.
func (a *Activities) unmarkReplicaSets(ctx context.Context, ref DeploymentRef, res *ParkResult) error {
	return a.annotateReplicaSets(ctx, ref, res, "unmark", func(d *appsv1.Deployment, rs *appsv1.ReplicaSet) map[string]any {
		annotations := map[string]any{}
		if _, ok := rs.Annotations[k8s.ParkedAnnotation]; ok {
			annotations[k8s.ParkedAnnotation] = nil
		}
		if _, ok := d.Annotations[k8s.ManagedAnnotation]; !ok {
			if _, ok := rs.Annotations[k8s.ManagedAnnotation]; ok {
				annotations[k8s.ManagedAnnotation] = nil
			}
		}
		if rs.Annotations[k8s.DesiredReplicasAnnotation] == k8s.WithheldReplicas {
			replicas := int32(1)
			if d.Spec.Replicas != nil {
				replicas = *d.Spec.Replicas
			}
			annotations[k8s.DesiredReplicasAnnotation] = fmt.Sprint(replicas)
		}
		return annotations
	})
}

// annotateReplicaSets merge-patches, with a UID precondition, the annotations change returns
// (nil values delete) onto each ReplicaSet the Deployment, read live, controls. A ReplicaSet
// gone or replaced meanwhile is skipped.
func (a *Activities) annotateReplicaSets(ctx context.Context, ref DeploymentRef, res *ParkResult, what string,
	change func(*appsv1.Deployment, *appsv1.ReplicaSet) map[string]any) error {
	d, err := a.Client.AppsV1().Deployments(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return classify("get deployment "+ref.String(), err)
	}
	rss, err := a.Client.AppsV1().ReplicaSets(ref.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return classify("list replicasets of deployment "+ref.String(), err)
	}
	for i := range rss.Items {
		rs := &rss.Items[i]
		if owner := metav1.GetControllerOf(rs); owner == nil || owner.UID != d.UID {
			continue
		}
		annotations := change(d, rs)
		if len(annotations) == 0 {
			continue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": rs.UID, "annotations": annotations}})
		if err != nil {
			return nonRetryable(ErrInvalid, "%s replicaset %s/%s: %v", what, ref.Namespace, rs.Name, err)
		}
		updated, err := a.Client.AppsV1().ReplicaSets(ref.Namespace).Patch(ctx, rs.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
		a.countWrite("patch", "replicasets", err)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return classify(what+" replicaset "+ref.Namespace+"/"+rs.Name, err)
		}
		res.Wrote = append(res.Wrote, k8s.ReplicaSetVersion(updated))
	}
	return nil
}
