package k8s

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// planNow is the clock of every Decide call; fixture timestamps are whole seconds before it.
var planNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(planNow.Add(-d)) }

const hashKey = appsv1.DefaultDeploymentUniqueLabelKey

func ptrTo[T any](v T) *T { return &v }

func intOrPct(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

// webTemplate is the pod template of webDeployment running image.
func webTemplate(image string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: image}},
		},
	}
}

// webDeployment is Deployment prod/web running image, RollingUpdate 25%/25%, as the apiserver
// stores it after defaulting.
func webDeployment(replicas int32, image string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "prod", UID: "web-uid", Generation: 1,
			Annotations: map[string]string{},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: *webTemplate(image),
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       ptrTo(intstr.FromString("25%")),
					MaxUnavailable: ptrTo(intstr.FromString("25%")),
				},
			},
			RevisionHistoryLimit:    ptrTo(int32(10)),
			ProgressDeadlineSeconds: ptrTo(int32(600)),
		},
	}
}

func useRecreate(d *appsv1.Deployment) *appsv1.Deployment {
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	return d
}

// withFenceposts makes d a RollingUpdate Deployment with the given fenceposts (in intstr.Parse
// syntax: "3" or "25%"; "" leaves the field nil).
func withFenceposts(d *appsv1.Deployment, maxSurge, maxUnavailable string) *appsv1.Deployment {
	ru := &appsv1.RollingUpdateDeployment{}
	if maxSurge != "" {
		ru.MaxSurge = intOrPct(maxSurge)
	}
	if maxUnavailable != "" {
		ru.MaxUnavailable = intOrPct(maxUnavailable)
	}
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: ru}
	return d
}

// templateFor is d's pod template with another image.
func templateFor(d *appsv1.Deployment, image string) corev1.PodTemplateSpec {
	t := *d.Spec.Template.DeepCopy()
	t.Spec.Containers[0].Image = image
	return t
}

// rsName is the name the controller gives d's ReplicaSet for image.
func rsName(d *appsv1.Deployment, image string) string {
	t := templateFor(d, image)
	return ReplicaSetName(d.Name, PodTemplateHash(&t, nil))
}

// ownedRS is d's ReplicaSet for image as the controller leaves it: hashed name, labels and
// selector, controller reference, revision and replica annotations for d's current size, and
// status with `available` of `size` pods up.
func ownedRS(d *appsv1.Deployment, image string, revision int, size, available int32, created metav1.Time) *appsv1.ReplicaSet {
	tmpl := templateFor(d, image)
	hash := PodTemplateHash(&tmpl, nil)
	tmpl.Labels = cloneAndAdd(tmpl.Labels, hashKey, hash)
	sel := d.Spec.Selector.DeepCopy()
	sel.MatchLabels = cloneAndAdd(sel.MatchLabels, hashKey, hash)
	name := ReplicaSetName(d.Name, hash)
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         d.Namespace,
			UID:               types.UID(name + "-uid"),
			CreationTimestamp: created,
			Labels:            tmpl.Labels,
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))},
			Annotations: map[string]string{
				RevisionAnnotation:        fmt.Sprint(revision),
				DesiredReplicasAnnotation: fmt.Sprint(replicas(d)),
				MaxReplicasAnnotation:     fmt.Sprint(replicas(d) + MaxSurge(d)),
			},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptrTo(size),
			Selector: sel,
			Template: tmpl,
		},
		Status: appsv1.ReplicaSetStatus{Replicas: size, ReadyReplicas: available, AvailableReplicas: available},
	}
}

// settledStatus is the status of a Deployment whose rollout finished an hour ago with n pods.
func settledStatus(d *appsv1.Deployment, n int32) appsv1.DeploymentStatus {
	t := ago(time.Hour)
	return appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            n,
		UpdatedReplicas:     n,
		ReadyReplicas:       n,
		AvailableReplicas:   n,
		TerminatingReplicas: ptrTo(int32(0)),
		Conditions: []appsv1.DeploymentCondition{
			NewCondition(appsv1.DeploymentAvailable, corev1.ConditionTrue, MinimumReplicasAvailable, "Deployment has minimum availability.", t),
			NewCondition(appsv1.DeploymentProgressing, corev1.ConditionTrue, NewRSAvailableReason, "ReplicaSet has successfully progressed.", t),
		},
	}
}

// describe renders a step on one line, so a plan can be compared as a list of strings.
func describe(s Step) string {
	switch s.Kind {
	case StepCreate:
		return fmt.Sprintf("%s %s %d", s.Kind, s.ReplicaSet.Name, rsReplicas(s.ReplicaSet))
	case StepScaleUp, StepScaleDown, StepUpdateRS:
		return fmt.Sprintf("%s %s %d->%d", s.Kind, s.ReplicaSet.Name, s.FromReplicas, rsReplicas(s.ReplicaSet))
	case StepClaim:
		return fmt.Sprintf("%s adopt=%v release=%v", s.Kind, refNames(s.Adopt), refNames(s.Release))
	case StepCleanup:
		return fmt.Sprintf("%s %v", s.Kind, refNames(s.Delete))
	case StepEvent:
		return fmt.Sprintf("%s %s", s.Kind, s.Events[0].Reason)
	}
	return string(s.Kind)
}

func describePlan(p Plan) []string {
	var out []string
	for _, s := range p.Steps {
		out = append(out, describe(s))
	}
	return out
}

func refNames(refs []ObjectRef) []string {
	var out []string
	for _, r := range refs {
		out = append(out, r.Name)
	}
	return out
}

// eventsOf lists the plan's events as "Type Reason: Message".
func eventsOf(p Plan) []string {
	var out []string
	for _, s := range p.Steps {
		for _, e := range s.Events {
			out = append(out, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
		}
	}
	return out
}

func stepOf(p Plan, kind StepKind) *Step {
	for i := range p.Steps {
		if p.Steps[i].Kind == kind {
			return &p.Steps[i]
		}
	}
	return nil
}

// expand replaces {new} and {old} in each string.
func expand(ss []string, newName, oldName string) []string {
	r := strings.NewReplacer("{new}", newName, "{old}", oldName)
	var out []string
	for _, s := range ss {
		out = append(out, r.Replace(s))
	}
	return out
}

// decideChained is decide with chained syncs (ours) or, chained false, one scaling move per
// sync (upstream's).
func decideChained(t *testing.T, s Snapshot, req Request, chained bool) Plan {
	t.Helper()
	p, err := decideWith(s, req, planNow, !chained)
	if err != nil {
		t.Fatalf("Decide() error = %v, want nil", err)
	}
	return p
}

func decide(t *testing.T, s Snapshot, req Request) Plan {
	t.Helper()
	p, err := Decide(s, req, planNow)
	if err != nil {
		t.Fatalf("Decide() error = %v, want nil", err)
	}
	return p
}
