package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/temporal-rollout/rollout/k8s"
)

// Release activities: small, generic reads and writes on a cluster's Deployments that a
// release across many Deployments and clusters is built from. Every cluster's worker
// registers them on its task queue (contract.TaskQueueFor), so a workflow reaches a cluster by
// scheduling them there. They decide nothing: the release workflow does. The Deployment's own
// workflow still carries each rollout out (steps and all).

// RolloutAbortedReason is the reason of the Warning event the Deployment's workflow records on
// the Deployment when it aborts a rollout (the abort update, a failed analysis, a missed
// progress deadline with auto-rollback; docs/canary.md).
const RolloutAbortedReason = "RolloutAborted"

// ReleaseFieldManager is the field manager of the release activities' writes to a Deployment.
// It is not kube.FieldManager: the watcher takes a new generation written by that one alone for
// the Deployment's workflow's own write, and would not wake the workflow for the change.
const ReleaseFieldManager = "temporal-rollout-release"

// awaitDonePoll is how often AwaitRolloutDone reads the Deployment.
const awaitDonePoll = time.Second

// ReadTargetsInput names Deployments in one namespace: by name, by label selector, or both
// (the union).
type ReadTargetsInput struct {
	Namespace string   `json:"namespace"`
	Names     []string `json:"names,omitempty"`
	Selector  string   `json:"selector,omitempty"`
}

// Target is one Deployment as a release sees it.
type Target struct {
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
	Generation int64     `json:"generation"`
	// ObservedGeneration is status.observedGeneration: the generation the controller last
	// acted on.
	ObservedGeneration int64 `json:"observedGeneration"`
	// Revision is the deployment.kubernetes.io/revision annotation (0 when absent).
	Revision int64 `json:"revision"`
	// TemplateHash is the pod-template-hash of the current template (the new ReplicaSet's).
	TemplateHash string `json:"templateHash"`
	// Paused is spec.paused.
	Paused bool `json:"paused,omitempty"`
}

// ReadTargetsResult lists the Deployments found, sorted by name, and the names asked for that
// do not exist.
type ReadTargetsResult struct {
	Targets []Target `json:"targets"`
	Missing []string `json:"missing,omitempty"`
}

// ReadTargets reads the Deployments a release targets. A name that does not exist is listed in
// Missing (the release decides); no name and no selector, or a bad selector, is ErrInvalid.
func (a *Activities) ReadTargets(ctx context.Context, in ReadTargetsInput) (ReadTargetsResult, error) {
	if in.Namespace == "" || (len(in.Names) == 0 && in.Selector == "") {
		return ReadTargetsResult{}, nonRetryable(ErrInvalid, "read targets: need a namespace and names or a selector, got namespace %q, %d names, selector %q", in.Namespace, len(in.Names), in.Selector)
	}
	dc := a.client(ctx).AppsV1().Deployments(in.Namespace)
	found := map[string]*appsv1.Deployment{}
	var out ReadTargetsResult
	for _, name := range in.Names {
		d, err := dc.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			out.Missing = append(out.Missing, name)
			continue
		}
		if err != nil {
			return ReadTargetsResult{}, classify("get deployment "+in.Namespace+"/"+name, err)
		}
		found[d.Name] = d
	}
	if in.Selector != "" {
		if _, err := labels.Parse(in.Selector); err != nil {
			return ReadTargetsResult{}, nonRetryable(ErrInvalid, "read targets in %s: selector %q: %v", in.Namespace, in.Selector, err)
		}
		list, err := dc.List(ctx, metav1.ListOptions{LabelSelector: in.Selector})
		if err != nil {
			return ReadTargetsResult{}, classify(fmt.Sprintf("list deployments in %s with %q", in.Namespace, in.Selector), err)
		}
		for i := range list.Items {
			found[list.Items[i].Name] = &list.Items[i]
		}
	}
	for _, d := range found {
		out.Targets = append(out.Targets, targetOf(d))
	}
	sort.Slice(out.Targets, func(i, j int) bool { return out.Targets[i].Name < out.Targets[j].Name })
	sort.Strings(out.Missing)
	return out, nil
}

func targetOf(d *appsv1.Deployment) Target {
	rev, _ := k8s.Revision(d.Annotations)
	return Target{
		Name: d.Name, UID: d.UID, Generation: d.Generation, ObservedGeneration: d.Status.ObservedGeneration,
		Revision: rev, TemplateHash: k8s.PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount), Paused: d.Spec.Paused,
	}
}

// ApplyInput changes one Deployment's pod template: Patch (a strategic-merge patch of
// spec.template, optional) and then Images (container or init container name → image), and
// sets Annotations on the Deployment (an empty value removes one). ExpectUID, when set, pins
// the Deployment.
type ApplyInput struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Images      map[string]string `json:"images,omitempty"`
	Patch       json.RawMessage   `json:"patch,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	ExpectUID   types.UID         `json:"expectUID,omitempty"`
	// ReadBack only reads: it writes nothing and says whether the Deployment has the change
	// (HasChange), as a release asks after a change whose result was lost.
	ReadBack bool `json:"readBack,omitempty"`
}

// ApplyResult is the Deployment after the change and what it was before.
type ApplyResult struct {
	UID types.UID `json:"uid"`
	// Generation is the Deployment's generation with the change (what AwaitRolloutDone waits
	// for), and TemplateHash the changed template's pod-template-hash.
	Generation   int64  `json:"generation"`
	TemplateHash string `json:"templateHash"`
	// Changed: this call wrote the template. False when it was already the desired one: a
	// retry after a write that succeeded, or nothing to change.
	Changed bool `json:"changed"`
	// Revision and Template are the revision and pod template before the change, for
	// RestoreTemplate. When this call wrote, they are what it replaced; when the template was
	// already the desired one, they are the newest ReplicaSet with another template (its
	// revision, its template without the pod-template-hash label), or the current ones when
	// there is none.
	Revision int64                  `json:"revision"`
	Template corev1.PodTemplateSpec `json:"template"`
	// BeforeHash is Template's pod-template-hash: the ReplicaSet the Deployment keeps for it,
	// which RestoreInput.FromHash restores from.
	BeforeHash string `json:"beforeHash,omitempty"`
	// HasChange: the template is the desired one after the call. With ReadBack, false means
	// the change did not land, and Template is the current template.
	HasChange bool `json:"hasChange,omitempty"`
}

// ApplyTemplateChange applies a release's change to one Deployment, with the read's
// resourceVersion as precondition (a conflict re-reads and recomputes). It is idempotent: it
// compares the desired template with the current one, so a retry after a success does not
// change anything twice. Bad input (no change, an unknown container, a patch that does not
// apply, a template the apiserver rejects) is ErrInvalid; another UID is ErrStale; a missing
// Deployment ErrNotFound.
func (a *Activities) ApplyTemplateChange(ctx context.Context, in ApplyInput) (ApplyResult, error) {
	what := "apply template change to deployment " + in.Namespace + "/" + in.Name
	if len(in.Images) == 0 && len(in.Patch) == 0 && len(in.Annotations) == 0 {
		return ApplyResult{}, nonRetryable(ErrInvalid, "%s: no images, patch or annotations given", what)
	}
	if in.ReadBack {
		return a.readBack(ctx, in, what)
	}
	var res ApplyResult
	read, wrote, changed, err := a.updateTemplate(ctx, in.Namespace, in.Name, in.ExpectUID, in.Annotations, what, func(d *appsv1.Deployment) (corev1.PodTemplateSpec, error) {
		want, err := desiredTemplate(d.Spec.Template, in)
		if err != nil {
			return want, nonRetryable(ErrInvalid, "%s: %v", what, err)
		}
		res = ApplyResult{UID: d.UID, TemplateHash: k8s.PodTemplateHash(&want, d.Status.CollisionCount)}
		if equality.Semantic.DeepEqual(want, d.Spec.Template) {
			// Changed already (a retry after a success): the template before is the
			// previous ReplicaSet's.
			res.Revision, res.Template, res.BeforeHash, err = a.previousTemplate(ctx, d, res.TemplateHash)
			return want, err
		}
		res.Revision, _ = k8s.Revision(d.Annotations)
		res.Template = *d.Spec.Template.DeepCopy()
		res.BeforeHash = k8s.PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)
		return want, nil
	})
	if err != nil {
		return ApplyResult{}, err
	}
	res.Generation, res.HasChange = read.Generation, true
	if wrote != nil {
		res.Generation, res.Changed = wrote.Generation, changed
	}
	return res, nil
}

// readBack is ApplyTemplateChange's ReadBack: whether the Deployment has the change, and the
// template before it (as a retry after a success would report it) when it has.
func (a *Activities) readBack(ctx context.Context, in ApplyInput, what string) (ApplyResult, error) {
	what = "read back " + what
	d, err := a.client(ctx).AppsV1().Deployments(in.Namespace).Get(ctx, in.Name, metav1.GetOptions{})
	if err != nil {
		return ApplyResult{}, classify(what, err)
	}
	if in.ExpectUID != "" && d.UID != in.ExpectUID {
		return ApplyResult{}, nonRetryable(ErrStale, "%s: UID %s, expected %s (deleted and recreated?)", what, d.UID, in.ExpectUID)
	}
	want, err := desiredTemplate(d.Spec.Template, in)
	if err != nil {
		return ApplyResult{}, nonRetryable(ErrInvalid, "%s: %v", what, err)
	}
	res := ApplyResult{UID: d.UID, Generation: d.Generation, TemplateHash: k8s.PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)}
	if !equality.Semantic.DeepEqual(want, d.Spec.Template) {
		res.Revision, _ = k8s.Revision(d.Annotations)
		res.Template = *d.Spec.Template.DeepCopy()
		res.BeforeHash = res.TemplateHash
		return res, nil
	}
	res.HasChange = true
	res.Revision, res.Template, res.BeforeHash, err = a.previousTemplate(ctx, d, res.TemplateHash)
	return res, err
}

// updateTemplate reads the Deployment live, asks desired for the template it should have, and
// writes that template and the annotations set (an empty value removes one) with the read's
// resourceVersion as precondition, as ReleaseFieldManager; a conflict reads again, up to
// conflictRetries times. It returns the Deployment as last read and as written (nil when
// nothing differed), and whether the template changed.
func (a *Activities) updateTemplate(ctx context.Context, namespace, name string, expectUID types.UID, set map[string]string, what string,
	desired func(*appsv1.Deployment) (corev1.PodTemplateSpec, error)) (read, wrote *appsv1.Deployment, templateChanged bool, err error) {
	dc := a.client(ctx).AppsV1().Deployments(namespace)
	for i := 0; ; i++ {
		d, err := dc.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, false, classify(what, err)
		}
		if expectUID != "" && d.UID != expectUID {
			return nil, nil, false, nonRetryable(ErrStale, "%s: UID %s, expected %s (deleted and recreated?)", what, d.UID, expectUID)
		}
		want, err := desired(d)
		if err != nil {
			return nil, nil, false, err
		}
		templateChanged := !equality.Semantic.DeepEqual(want, d.Spec.Template)
		annotations, annotationsChanged := withAnnotations(d.Annotations, set)
		if !templateChanged && !annotationsChanged {
			return d, nil, false, nil
		}
		obj := d.DeepCopy()
		obj.ManagedFields = nil
		obj.Spec.Template = want
		obj.Annotations = annotations
		got, err := dc.Update(ctx, obj, metav1.UpdateOptions{FieldManager: ReleaseFieldManager})
		a.countWrite("update", "deployments", err)
		if apierrors.IsConflict(err) && i < conflictRetries {
			continue
		}
		if err != nil {
			return nil, nil, false, classify(what, err)
		}
		return d, got, templateChanged, nil
	}
}

// desiredTemplate is cur with in.Patch (strategic merge) and then in.Images applied.
func desiredTemplate(cur corev1.PodTemplateSpec, in ApplyInput) (corev1.PodTemplateSpec, error) {
	want := *cur.DeepCopy()
	if len(in.Patch) > 0 {
		orig, err := json.Marshal(cur)
		if err != nil {
			return want, fmt.Errorf("encode template: %w", err)
		}
		patched, err := strategicpatch.StrategicMergePatch(orig, in.Patch, corev1.PodTemplateSpec{})
		if err != nil {
			return want, fmt.Errorf("patch: %w", err)
		}
		want = corev1.PodTemplateSpec{}
		dec := json.NewDecoder(strings.NewReader(string(patched)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&want); err != nil {
			return want, fmt.Errorf("patched template: %w", err)
		}
	}
	names := make([]string, 0, len(in.Images))
	for name := range in.Images {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		image := in.Images[name]
		if strings.TrimSpace(image) == "" {
			return want, fmt.Errorf("empty image for container %q", name)
		}
		found := false
		for _, list := range [][]corev1.Container{want.Spec.InitContainers, want.Spec.Containers} {
			for j := range list {
				if list[j].Name == name {
					list[j].Image, found = image, true
				}
			}
		}
		if !found {
			return want, fmt.Errorf("no container named %q", name)
		}
	}
	return want, nil
}

// withAnnotations is have with set applied (an empty value removes the key), and whether that
// changes anything.
func withAnnotations(have, set map[string]string) (map[string]string, bool) {
	out := make(map[string]string, len(have)+len(set))
	for k, v := range have {
		out[k] = v
	}
	changed := false
	for k, v := range set {
		old, ok := have[k]
		switch {
		case v == "" && ok:
			delete(out, k)
			changed = true
		case v != "" && (!ok || old != v):
			out[k] = v
			changed = true
		}
	}
	return out, changed
}

// previousTemplate is the newest of d's ReplicaSets whose pod-template-hash is not hash: its
// revision, its template without the hash label and its hash; d's own when there is none.
func (a *Activities) previousTemplate(ctx context.Context, d *appsv1.Deployment, hash string) (int64, corev1.PodTemplateSpec, string, error) {
	list, err := a.client(ctx).AppsV1().ReplicaSets(d.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, corev1.PodTemplateSpec{}, "", classify("list replicasets in "+d.Namespace, err)
	}
	var best *appsv1.ReplicaSet
	var bestRev int64
	for i := range list.Items {
		rs := &list.Items[i]
		if !metav1.IsControlledBy(rs, d) || rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == hash {
			continue
		}
		rev, _ := k8s.Revision(rs.Annotations)
		if best == nil || rev > bestRev {
			best, bestRev = rs, rev
		}
	}
	if best == nil {
		rev, _ := k8s.Revision(d.Annotations)
		return rev, *d.Spec.Template.DeepCopy(), k8s.PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount), nil
	}
	return bestRev, replicaSetTemplate(best), best.Labels[appsv1.DefaultDeploymentUniqueLabelKey], nil
}

// replicaSetTemplate is rs's pod template as its Deployment had it: without the
// pod-template-hash label the controller added (as `kubectl rollout undo` takes it).
func replicaSetTemplate(rs *appsv1.ReplicaSet) corev1.PodTemplateSpec {
	tpl := *rs.Spec.Template.DeepCopy()
	delete(tpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	if len(tpl.Labels) == 0 {
		tpl.Labels = nil
	}
	return tpl
}

// replicaSetByHash is d's ReplicaSet with the pod-template-hash hash, or nil.
func (a *Activities) replicaSetByHash(ctx context.Context, d *appsv1.Deployment, hash string) (*appsv1.ReplicaSet, error) {
	list, err := a.client(ctx).AppsV1().ReplicaSets(d.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: appsv1.DefaultDeploymentUniqueLabelKey + "=" + hash,
	})
	if err != nil {
		return nil, classify("list replicasets in "+d.Namespace, err)
	}
	for i := range list.Items {
		if rs := &list.Items[i]; metav1.IsControlledBy(rs, d) && rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == hash {
			return rs, nil
		}
	}
	return nil, nil
}

// AwaitDoneInput waits for one Deployment's rollout of Generation (ApplyResult.Generation).
// TemplateHash (ApplyResult.TemplateHash), when set, is the template the rollout must end on:
// another one (an abort's rollback, someone else's change) ends the wait as failed.
type AwaitDoneInput struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	Generation   int64  `json:"generation"`
	TemplateHash string `json:"templateHash,omitempty"`
	// ReportHold ends the wait when whether the rollout is held by the fleet freeze
	// (k8s.HeldByFleetFreeze) differs from Held: a release stops its clock while it is.
	ReportHold bool `json:"reportHold,omitempty"`
	Held       bool `json:"held,omitempty"`
}

// AwaitDoneResult says how the rollout ended: Complete (as `kubectl rollout status` would say:
// every replica updated and available, none old, Progressing NewReplicaSetAvailable) or Failed
// with the Reason.
type AwaitDoneResult struct {
	Complete bool   `json:"complete,omitempty"`
	Failed   bool   `json:"failed,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Held (with ReportHold): the rollout is held by the fleet freeze, HoldMessage says
	// where; neither Complete nor Failed.
	Held        bool   `json:"held,omitempty"`
	HoldMessage string `json:"holdMessage,omitempty"`
	// Generation and ObservedGeneration are the Deployment's at the end.
	Generation         int64 `json:"generation"`
	ObservedGeneration int64 `json:"observedGeneration"`
}

// AwaitRolloutDone waits until the Deployment's rollout of in.Generation completes or fails,
// heartbeating what it waits for, and returns on cancellation. Failed:
//   - Progressing False with reason ProgressDeadlineExceeded;
//   - the Deployment's workflow aborted the rollout (a Warning RolloutAborted event on the
//     Deployment since this activity was scheduled; its message is the Reason);
//   - with TemplateHash, the template is no longer that one (superseded).
//
// With ReportHold it also returns when the rollout's hold by the fleet freeze starts (Held) or,
// with Held, ends.
//
// A paused Deployment keeps it waiting. A Deployment deleted or recreated (new UID) is
// ErrNotFound.
func (a *Activities) AwaitRolloutDone(ctx context.Context, in AwaitDoneInput) (AwaitDoneResult, error) {
	if in.Namespace == "" || in.Name == "" || in.Generation <= 0 {
		return AwaitDoneResult{}, nonRetryable(ErrInvalid, "await rollout: need namespace, name and generation > 0, got %q, %q, %d", in.Namespace, in.Name, in.Generation)
	}
	// Events are stamped in whole seconds.
	since := time.Now().Add(-time.Second)
	if activity.IsActivity(ctx) {
		since = activity.GetInfo(ctx).ScheduledTime.Truncate(time.Second)
	}
	var uid types.UID
	for {
		d, err := a.client(ctx).AppsV1().Deployments(in.Namespace).Get(ctx, in.Name, metav1.GetOptions{})
		if err != nil {
			return AwaitDoneResult{}, classify("await rollout of deployment "+in.Namespace+"/"+in.Name, err)
		}
		if uid == "" {
			uid = d.UID
		} else if d.UID != uid {
			return AwaitDoneResult{}, nonRetryable(ErrNotFound, "await rollout of deployment %s/%s: deleted and recreated (UID %s, was %s)", in.Namespace, in.Name, d.UID, uid)
		}
		res, waiting, err := a.rolloutDone(ctx, d, in, since)
		if err != nil {
			return AwaitDoneResult{}, err
		}
		if waiting == "" {
			return res, nil
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, waiting)
		}
		select {
		case <-ctx.Done():
			return AwaitDoneResult{}, ctx.Err()
		case <-time.After(awaitDonePoll):
		}
	}
}

// rolloutDone decides on one read of d: the result, or what it still waits for.
func (a *Activities) rolloutDone(ctx context.Context, d *appsv1.Deployment, in AwaitDoneInput, since time.Time) (AwaitDoneResult, string, error) {
	res := AwaitDoneResult{Generation: d.Generation, ObservedGeneration: d.Status.ObservedGeneration}
	aborted, err := a.abortedSince(ctx, d, since)
	if err != nil {
		return res, "", err
	}
	if aborted != "" {
		res.Failed, res.Reason = true, "aborted: "+aborted
		return res, "", nil
	}
	if in.TemplateHash != "" {
		if hash := k8s.PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount); hash != in.TemplateHash {
			res.Failed, res.Reason = true, fmt.Sprintf("superseded: the template changed (pod-template-hash %s, want %s) at generation %d", hash, in.TemplateHash, d.Generation)
			return res, "", nil
		}
	}
	if in.ReportHold {
		msg, held := k8s.HeldByFleetFreeze(d.Status)
		if held != in.Held {
			res.Held, res.HoldMessage = held, msg
			return res, "", nil
		}
	}
	st := d.Status
	if st.ObservedGeneration < in.Generation {
		return res, fmt.Sprintf("observedGeneration %d < %d", st.ObservedGeneration, in.Generation), nil
	}
	if c := k8s.GetCondition(st, appsv1.DeploymentProgressing); c != nil && c.Status == corev1.ConditionFalse && c.Reason == k8s.TimedOutReason {
		res.Failed, res.Reason = true, fmt.Sprintf("%s: %s", c.Reason, c.Message)
		return res, "", nil
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	switch {
	case st.UpdatedReplicas < want:
		return res, fmt.Sprintf("%d of %d updated", st.UpdatedReplicas, want), nil
	case st.Replicas > st.UpdatedReplicas:
		return res, fmt.Sprintf("%d old replicas pending termination", st.Replicas-st.UpdatedReplicas), nil
	case st.AvailableReplicas < st.UpdatedReplicas:
		return res, fmt.Sprintf("%d of %d updated available", st.AvailableReplicas, st.UpdatedReplicas), nil
	}
	if c := k8s.GetCondition(st, appsv1.DeploymentProgressing); c == nil || c.Reason != k8s.NewRSAvailableReason {
		reason := "<none>"
		if c != nil {
			reason = c.Reason
		}
		return res, "Progressing reason " + reason, nil
	}
	res.Complete = true
	return res, "", nil
}

// abortedSince is the message of the newest RolloutAborted event on d since the given time,
// or "".
func (a *Activities) abortedSince(ctx context.Context, d *appsv1.Deployment, since time.Time) (string, error) {
	list, err := a.client(ctx).CoreV1().Events(d.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Deployment,involvedObject.name=" + d.Name + ",reason=" + RolloutAbortedReason,
	})
	if err != nil {
		return "", classify("list events of deployment "+d.Namespace+"/"+d.Name, err)
	}
	msg, newest := "", time.Time{}
	for _, e := range list.Items {
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		if e.Reason != RolloutAbortedReason || e.InvolvedObject.Name != d.Name || (e.InvolvedObject.UID != "" && e.InvolvedObject.UID != d.UID) || at.Before(since) {
			continue
		}
		if msg == "" || at.After(newest) {
			msg, newest = e.Message, at
		}
	}
	return msg, nil
}

// RestoreInput writes a Deployment's pod template back and sets Annotations (an empty value
// removes one): Template (ApplyResult.Template), or, when FromHash is set instead, the template
// of the Deployment's ReplicaSet with that pod-template-hash (ApplyResult.BeforeHash), which the
// cluster keeps (up to revisionHistoryLimit old ones), so the caller need not carry the
// template. ExpectUID, when set, pins the Deployment.
type RestoreInput struct {
	Namespace   string                 `json:"namespace"`
	Name        string                 `json:"name"`
	Template    corev1.PodTemplateSpec `json:"template,omitzero"`
	FromHash    string                 `json:"fromHash,omitempty"`
	Annotations map[string]string      `json:"annotations,omitempty"`
	ExpectUID   types.UID              `json:"expectUID,omitempty"`
	// ExpectTemplateHash, when set, is the pod-template-hash of the template the release
	// wrote: a Deployment whose template is another one (changed since, a hotfix) is left as
	// it is and the result says Skipped. The restored template's own hash (Template's, or
	// FromHash) is accepted too (a retry after the restore).
	ExpectTemplateHash string `json:"expectTemplateHash,omitempty"`
}

// RestoreResult is the Deployment's generation with the restored template.
type RestoreResult struct {
	Generation   int64  `json:"generation"`
	TemplateHash string `json:"templateHash"`
	// Changed: this call wrote the template (false: it was that one already).
	Changed bool `json:"changed"`
	// Skipped: the template is no longer the one ExpectTemplateHash names; nothing was
	// written. Drift says what differs from the release's ("container app: image
	// nginx:1.26 → nginx:1.26-hotfix").
	Skipped bool   `json:"skipped,omitempty"`
	Drift   string `json:"drift,omitempty"`
}

// RestoreTemplate writes the pre-release template back. The Deployment's workflow then rolls
// back to the old ReplicaSet itself, since its pod-template-hash matches (no new ReplicaSet).
// Idempotent; bad input is ErrInvalid, another UID ErrStale, a FromHash whose ReplicaSet is
// gone (deleted, or cleaned up past revisionHistoryLimit) ErrNotFound.
func (a *Activities) RestoreTemplate(ctx context.Context, in RestoreInput) (RestoreResult, error) {
	what := "restore template of deployment " + in.Namespace + "/" + in.Name
	if len(in.Template.Spec.Containers) == 0 && in.FromHash == "" {
		return RestoreResult{}, nonRetryable(ErrInvalid, "%s: the template has no containers and no fromHash is given", what)
	}
	var res RestoreResult
	var skipped *appsv1.Deployment
	read, wrote, changed, err := a.updateTemplate(ctx, in.Namespace, in.Name, in.ExpectUID, in.Annotations, what, func(d *appsv1.Deployment) (corev1.PodTemplateSpec, error) {
		// The release's own template and the one to restore: with FromHash, its ReplicaSet's
		// hash (a retry after the restore has it).
		restoring := in.FromHash
		if len(in.Template.Spec.Containers) > 0 {
			restoring = k8s.PodTemplateHash(&in.Template, d.Status.CollisionCount)
		}
		if in.ExpectTemplateHash != "" {
			if cur := k8s.PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount); cur != in.ExpectTemplateHash && cur != restoring {
				res, skipped = RestoreResult{TemplateHash: restoring}, d
				return d.Spec.Template, errSkipRestore
			}
		}
		tpl := *in.Template.DeepCopy()
		if len(tpl.Spec.Containers) == 0 {
			rs, err := a.replicaSetByHash(ctx, d, in.FromHash)
			if err != nil {
				return tpl, err
			}
			if rs == nil {
				limit := "10 (the default)"
				if d.Spec.RevisionHistoryLimit != nil {
					limit = fmt.Sprint(*d.Spec.RevisionHistoryLimit)
				}
				return tpl, nonRetryable(ErrNotFound, "%s: no ReplicaSet with pod-template-hash %s is left to restore from (deleted, or cleaned up: revisionHistoryLimit %s)", what, in.FromHash, limit)
			}
			tpl = replicaSetTemplate(rs)
		}
		res = RestoreResult{TemplateHash: k8s.PodTemplateHash(&tpl, d.Status.CollisionCount)}
		return tpl, nil
	})
	if err == errSkipRestore {
		res.Skipped, res.Generation = true, skipped.Generation
		res.Drift, err = a.drift(ctx, skipped, in.ExpectTemplateHash)
		return res, err
	}
	if err != nil {
		return RestoreResult{}, err
	}
	res.Generation = read.Generation
	if wrote != nil {
		res.Generation, res.Changed = wrote.Generation, changed
	}
	return res, nil
}

// errSkipRestore stops RestoreTemplate's update: the template is not the release's.
var errSkipRestore = errors.New("the template is not the release's")

// drift says how d's template differs from the one with pod-template-hash hash (the
// release's, from its ReplicaSet, which the cluster keeps): templateDrift; without that
// ReplicaSet, the two hashes.
func (a *Activities) drift(ctx context.Context, d *appsv1.Deployment, hash string) (string, error) {
	rs, err := a.replicaSetByHash(ctx, d, hash)
	if err != nil {
		return "", err
	}
	if rs != nil {
		return templateDrift(replicaSetTemplate(rs), d.Spec.Template), nil
	}
	cur := k8s.PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)
	return fmt.Sprintf("pod-template-hash %s, the release wrote %s", cur, hash), nil
}

// templateDrift describes how now differs from was: "container app: image nginx:1.26 →
// nginx:1.26-hotfix", each container whose image changed, was added or removed (init
// containers too), by name, then "other fields" when the rest differs as well.
func templateDrift(was, now corev1.PodTemplateSpec) string {
	images := func(t *corev1.PodTemplateSpec) map[string]string {
		m := map[string]string{}
		for _, list := range [][]corev1.Container{t.Spec.InitContainers, t.Spec.Containers} {
			for _, c := range list {
				m[c.Name] = c.Image
			}
		}
		return m
	}
	before, after := images(&was), images(&now)
	names := make([]string, 0, len(before)+len(after))
	for n := range before {
		names = append(names, n)
	}
	for n := range after {
		if _, ok := before[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var parts []string
	added := false
	for _, n := range names {
		b, inB := before[n]
		c, inC := after[n]
		switch {
		case !inB:
			parts, added = append(parts, fmt.Sprintf("container %s added (%s)", n, c)), true
		case !inC:
			parts, added = append(parts, fmt.Sprintf("container %s removed", n)), true
		case b != c:
			parts = append(parts, fmt.Sprintf("container %s: image %s → %s", n, b, c))
		}
	}
	// The rest: both templates with the images of now.
	rest := *was.DeepCopy()
	for _, list := range [][]corev1.Container{rest.Spec.InitContainers, rest.Spec.Containers} {
		for j := range list {
			if img, ok := after[list[j].Name]; ok {
				list[j].Image = img
			}
		}
	}
	if !added && !equality.Semantic.DeepEqual(rest, now) {
		parts = append(parts, "other fields")
	}
	if len(parts) == 0 {
		return "no difference in the template"
	}
	return strings.Join(parts, ", ")
}

// PreflightInput checks a release's change against Deployments of one namespace before any of
// them changes: Images and Patch as ApplyInput has them.
type PreflightInput struct {
	Namespace string            `json:"namespace"`
	Names     []string          `json:"names"`
	Images    map[string]string `json:"images,omitempty"`
	Patch     json.RawMessage   `json:"patch,omitempty"`
}

// PreflightResult lists what would make the change fail, one line per Deployment
// ("shop/web: no container named \"app\""); none: the change applies to every one.
type PreflightResult struct {
	Problems []string `json:"problems,omitempty"`
}

// PreflightChange checks, for each Deployment, that the change applies (every container named
// in Images exists, the patch applies to the template) and that the apiserver accepts the
// result: the changed Deployment is written as a server-side dry run (metav1.DryRunAll), which
// runs validation and admission (webhooks, policies) and persists nothing. A Deployment
// that already has the change is not written. Problems are in the result; an error is only a
// failure to ask (retried), or no such Deployment (ErrNotFound).
func (a *Activities) PreflightChange(ctx context.Context, in PreflightInput) (PreflightResult, error) {
	var res PreflightResult
	dc := a.client(ctx).AppsV1().Deployments(in.Namespace)
	for _, name := range in.Names {
		what := "pre-flight of deployment " + in.Namespace + "/" + name
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, name)
		}
		for i := 0; ; i++ {
			d, err := dc.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return PreflightResult{}, classify(what, err)
			}
			want, err := desiredTemplate(d.Spec.Template, ApplyInput{Images: in.Images, Patch: in.Patch})
			if err != nil {
				res.Problems = append(res.Problems, fmt.Sprintf("%s/%s: %v", in.Namespace, name, err))
				break
			}
			if equality.Semantic.DeepEqual(want, d.Spec.Template) {
				break
			}
			obj := d.DeepCopy()
			obj.ManagedFields = nil
			obj.Spec.Template = want
			_, err = dc.Update(ctx, obj, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: ReleaseFieldManager})
			switch {
			case apierrors.IsConflict(err) && i < conflictRetries:
				continue
			case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
				res.Problems = append(res.Problems, fmt.Sprintf("%s/%s: the apiserver rejects the changed template (dry run): %v", in.Namespace, name, err))
			case err != nil:
				return PreflightResult{}, classify(what, err)
			}
			break
		}
	}
	return res, nil
}
