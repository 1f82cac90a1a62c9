package activities

import (
	"context"
	"crypto/hmac"
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
//     redactedImagePrefix + the SHA-256 of the spec's JSON (keyedImagePrefix + an HMAC of it
//     with a codec key; see below). Two templates compare equal
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

// The placeholder images: redactedImagePrefix + SHA-256 of the spec's JSON without a codec key
// (--codec-key-file), keyedImagePrefix + HMAC-SHA256 under Activities.SpecDigestKey with one.
// A plain SHA-256 of a spec can be checked against guesses (an image tag, a short env value)
// by anyone who reads the history; the keyed digest cannot without the key, which the
// history's readers do not hold. Without a key the placeholder stays what it was, so recorded
// histories read as before.
//
// Determinism: placeholders are made and matched in activities only (Observe, AwaitChange and
// the writes that restore them). The workflow compares the recorded values, within one
// snapshot, and a replay reads them from the history: a worker with another key (or none)
// replays every history alike.
const (
	redactedImagePrefix = "redacted.temporal-rollout.io/sha256:"
	keyedImagePrefix    = "redacted.temporal-rollout.io/hmac-sha256:"
)

// strippedAnnotations are left out of the recorded snapshot and put back on writes.
var strippedAnnotations = []string{corev1.LastAppliedConfigAnnotation}

// specDigester makes and matches placeholders: keyed when key is set (see keyedImagePrefix).
type specDigester struct{ key []byte }

// digester is the worker's specDigester.
func (a *Activities) digester() specDigester { return specDigester{key: a.SpecDigestKey} }

// placeholder is the image of the placeholder standing for spec.
func (s specDigester) placeholder(spec *corev1.PodSpec) string {
	b, _ := json.Marshal(spec)
	if s.key == nil {
		sum := sha256.Sum256(b)
		return redactedImagePrefix + hex.EncodeToString(sum[:])
	}
	m := hmac.New(sha256.New, s.key)
	m.Write(b)
	return keyedImagePrefix + hex.EncodeToString(m.Sum(nil))
}

// standsFor reports whether the placeholder image stands for spec. An unkeyed placeholder
// matches with or without a key (a decision recorded before the key was configured); a keyed
// one only under the key it was made with (after a key rotation, the decision is stale and the
// workflow observes again).
func (s specDigester) standsFor(image string, spec *corev1.PodSpec) bool {
	switch {
	case strings.HasPrefix(image, keyedImagePrefix):
		return s.key != nil && hmac.Equal([]byte(image), []byte(s.placeholder(spec)))
	case strings.HasPrefix(image, redactedImagePrefix):
		return image == specDigester{}.placeholder(spec)
	}
	return false
}

// redactTemplate replaces the template's spec by its placeholder.
func (s specDigester) redactTemplate(t *corev1.PodTemplateSpec) {
	if _, ok := redactedPlaceholder(t); ok {
		return
	}
	t.Spec = corev1.PodSpec{Containers: []corev1.Container{{Name: "redacted", Image: s.placeholder(&t.Spec)}}}
}

// redactedPlaceholder returns the image of t's placeholder, if t's spec is one.
func redactedPlaceholder(t *corev1.PodTemplateSpec) (string, bool) {
	if len(t.Spec.Containers) != 1 || t.Spec.Containers[0].Name != "redacted" {
		return "", false
	}
	image := t.Spec.Containers[0].Image
	return image, strings.HasPrefix(image, redactedImagePrefix) || strings.HasPrefix(image, keyedImagePrefix)
}

func stripAnnotations(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	for _, k := range strippedAnnotations {
		delete(m.Annotations, k)
	}
}

// redactSnapshot returns the snapshot as the history records it; s's objects (the cache's,
// possibly) are copied, never changed.
func (a *Activities) redactSnapshot(s k8s.Snapshot) k8s.Snapshot {
	dg := a.digester()
	d := s.Deployment.DeepCopy()
	out := k8s.Snapshot{Deployment: d, Pods: s.Pods, TemplateHash: k8s.PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)}
	stripAnnotations(&d.ObjectMeta)
	dg.redactTemplate(&d.Spec.Template)
	for _, rs := range s.ReplicaSets {
		c := rs.DeepCopy()
		stripAnnotations(&c.ObjectMeta)
		dg.redactTemplate(&c.Spec.Template)
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
	d, err := a.client(ctx).AppsV1().Deployments(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
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
func (s specDigester) restoreTemplate(t *corev1.PodTemplateSpec, from ...*corev1.PodTemplateSpec) bool {
	image, ok := redactedPlaceholder(t)
	if !ok {
		return true
	}
	for _, f := range from {
		if f != nil && s.standsFor(image, &f.Spec) {
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
	if _, redacted := redactedPlaceholder(&want.Spec.Template); !redacted {
		return nil
	}
	from := []*corev1.PodTemplateSpec{&have.Spec.Template}
	if a.Cache != nil {
		for _, rs := range a.Cache.Snapshot(have).ReplicaSets {
			from = append(from, &rs.Spec.Template)
		}
	}
	if a.digester().restoreTemplate(&want.Spec.Template, from...) {
		return nil
	}
	list, err := a.client(ctx).AppsV1().ReplicaSets(want.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return classify("list replicasets in "+want.Namespace, err)
	}
	for i := range list.Items {
		from = append(from, &list.Items[i].Spec.Template)
	}
	if !a.digester().restoreTemplate(&want.Spec.Template, from...) {
		return nonRetryable(ErrStale, "deployment %s/%s: the template decided on is in no replicaset any more", want.Namespace, want.Name)
	}
	return nil
}
