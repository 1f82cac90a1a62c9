package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsclient "k8s.io/client-go/kubernetes/typed/apps/v1"

	"github.com/temporal-rollout/rollout/k8s"
	"github.com/temporal-rollout/rollout/kube"
)

// DeploymentWriteInput is the whole desired Deployment, as decided from a snapshot.
type DeploymentWriteInput struct {
	// Command: the write carries out a user's command (a sync that rolls back), under the
	// commands' client budget (see Activities.CommandClient).
	Command    bool               `json:"command,omitempty"`
	Deployment *appsv1.Deployment `json:"deployment"`
	Events     []k8s.Event        `json:"events,omitempty"`
	// Strict (UpdateDeploymentStatus): the Deployment's resourceVersion is the write's
	// precondition as decided. A Deployment written since, by anyone, makes the write stale
	// (ErrStale) instead of retried on a fresh read: for a refresh that must never land over a
	// newer status (the watcher's k8s.TemplateChangeStatus, which keeps observedGeneration).
	Strict bool `json:"strict,omitempty"`
	// Spent: how long the sync has run in its workflow task before this write (see
	// Activities.busy).
	Spent time.Duration `json:"spent,omitempty"`
}

// DeploymentWriteResult reports the generation after the write.
type DeploymentWriteResult struct {
	Wrote []k8s.ObjectVersion `json:"wrote,omitempty"`
}

// UpdateDeploymentStatus writes status and the revision annotation (a status update keeps
// metadata annotations) onto the Deployment as it is now, with its resourceVersion as
// precondition, while its generation and UID are the decision's: the status is computed from
// the ReplicaSets and the spec, so labels and annotations other clients change meanwhile do not
// make it stale, and a conflict they cause is retried on a fresh read. A new generation is
// stale. With Strict, any write since the decision is stale.
func (a *Activities) UpdateDeploymentStatus(ctx context.Context, in DeploymentWriteInput) (DeploymentWriteResult, error) {
	if in.Command {
		ctx = asCommand(ctx)
	}
	wctx, err := a.busy(ctx, in.Command, in.Spent)
	if err != nil {
		return DeploymentWriteResult{}, err
	}
	want := in.Deployment
	if want == nil || want.Name == "" {
		return DeploymentWriteResult{}, nonRetryable(ErrInvalid, "update status of deployment: no deployment given")
	}
	var have *appsv1.Deployment
	if a.Cache != nil {
		if d, err := a.Cache.Deployment(want.Namespace, want.Name); err == nil && d.UID == want.UID && d.ResourceVersion == want.ResourceVersion {
			have = d
		}
	}
	if in.Strict && have == nil {
		// The cache holds another version (or none): the write would land on a Deployment
		// the decision did not see.
		have = want
	}
	updated, err := a.writeStatus(ctx, wctx, want.Namespace, want.Name, have, in.Strict, func(obj *appsv1.Deployment) (bool, error) {
		if obj.UID != want.UID || obj.Generation != want.Generation {
			return false, nonRetryable(ErrStale, "deployment %s/%s changed since the decision (generation %d, decided on %d)", want.Namespace, want.Name, obj.Generation, want.Generation)
		}
		obj.Status = want.Status
		for _, k := range []string{k8s.RevisionAnnotation, k8s.StableAnnotation} {
			if v, ok := want.Annotations[k]; ok {
				if obj.Annotations == nil {
					obj.Annotations = map[string]string{}
				}
				obj.Annotations[k] = v
			}
		}
		return true, nil
	})
	if err != nil {
		return DeploymentWriteResult{}, err
	}
	a.record(refOf(want), in.Events)
	return DeploymentWriteResult{Wrote: []k8s.ObjectVersion{k8s.DeploymentVersion(updated)}}, nil
}

// updateStatusWith reads the Deployment live, applies mutate and writes its status (see
// writeStatus), retrying conflicts: the create path's collision count and FailedCreate
// condition, which are not a sync's decision.
func (a *Activities) updateStatusWith(ctx context.Context, ref DeploymentRef, mutate func(*appsv1.Deployment) bool) error {
	_, err := a.writeStatus(ctx, ctx, ref.Namespace, ref.Name, nil, false, func(d *appsv1.Deployment) (bool, error) {
		if ref.UID != "" && d.UID != ref.UID {
			return false, nonRetryable(ErrStale, "update status of deployment %s: uid changed to %s", ref, d.UID)
		}
		return mutate(d), nil
	})
	return err
}

// writeStatus is the one writer of a Deployment's status (the deployments/status
// subresource): the syncs' status writes and the wait's and the watcher's refreshes
// (UpdateDeploymentStatus), and the create path's (updateStatusWith). It writes onto the
// Deployment as it is now, have when given (the cache's copy at the decision's version), else
// read live, with that object's resourceVersion as precondition, as our field manager, and
// counts the write (Activities.countWrite). set puts the status on a copy (managedFields
// cleared: they stay the server's), or says there is nothing to write (nil, nil), or that the
// Deployment is not the one decided on (its error is returned as is). A conflict is retried on
// a fresh read, at most conflictRetries times; with strict it is stale (ErrStale): the write
// lands on have or not at all. wctx carries the write's client-budget token (Activities.busy);
// a retry is the same write and uses ctx.
func (a *Activities) writeStatus(ctx, wctx context.Context, namespace, name string, have *appsv1.Deployment, strict bool,
	set func(*appsv1.Deployment) (bool, error)) (*appsv1.Deployment, error) {
	what := "update status of deployment " + namespace + "/" + name
	dc := a.client(ctx).AppsV1().Deployments(namespace)
	for i := 0; ; i++ {
		if have == nil {
			fresh, err := dc.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, classify("get deployment "+namespace+"/"+name, err)
			}
			have = fresh
		}
		obj := have.DeepCopy()
		obj.ManagedFields = nil
		if write, err := set(obj); err != nil || !write {
			return nil, err
		}
		updated, err := dc.UpdateStatus(wctx, obj, metav1.UpdateOptions{FieldManager: fieldManager})
		if refused := writeRefused(what, err); refused != nil && wctx != ctx {
			return nil, refused
		}
		wctx = ctx // a conflict's retry is the same write, its token already spent
		if errors.Is(err, kube.ErrBudgetBusy) {
			// Not sent (kube.IfBudgetWithin): not a write.
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		a.countWrite("update", "deployments/status", err)
		if err == nil {
			return updated, nil
		}
		if strict && apierrors.IsConflict(err) {
			return nil, nonRetryable(ErrStale, "deployment %s/%s written since the decision (resourceVersion %s): %v", namespace, name, have.ResourceVersion, err)
		}
		if !apierrors.IsConflict(err) || i >= conflictRetries {
			return nil, classify(what, err)
		}
		have = nil
	}
}

// RollbackDeployment writes the rolled-back template and annotations and clears the
// deprecated rollback annotation, then records the rollback event, with the snapshot's
// resourceVersion as precondition. A conflict is stale: the annotations were decided from a
// Deployment that has changed since (a concurrent edit is not overwritten).
func (a *Activities) RollbackDeployment(ctx context.Context, in DeploymentWriteInput) (DeploymentWriteResult, error) {
	ctx = asCommand(ctx)
	return a.writeDeployment(ctx, in, "roll back", "deployments",
		func(dc appsclient.DeploymentInterface, obj *appsv1.Deployment) (*appsv1.Deployment, error) {
			return dc.Update(ctx, obj, metav1.UpdateOptions{FieldManager: fieldManager})
		})
}

// writeDeployment writes the desired Deployment with its snapshot's resourceVersion; events
// are recorded once the write succeeds.
func (a *Activities) writeDeployment(ctx context.Context, in DeploymentWriteInput, what, resource string,
	write func(appsclient.DeploymentInterface, *appsv1.Deployment) (*appsv1.Deployment, error)) (DeploymentWriteResult, error) {
	want := in.Deployment
	if want == nil || want.Name == "" {
		return DeploymentWriteResult{}, nonRetryable(ErrInvalid, "%s deployment: no deployment given", what)
	}
	obj := want.DeepCopy()
	// managedFields stay the server's (an update that carries them would replace them).
	obj.ManagedFields = nil
	// Put back what the recorded decision left out (see redactSnapshot).
	if err := a.restoreDeploymentWrite(ctx, obj); err != nil {
		return DeploymentWriteResult{}, err
	}
	updated, err := write(a.client(ctx).AppsV1().Deployments(want.Namespace), obj)
	a.countWrite("update", resource, err)
	if err != nil {
		return DeploymentWriteResult{}, classify(what+" deployment "+want.Namespace+"/"+want.Name, err)
	}
	a.record(refOf(want), in.Events)
	return DeploymentWriteResult{Wrote: []k8s.ObjectVersion{k8s.DeploymentVersion(updated)}}, nil
}

// RecordEventInput is events to record on the Deployment.
type RecordEventInput struct {
	Deployment DeploymentRef `json:"deployment"`
	Events     []k8s.Event   `json:"events"`
}

// RecordEvent records events that come with no write (SelectingAll, an invalid selector).
func (a *Activities) RecordEvent(_ context.Context, in RecordEventInput) error {
	a.record(in.Deployment, in.Events)
	return nil
}

// SetPausedInput asks for spec.paused to be set to Paused.
type SetPausedInput struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Paused    bool   `json:"paused"`
}

// SetPausedResult reports whether the spec changed.
type SetPausedResult struct {
	Changed bool                `json:"changed"`
	Wrote   []k8s.ObjectVersion `json:"wrote,omitempty"`
}

// SetPaused patches spec.paused, so kubectl and Temporal show the same truth. Patching an
// absolute value is idempotent.
func (a *Activities) SetPaused(ctx context.Context, in SetPausedInput) (SetPausedResult, error) {
	ctx = asCommand(ctx)
	dc := a.client(ctx).AppsV1().Deployments(in.Namespace)
	d, err := dc.Get(ctx, in.Name, metav1.GetOptions{})
	if err != nil {
		return SetPausedResult{}, classify("get deployment "+in.Namespace+"/"+in.Name, err)
	}
	if ps, parked, err := k8s.Parked(d); parked {
		// Managed mode: the Deployment is parked (spec.paused is ours); the user's paused
		// flag is the one saved in the parked annotation.
		if err != nil {
			return SetPausedResult{}, nonRetryable(ErrInvalid, "set paused=%t on deployment %s/%s: %v", in.Paused, in.Namespace, in.Name, err)
		}
		if ps.Paused == in.Paused {
			return SetPausedResult{}, nil
		}
		ps.Paused = in.Paused
		return a.setParked(ctx, d, ps, fmt.Sprintf("set paused=%t on parked deployment %s/%s", in.Paused, in.Namespace, in.Name))
	}
	if d.Spec.Paused == in.Paused {
		return SetPausedResult{}, nil
	}
	patch := fmt.Sprintf(`{"metadata":{"uid":%q},"spec":{"paused":%t}}`, d.UID, in.Paused)
	updated, err := dc.Patch(ctx, in.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: fieldManager})
	a.countWrite("patch", "deployments", err)
	if err != nil {
		return SetPausedResult{}, classify(fmt.Sprintf("set paused=%t on deployment %s/%s", in.Paused, in.Namespace, in.Name), err)
	}
	return SetPausedResult{Changed: true, Wrote: []k8s.ObjectVersion{k8s.DeploymentVersion(updated)}}, nil
}

// SetImageInput sets container images, by container name.
type SetImageInput struct {
	Namespace  string            `json:"namespace"`
	Name       string            `json:"name"`
	Images     map[string]string `json:"images"`
	WorkflowID string            `json:"workflowID,omitempty"`
}

// SetImageResult reports whether the template changed.
type SetImageResult struct {
	Changed     bool                `json:"changed"`
	ChangeCause string              `json:"changeCause,omitempty"`
	Wrote       []k8s.ObjectVersion `json:"wrote,omitempty"`
}

// SetImage applies new images to the Deployment's containers (and init containers) and
// records the change as kubernetes.io/change-cause, which `kubectl rollout history` shows. An
// unknown container is invalid input.
func (a *Activities) SetImage(ctx context.Context, in SetImageInput) (SetImageResult, error) {
	if len(in.Images) == 0 {
		return SetImageResult{}, nil
	}
	ctx = asCommand(ctx)
	dc := a.client(ctx).AppsV1().Deployments(in.Namespace)
	for i := 0; ; i++ {
		d, err := dc.Get(ctx, in.Name, metav1.GetOptions{})
		if err != nil {
			return SetImageResult{}, classify("get deployment "+in.Namespace+"/"+in.Name, err)
		}
		changed := false
		names := make([]string, 0, len(in.Images))
		for name := range in.Images {
			names = append(names, name)
		}
		sort.Strings(names)
		var parts []string
		for _, name := range names {
			image := in.Images[name]
			if strings.TrimSpace(image) == "" {
				return SetImageResult{}, nonRetryable(ErrInvalid, "set image on deployment %s/%s: empty image for container %q", in.Namespace, in.Name, name)
			}
			found := false
			for _, list := range [][]corev1.Container{d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers} {
				for j := range list {
					if list[j].Name == name {
						found = true
						if list[j].Image != image {
							list[j].Image = image
							changed = true
						}
					}
				}
			}
			if !found {
				return SetImageResult{}, nonRetryable(ErrInvalid, "set image on deployment %s/%s: no container named %q", in.Namespace, in.Name, name)
			}
			parts = append(parts, name+"="+image)
		}
		if !changed {
			return SetImageResult{}, nil
		}
		cause := "temporal workflow " + in.WorkflowID + ": set image " + strings.Join(parts, ",")
		if in.WorkflowID == "" {
			cause = "set image " + strings.Join(parts, ",")
		}
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[k8s.ChangeCauseAnnotation] = cause
		updated, err := dc.Update(ctx, d, metav1.UpdateOptions{FieldManager: fieldManager})
		a.countWrite("update", "deployments", err)
		if err == nil {
			return SetImageResult{Changed: true, ChangeCause: cause, Wrote: []k8s.ObjectVersion{k8s.DeploymentVersion(updated)}}, nil
		}
		if !apierrors.IsConflict(err) || i >= conflictRetries {
			return SetImageResult{}, classify("set image on deployment "+in.Namespace+"/"+in.Name, err)
		}
	}
}

// setParked writes the parked annotation with ps as the user's spec (a merge patch with the
// Deployment's UID and resourceVersion as preconditions).
func (a *Activities) setParked(ctx context.Context, d *appsv1.Deployment, ps k8s.ParkedSpec, what string) (SetPausedResult, error) {
	c := d.DeepCopy()
	if err := k8s.ParkAs(c, ps); err != nil {
		return SetPausedResult{}, nonRetryable(ErrInvalid, "%s: %v", what, err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": d.UID, "resourceVersion": d.ResourceVersion,
		"annotations": map[string]string{k8s.ParkedAnnotation: c.Annotations[k8s.ParkedAnnotation]}}})
	if err != nil {
		return SetPausedResult{}, nonRetryable(ErrInvalid, "%s: %v", what, err)
	}
	updated, err := a.client(ctx).AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	a.countWrite("patch", "deployments", err)
	if err != nil {
		return SetPausedResult{}, classify(what, err)
	}
	return SetPausedResult{Changed: true, Wrote: []k8s.ObjectVersion{k8s.DeploymentVersion(updated)}}, nil
}
