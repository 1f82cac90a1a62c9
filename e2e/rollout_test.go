//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/k8s"
)

// TestRollingUpdate creates a Deployment, changes its image, and checks the end state against
// what the built-in controller produces, for several maxSurge/maxUnavailable pairs.
func TestRollingUpdate(t *testing.T) {
	tests := []struct {
		name               string
		giveSurge          string
		giveUnavail        string
		replicas           int32
		wantSurge, wantMax int32 // resolved surge and unavailable
	}{
		{name: "quarter", giveSurge: "25%", giveUnavail: "25%", replicas: 8, wantSurge: 2, wantMax: 2},
		{name: "no-surge", giveSurge: "0", giveUnavail: "1", replicas: 4, wantSurge: 0, wantMax: 1},
		{name: "surge-only", giveSurge: "2", giveUnavail: "0", replicas: 5, wantSurge: 2, wantMax: 0},
		{name: "percent-rounding", giveSurge: "30%", giveUnavail: "30%", replicas: 5, wantSurge: 2, wantMax: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := newNamespace(t)
			recordHistories(t, ns, "web")
			d := create(t, newDeployment(ns, "web", tt.replicas, "nginx:1.25", rolling(tt.giveSurge, tt.giveUnavail)))
			d = waitComplete(t, ns, "web")
			firstRS := expectedRSName(d)

			obs := observe(t, ns, tt.replicas+tt.wantSurge, tt.replicas-tt.wantMax)
			setImage(t, ns, "web", "nginx:1.26")
			d = waitComplete(t, ns, "web")
			obs.stop()

			newRS := expectedRSName(d)
			rss := replicaSets(t, ns)
			if got, want := rsSummary(rss), fmt.Sprintf("%s:r2:%d %s:r1:0", newRS, tt.replicas, firstRS); got != want {
				t.Fatalf("replicasets = %s, want %s", got, want)
			}
			for _, rs := range rss {
				if got := rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; !strings.HasSuffix(rs.Name, "-"+got) || rs.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey] != got || rs.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != got {
					t.Errorf("replicaset %s: pod-template-hash label %q not on name, selector and template", rs.Name, got)
				}
				if got, want := rs.Annotations[k8s.DesiredReplicasAnnotation], fmt.Sprint(tt.replicas); got != want {
					t.Errorf("replicaset %s desired-replicas = %s, want %s", rs.Name, got, want)
				}
				if got, want := rs.Annotations[k8s.MaxReplicasAnnotation], fmt.Sprint(tt.replicas+tt.wantSurge); got != want {
					t.Errorf("replicaset %s max-replicas = %s, want %s", rs.Name, got, want)
				}
				if ref := rs.OwnerReferences; len(ref) != 1 || ref[0].UID != d.UID || ref[0].Controller == nil || !*ref[0].Controller {
					t.Errorf("replicaset %s ownerReferences = %+v, want controller ref to %s", rs.Name, ref, d.UID)
				}
			}
			if got := rss[0].Annotations[k8s.ChangeCauseAnnotation]; got != "image nginx:1.26" {
				t.Errorf("new replicaset change-cause = %q, want %q", got, "image nginx:1.26")
			}
			if got := d.Annotations[k8s.RevisionAnnotation]; got != "2" {
				t.Errorf("deployment revision = %s, want 2", got)
			}
			st := d.Status
			if st.Replicas != tt.replicas || st.UpdatedReplicas != tt.replicas || st.ReadyReplicas != tt.replicas || st.AvailableReplicas != tt.replicas || st.UnavailableReplicas != 0 || st.ObservedGeneration != d.Generation {
				t.Errorf("status = %+v, want all %d and observedGeneration %d", st, tt.replicas, d.Generation)
			}
			if got := condition(d, appsv1.DeploymentAvailable); got != "True/MinimumReplicasAvailable" {
				t.Errorf("Available = %s, want True/MinimumReplicasAvailable", got)
			}
			prog := k8s.GetCondition(d.Status, appsv1.DeploymentProgressing)
			if prog == nil || prog.Reason != k8s.NewRSAvailableReason || prog.Message != fmt.Sprintf("ReplicaSet %q has successfully progressed.", newRS) {
				t.Errorf("Progressing = %+v, want NewReplicaSetAvailable for %s", prog, newRS)
			}
			waitEvent(t, ns, "web", fmt.Sprintf("ScalingReplicaSet: Scaled up replica set %s from 0 to %d", firstRS, tt.replicas))
			waitEvent(t, ns, "web", fmt.Sprintf("ScalingReplicaSet: Scaled down replica set %s from", firstRS))
			waitEvent(t, ns, "web", fmt.Sprintf("ScalingReplicaSet: Scaled up replica set %s from 0 to", newRS))

			// The wait made the scale moves between the first sync and the last itself
			// (AwaitInput.Inline), within the bounds observe checks: each is in the history,
			// in AwaitChange's result, scales the old ReplicaSet down or the new one up, and
			// has upstream's event (unless the event recorder combined it with similar ones,
			// as it does from the eleventh on, for the built-in controller too).
			moves := waitMoves(t, workflowID(ns, "web"))
			if len(moves) == 0 {
				t.Errorf("no scale move made by the wait, want the rollout's moves between its syncs")
			}
			evs := events(t, ns, "web")
			combined := slices.ContainsFunc(evs, func(e string) bool { return strings.Contains(e, "(combined from similar events)") })
			for _, m := range moves {
				verb := map[k8s.StepKind]string{k8s.StepScaleUp: "up", k8s.StepScaleDown: "down"}[m.Kind]
				want := fmt.Sprintf("ScalingReplicaSet: Scaled %s replica set %s from %d to %d", verb, m.ReplicaSet, m.From, m.To)
				if !combined && !slices.Contains(evs, want) {
					t.Errorf("move %+v: no event %q among %q", m, want, evs)
				}
				if !(m.Kind == k8s.StepScaleDown && m.ReplicaSet == firstRS && m.To < m.From) && !(m.Kind == k8s.StepScaleUp && m.ReplicaSet == newRS && m.To > m.From) {
					t.Errorf("move %+v: want the old ReplicaSet %s down or the new one %s up", m, firstRS, newRS)
				}
			}

			hist := kubectl(t, "-n", ns, "rollout", "history", "deployment/web")
			for _, want := range []string{"1         <none>", "2         image nginx:1.26"} {
				if !strings.Contains(hist, want) {
					t.Errorf("rollout history = %q, want a line %q", hist, want)
				}
			}
		})
	}
}

// TestRecreate checks that old and new pods never coexist.
func TestRecreate(t *testing.T) {
	ns := newNamespace(t)
	recordHistories(t, ns, "db")
	create(t, newDeployment(ns, "db", 4, "postgres:16", recreate()))
	d := waitComplete(t, ns, "db")
	oldRS := expectedRSName(d)

	obs := observe(t, ns, 4, 0)
	next := d.DeepCopy()
	next.Spec.Template.Spec.Containers[0].Image = "postgres:17"
	obs.recreateNew = k8s.PodTemplateHash(&next.Spec.Template, nil)
	setImage(t, ns, "db", "postgres:17")
	d = waitComplete(t, ns, "db")
	obs.stop()

	newRS := expectedRSName(d)
	if got, want := rsSummary(replicaSets(t, ns)), fmt.Sprintf("%s:r2:4 %s:r1:0", newRS, oldRS); got != want {
		t.Fatalf("replicasets = %s, want %s", got, want)
	}
	if got := condition(d, appsv1.DeploymentProgressing); got != "True/NewReplicaSetAvailable" {
		t.Errorf("Progressing = %s, want True/NewReplicaSetAvailable", got)
	}
	waitEvent(t, ns, "db", fmt.Sprintf("ScalingReplicaSet: Scaled down replica set %s from 4 to 0", oldRS))
	waitEvent(t, ns, "db", fmt.Sprintf("ScalingReplicaSet: Scaled up replica set %s from 0 to 4", newRS))
}
