package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/temporal-rollout/rollout/k8s"
)

// What the history records of a snapshot.
//
// Observe's result is recorded in the workflow's history (Temporal's database, its UI, every
// export). Whole pod templates would put env values written inline, and kubectl's
// last-applied-configuration (the whole manifest again), there; and a large template times
// revisionHistoryLimit can pass Temporal's 2 MB payload limit, after which the workflow task
// fails on every retry and the Deployment is stuck. So the recorded snapshot keeps what
// k8s.Decide reads and no more:
//
//   - every pod template's spec is replaced by a placeholder: one container whose image is
//     redactedImagePrefix + the SHA-256 of the spec's JSON. Two templates compare equal
//     redacted exactly when they do whole (their metadata is kept as is), which is all Decide
//     asks of them, and the placeholder names the spec it stands for;
//   - the Deployment's pod-template-hash is computed on the whole template and recorded
//     (k8s.Snapshot.TemplateHash), for Decide to name a new ReplicaSet by;
//   - kubectl's last-applied-configuration annotation is dropped (Decide never copies it).
//
// The writes put the real content back before writing: a new ReplicaSet gets the Deployment's
// template, a rollback the rolled-back ReplicaSet's, and scale and status writes go onto the
// object as it is now (see writeReplicaSet and UpdateDeploymentStatus), which keeps its own
// template and annotations. They read the informer cache when it holds the object at the
// snapshot's resourceVersion, and live otherwise.

// redactedImagePrefix marks a placeholder pod spec.
const redactedImagePrefix = "redacted.temporal-rollout.io/sha256:"

// strippedAnnotations are left out of the recorded snapshot and put back on writes.
var strippedAnnotations = []string{corev1.LastAppliedConfigAnnotation}

// specDigest is the SHA-256 of a pod spec's JSON.
func specDigest(spec *corev1.PodSpec) string {
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// redactTemplate replaces the template's spec by its placeholder.
func redactTemplate(t *corev1.PodTemplateSpec) {
	if _, ok := redactedDigest(t); ok {
		return
	}
	t.Spec = corev1.PodSpec{Containers: []corev1.Container{{Name: "redacted", Image: redactedImagePrefix + specDigest(&t.Spec)}}}
}

// redactedDigest returns the digest a placeholder stands for.
func redactedDigest(t *corev1.PodTemplateSpec) (string, bool) {
	if len(t.Spec.Containers) != 1 || t.Spec.Containers[0].Name != "redacted" {
		return "", false
	}
	return strings.CutPrefix(t.Spec.Containers[0].Image, redactedImagePrefix)
}

func stripAnnotations(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	for _, k := range strippedAnnotations {
		delete(m.Annotations, k)
	}
}

// redactSnapshot returns the snapshot as the history records it; s's objects (the cache's,
// possibly) are copied, never changed.
func redactSnapshot(s k8s.Snapshot) k8s.Snapshot {
	d := s.Deployment.DeepCopy()
	out := k8s.Snapshot{Deployment: d, Pods: s.Pods, TemplateHash: k8s.PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)}
	stripAnnotations(&d.ObjectMeta)
	redactTemplate(&d.Spec.Template)
	for _, rs := range s.ReplicaSets {
		c := rs.DeepCopy()
		stripAnnotations(&c.ObjectMeta)
		redactTemplate(&c.Spec.Template)
		out.ReplicaSets = append(out.ReplicaSets, c)
	}
	return out
}

// currentDeployment reads the Deployment at want's resourceVersion: from the cache when it is
// there, live otherwise. Another resourceVersion (or UID) is a stale decision.
func (a *Activities) currentDeployment(ctx context.Context, want *appsv1.Deployment) (*appsv1.Deployment, error) {
	if a.Cache != nil {
		if d, err := a.Cache.Deployment(want.Namespace, want.Name); err == nil && d.UID == want.UID && d.ResourceVersion == want.ResourceVersion {
			return d, nil
		}
	}
	d, err := a.Client.AppsV1().Deployments(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return nil, classify("get deployment "+want.Namespace+"/"+want.Name, err)
	}
	if d.UID != want.UID || (want.ResourceVersion != "" && d.ResourceVersion != want.ResourceVersion) {
		return nil, nonRetryable(ErrStale, "deployment %s/%s changed since the decision (resourceVersion %s, decided on %s)", want.Namespace, want.Name, d.ResourceVersion, want.ResourceVersion)
	}
	return d, nil
}

// restoreAnnotations puts the stripped annotations of have back on want.
func restoreAnnotations(want *metav1.ObjectMeta, have *metav1.ObjectMeta) {
	for _, k := range strippedAnnotations {
		if v, ok := have.Annotations[k]; ok {
			if want.Annotations == nil {
				want.Annotations = map[string]string{}
			}
			if _, set := want.Annotations[k]; !set {
				want.Annotations[k] = v
			}
		}
	}
}

// restoreTemplate replaces a placeholder in t by the first of the given templates whose spec
// it stands for, and reports whether t is whole afterwards.
func restoreTemplate(t *corev1.PodTemplateSpec, from ...*corev1.PodTemplateSpec) bool {
	digest, ok := redactedDigest(t)
	if !ok {
		return true
	}
	for _, f := range from {
		if f != nil && specDigest(&f.Spec) == digest {
			t.Spec = *f.Spec.DeepCopy()
			return true
		}
	}
	return false
}

// restoreDeploymentWrite makes a decided Deployment whole for its write: the stripped
// annotations and, if the template is a placeholder (a rollback copied a ReplicaSet's), that
// ReplicaSet's template, found among the Deployment's ReplicaSets.
func (a *Activities) restoreDeploymentWrite(ctx context.Context, want *appsv1.Deployment) error {
	have, err := a.currentDeployment(ctx, want)
	if err != nil {
		return err
	}
	restoreAnnotations(&want.ObjectMeta, &have.ObjectMeta)
	if _, redacted := redactedDigest(&want.Spec.Template); !redacted {
		return nil
	}
	from := []*corev1.PodTemplateSpec{&have.Spec.Template}
	if a.Cache != nil {
		for _, rs := range a.Cache.Snapshot(have).ReplicaSets {
			from = append(from, &rs.Spec.Template)
		}
	}
	if restoreTemplate(&want.Spec.Template, from...) {
		return nil
	}
	list, err := a.Client.AppsV1().ReplicaSets(want.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return classify("list replicasets in "+want.Namespace, err)
	}
	for i := range list.Items {
		from = append(from, &list.Items[i].Spec.Template)
	}
	if !restoreTemplate(&want.Spec.Template, from...) {
		return nonRetryable(ErrStale, "deployment %s/%s: the template decided on is in no replicaset any more", want.Namespace, want.Name)
	}
	return nil
}
