package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/temporal-rollout/rollout/k8s"
)

const conflictRetries = 5

// ClaimInput lists the ReplicaSets to adopt and to release.
type ClaimInput struct {
	// Command: the write carries out a user's command (a sync that rolls back), under the
	// commands' client budget (see Activities.CommandClient).
	Command    bool            `json:"command,omitempty"`
	Deployment DeploymentRef   `json:"deployment"`
	Adopt      []k8s.ObjectRef `json:"adopt,omitempty"`
	Release    []k8s.ObjectRef `json:"release,omitempty"`
}

// ClaimResult reports what was adopted and released.
type ClaimResult struct {
	Adopted  []string            `json:"adopted,omitempty"`
	Released []string            `json:"released,omitempty"`
	Wrote    []k8s.ObjectVersion `json:"wrote,omitempty"`
}

// ClaimReplicaSets adopts orphans by patching in our controllerRef and releases ReplicaSets
// that no longer match. Before adopting it reads the Deployment uncached and refuses if the UID
// changed or it is being deleted (kubernetes#42639). Both patches carry the ReplicaSet's UID as
// a precondition.
func (a *Activities) ClaimReplicaSets(ctx context.Context, in ClaimInput) (ClaimResult, error) {
	if in.Command {
		ctx = asCommand(ctx)
	}
	var res ClaimResult
	rsClient := a.client(ctx).AppsV1().ReplicaSets(in.Deployment.Namespace)
	if len(in.Adopt) > 0 {
		fresh, err := a.client(ctx).AppsV1().Deployments(in.Deployment.Namespace).Get(ctx, in.Deployment.Name, metav1.GetOptions{})
		if err != nil {
			return res, classify("recheck deployment "+in.Deployment.String()+" before adoption", err)
		}
		if fresh.UID != in.Deployment.UID {
			return res, nonRetryable(ErrStale, "adopt replicasets: deployment %s is gone: got uid %s, want %s", in.Deployment, fresh.UID, in.Deployment.UID)
		}
		if fresh.DeletionTimestamp != nil {
			return res, nonRetryable(ErrStale, "adopt replicasets: deployment %s is being deleted", in.Deployment)
		}
		for _, r := range in.Adopt {
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
				"ownerReferences": []metav1.OwnerReference{*metav1.NewControllerRef(fresh, appsv1.SchemeGroupVersion.WithKind("Deployment"))},
				"uid":             r.UID,
			}})
			patched, err := rsClient.Patch(ctx, r.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
			a.countWrite("patch", "replicasets", err)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return res, classify("adopt replicaset "+in.Deployment.Namespace+"/"+r.Name, err)
			}
			res.Adopted = append(res.Adopted, r.Name)
			res.Wrote = append(res.Wrote, k8s.ReplicaSetVersion(patched))
		}
	}
	for _, r := range in.Release {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"ownerReferences": []map[string]string{{"$patch": "delete", "uid": string(in.Deployment.UID)}},
			"uid":             r.UID,
		}})
		patched, err := rsClient.Patch(ctx, r.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
		a.countWrite("patch", "replicasets", err)
		if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
			continue
		}
		if err != nil {
			return res, classify("release replicaset "+in.Deployment.Namespace+"/"+r.Name, err)
		}
		res.Released = append(res.Released, r.Name)
		res.Wrote = append(res.Wrote, k8s.ReplicaSetVersion(patched))
	}
	return res, nil
}

// CreateInput is the new ReplicaSet, built by the workflow.
type CreateInput struct {
	// Command: the write carries out a user's command (a sync that rolls back), under the
	// commands' client budget (see Activities.CommandClient).
	Command    bool               `json:"command,omitempty"`
	Deployment DeploymentRef      `json:"deployment"`
	ReplicaSet *appsv1.ReplicaSet `json:"replicaSet"`
	Events     []k8s.Event        `json:"events,omitempty"`
	// ProgressDeadline is set when the Deployment has one; a create error is then recorded as
	// the Progressing condition.
	ProgressDeadline bool `json:"progressDeadline,omitempty"`
	// ThenStatus, when set, is the sync's status write, made once the ReplicaSet exists.
	ThenStatus *appsv1.Deployment `json:"thenStatus,omitempty"`
	// Spent: how long the sync has run in its workflow task before this write (see
	// Activities.busy).
	Spent time.Duration `json:"spent,omitempty"`
}

// CreateResult tells what happened: created, found already there (ours, same template), or a
// hash collision that bumped status.collisionCount.
type CreateResult struct {
	Name      string `json:"name"`
	Created   bool   `json:"created"`
	Existed   bool   `json:"existed,omitempty"`
	Collision bool   `json:"collision,omitempty"`
	// Wrote lists the objects written, at their new resourceVersions.
	Wrote []k8s.ObjectVersion `json:"wrote,omitempty"`
}

// CreateReplicaSet creates the new ReplicaSet. If the name exists with our controllerRef and
// the same template, that one is it. If it exists with another template, it is a hash
// collision: status.collisionCount goes up so the next hash differs.
func (a *Activities) CreateReplicaSet(ctx context.Context, in CreateInput) (CreateResult, error) {
	if in.Command {
		ctx = asCommand(ctx)
	}
	wctx, err := a.busy(ctx, in.Command, in.Spent)
	if err != nil {
		return CreateResult{}, err
	}
	rs := in.ReplicaSet
	if rs == nil || rs.Name == "" || rs.Namespace != in.Deployment.Namespace {
		return CreateResult{}, nonRetryable(ErrInvalid, "create replicaset: invalid replicaset for deployment %s", in.Deployment)
	}
	res := CreateResult{Name: rs.Name}
	if _, redacted := redactedPlaceholder(&rs.Spec.Template); redacted {
		// The recorded decision holds a placeholder: the template is the Deployment's.
		rs = rs.DeepCopy()
		if err := a.restoreFromDeployment(ctx, in.Deployment, &rs.Spec.Template); err != nil {
			return res, err
		}
	}
	created, err := a.client(ctx).AppsV1().ReplicaSets(rs.Namespace).Create(wctx, rs, metav1.CreateOptions{FieldManager: fieldManager})
	if refused := writeRefused("create replicaset "+rs.Namespace+"/"+rs.Name, err); refused != nil {
		return res, refused
	}
	a.countWrite("create", "replicasets", err)
	switch {
	case err == nil:
		res.Created = true
		res.Wrote = append(res.Wrote, k8s.ReplicaSetVersion(created))
		a.record(in.Deployment, in.Events)
		return res, a.thenStatus(ctx, in.ThenStatus, &res.Wrote)
	case apierrors.IsAlreadyExists(err):
		existing, gerr := a.client(ctx).AppsV1().ReplicaSets(rs.Namespace).Get(ctx, rs.Name, metav1.GetOptions{})
		if gerr != nil {
			return res, classify("get existing replicaset "+rs.Namespace+"/"+rs.Name, gerr)
		}
		if ref := metav1.GetControllerOf(existing); ref != nil && ref.UID == in.Deployment.UID && k8s.EqualIgnoreHash(&rs.Spec.Template, &existing.Spec.Template) {
			res.Existed = true
			res.Wrote = append(res.Wrote, k8s.ReplicaSetVersion(existing))
			return res, a.thenStatus(ctx, in.ThenStatus, &res.Wrote)
		}
		if err := a.bumpCollisionCount(ctx, in.Deployment); err != nil {
			return res, err
		}
		res.Collision = true
		return res, nil
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return res, temporal.NewNonRetryableApplicationError("create replicaset: namespace is terminating", ErrStale, err)
	case apierrors.IsServerTimeout(err), apierrors.IsTooManyRequests(err), apierrors.IsTimeout(err), apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err):
		return res, fmt.Errorf("create replicaset %s/%s: %w", rs.Namespace, rs.Name, err)
	}
	msg := fmt.Sprintf("Failed to create new replica set %q: %v", rs.Name, err)
	if in.ProgressDeadline {
		_ = a.updateStatusWith(ctx, in.Deployment, func(d *appsv1.Deployment) bool {
			k8s.SetCondition(&d.Status, k8s.NewCondition(appsv1.DeploymentProgressing, corev1.ConditionFalse, k8s.FailedRSCreateReason, msg, metav1.Now().Rfc3339Copy()))
			return true
		})
	}
	a.record(in.Deployment, []k8s.Event{{Type: corev1.EventTypeWarning, Reason: k8s.FailedRSCreateReason, Message: msg}})
	return res, temporal.NewNonRetryableApplicationError(msg, ErrCreateFailed, err)
}

// restoreFromDeployment fills a placeholder template with the Deployment's template it stands
// for, read from the cache or, when the cache holds another one, live.
func (a *Activities) restoreFromDeployment(ctx context.Context, ref DeploymentRef, t *corev1.PodTemplateSpec) error {
	if a.Cache != nil {
		if d, err := a.Cache.Deployment(ref.Namespace, ref.Name); err == nil && d.UID == ref.UID && a.digester().restoreTemplate(t, &d.Spec.Template) {
			return nil
		}
	}
	d, err := a.client(ctx).AppsV1().Deployments(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return classify("get deployment "+ref.String(), err)
	}
	if (ref.UID != "" && d.UID != ref.UID) || !a.digester().restoreTemplate(t, &d.Spec.Template) {
		return nonRetryable(ErrStale, "create replicaset for deployment %s: the template changed since the decision", ref)
	}
	return nil
}

func (a *Activities) bumpCollisionCount(ctx context.Context, ref DeploymentRef) error {
	return a.updateStatusWith(ctx, ref, func(d *appsv1.Deployment) bool {
		if d.Status.CollisionCount == nil {
			d.Status.CollisionCount = new(int32)
		}
		*d.Status.CollisionCount++
		return true
	})
}

// WriteReplicaSetInput is the whole desired ReplicaSet; only spec.replicas,
// spec.minReadySeconds and annotations are taken from it.
type WriteReplicaSetInput struct {
	// Command: the write carries out a user's command (a sync that rolls back), under the
	// commands' client budget (see Activities.CommandClient).
	Command      bool               `json:"command,omitempty"`
	Deployment   DeploymentRef      `json:"deployment"`
	ReplicaSet   *appsv1.ReplicaSet `json:"replicaSet"`
	FromReplicas int32              `json:"fromReplicas"`
	Events       []k8s.Event        `json:"events,omitempty"`
	// ThenStatus, when set, is the sync's status write, made after the ReplicaSet write.
	ThenStatus *appsv1.Deployment `json:"thenStatus,omitempty"`
	// Spent: how long the sync has run in its workflow task before this write (see
	// Activities.busy).
	Spent time.Duration `json:"spent,omitempty"`
}

// WriteReplicaSetResult reports the replicas written and the generation they produced.
type WriteReplicaSetResult struct {
	Name     string `json:"name"`
	Replicas int32  `json:"replicas"`
	// Wrote lists the objects written, at their new resourceVersions.
	Wrote []k8s.ObjectVersion `json:"wrote,omitempty"`
}

// ScaleUpReplicaSet sets a ReplicaSet's replicas (and annotations) to an absolute target.
func (a *Activities) ScaleUpReplicaSet(ctx context.Context, in WriteReplicaSetInput) (WriteReplicaSetResult, error) {
	return a.writeReplicaSet(ctx, in)
}

// ScaleDownReplicaSet sets a ReplicaSet's replicas (and annotations) to an absolute target.
func (a *Activities) ScaleDownReplicaSet(ctx context.Context, in WriteReplicaSetInput) (WriteReplicaSetResult, error) {
	return a.writeReplicaSet(ctx, in)
}

// UpdateReplicaSet brings a ReplicaSet's annotations and minReadySeconds up to date.
func (a *Activities) UpdateReplicaSet(ctx context.Context, in WriteReplicaSetInput) (WriteReplicaSetResult, error) {
	return a.writeReplicaSet(ctx, in)
}

// writeReplicaSet is the one writer of a ReplicaSet's spec.replicas: the syncs' scale and
// update steps (ScaleUpReplicaSet, ScaleDownReplicaSet, UpdateReplicaSet) and AwaitChange's
// inline moves (moveInline). It sets a ReplicaSet's size, minReadySeconds and our annotations
// to the decided target. It writes onto the ReplicaSet as it is now (from the cache at the snapshot's version,
// else live), with that object's resourceVersion as precondition, and only while what the
// decision read of it is unchanged: its generation, spec.replicas and status counts. A change
// to those (its availability dropped, say) makes the decision stale: the workflow decides again
// on a live read, as upstream requeues on a conflict. Changes the decision did not read (other
// clients' labels and annotations) are kept, and a conflict caused by them is retried on a
// fresh read, so a busy ReplicaSet does not starve the rollout.
func (a *Activities) writeReplicaSet(ctx context.Context, in WriteReplicaSetInput) (WriteReplicaSetResult, error) {
	if in.Command {
		ctx = asCommand(ctx)
	}
	wctx, err := a.busy(ctx, in.Command, in.Spent)
	if err != nil {
		return WriteReplicaSetResult{}, err
	}
	want := in.ReplicaSet
	if want == nil || want.Name == "" || want.Spec.Replicas == nil || *want.Spec.Replicas < 0 {
		return WriteReplicaSetResult{}, nonRetryable(ErrInvalid, "write replicaset: invalid target for deployment %s", in.Deployment)
	}
	res := WriteReplicaSetResult{Name: want.Name, Replicas: *want.Spec.Replicas}
	rsc := a.client(ctx).AppsV1().ReplicaSets(want.Namespace)
	var have *appsv1.ReplicaSet
	if a.Cache != nil {
		if rs, err := a.Cache.ReplicaSet(want.Namespace, want.Name); err == nil && rs.UID == want.UID && rs.ResourceVersion == want.ResourceVersion {
			have = rs
		}
	}
	for i := 0; ; i++ {
		if have == nil {
			fresh, err := rsc.Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil {
				return res, classify("get replicaset "+want.Namespace+"/"+want.Name, err)
			}
			have = fresh
		}
		if err := sameDecisionInputs(in, have); err != nil {
			return res, err
		}
		obj := have.DeepCopy()
		obj.ManagedFields = nil
		obj.Spec.Replicas = want.Spec.Replicas
		obj.Spec.MinReadySeconds = want.Spec.MinReadySeconds
		if obj.Annotations == nil {
			obj.Annotations = map[string]string{}
		}
		for k, v := range want.Annotations {
			obj.Annotations[k] = v
		}
		updated, err := rsc.Update(wctx, obj, metav1.UpdateOptions{FieldManager: fieldManager})
		if refused := writeRefused("update replicaset "+want.Namespace+"/"+want.Name, err); refused != nil {
			return res, refused
		}
		wctx = ctx // a conflict's retry is the same write, its token already spent
		a.countWrite("update", "replicasets", err)
		if err == nil {
			res.Wrote = append(res.Wrote, k8s.ReplicaSetVersion(updated))
			a.record(in.Deployment, in.Events)
			return res, a.thenStatus(ctx, in.ThenStatus, &res.Wrote)
		}
		if !apierrors.IsConflict(err) || i >= conflictRetries {
			return res, classify(fmt.Sprintf("scale replicaset %s/%s to %d", want.Namespace, want.Name, *want.Spec.Replicas), err)
		}
		have = nil
	}
}

// sameDecisionInputs reports (as a stale error) whether the ReplicaSet changed in anything the
// decision to write in read: its UID and controller, generation, spec.replicas (the write's
// FromReplicas) and status counts.
func sameDecisionInputs(in WriteReplicaSetInput, have *appsv1.ReplicaSet) error {
	want := in.ReplicaSet
	stale := func(what string) error {
		return nonRetryable(ErrStale, "replicaset %s/%s changed since the decision: %s", want.Namespace, want.Name, what)
	}
	if have.UID != want.UID {
		return stale("replaced")
	}
	if ref := metav1.GetControllerOf(have); ref == nil || ref.UID != in.Deployment.UID {
		return stale("no longer controlled by deployment " + in.Deployment.String())
	}
	if have.Generation != want.Generation || have.Spec.Replicas == nil || *have.Spec.Replicas != in.FromReplicas {
		return stale("its spec")
	}
	hs, ws := have.Status, want.Status
	if hs.Replicas != ws.Replicas || hs.ReadyReplicas != ws.ReadyReplicas || hs.AvailableReplicas != ws.AvailableReplicas ||
		hs.ObservedGeneration != ws.ObservedGeneration || ptrValue(hs.TerminatingReplicas) != ptrValue(ws.TerminatingReplicas) {
		return stale("its status counts")
	}
	return nil
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}

// thenStatus makes a status write that rides along with a ReplicaSet write.
func (a *Activities) thenStatus(ctx context.Context, d *appsv1.Deployment, wrote *[]k8s.ObjectVersion) error {
	if d == nil {
		return nil
	}
	res, err := a.UpdateDeploymentStatus(ctx, DeploymentWriteInput{Deployment: d})
	*wrote = append(*wrote, res.Wrote...)
	return err
}

// CleanupInput lists old ReplicaSets to delete, by name and UID.
type CleanupInput struct {
	Deployment DeploymentRef   `json:"deployment"`
	Delete     []k8s.ObjectRef `json:"delete"`
}

// CleanupResult lists what was deleted.
type CleanupResult struct {
	Deleted []string            `json:"deleted,omitempty"`
	Wrote   []k8s.ObjectVersion `json:"wrote,omitempty"`
}

// CleanupReplicaSets deletes old ReplicaSets beyond revisionHistoryLimit, each with a UID
// precondition. One already gone counts as done.
func (a *Activities) CleanupReplicaSets(ctx context.Context, in CleanupInput) (CleanupResult, error) {
	var res CleanupResult
	for _, r := range in.Delete {
		uid := r.UID
		err := a.client(ctx).AppsV1().ReplicaSets(in.Deployment.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		a.countWrite("delete", "replicasets", err)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return res, classify("delete replicaset "+in.Deployment.Namespace+"/"+r.Name, err)
		}
		res.Deleted = append(res.Deleted, r.Name)
		res.Wrote = append(res.Wrote, k8s.ReplicaSetGone(r.Name))
	}
	return res, nil
}
