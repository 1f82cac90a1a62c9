package k8s

import (
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// (5) Rollback requests, by signal or by the deprecated annotation.
func TestDecideRollback(t *testing.T) {
	tests := []struct {
		name           string
		giveRequest    *int64
		giveAnnotation string // deprecated.deployment.rollback.to
		giveOnlyNew    bool   // no ReplicaSet for revision 1
		wantEvent      string
		wantImage      string
		wantCause      string
		wantNoWrite    bool
	}{
		{
			name:        "to revision 1",
			giveRequest: ptrTo(int64(1)),
			wantEvent:   `Normal DeploymentRollback: Rolled back deployment "web" to revision 1`,
			wantImage:   "nginx:1.0",
			wantCause:   "deploy 1.0",
		},
		{
			name:        "to the previous revision",
			giveRequest: ptrTo(int64(0)),
			wantEvent:   `Normal DeploymentRollback: Rolled back deployment "web" to revision 1`,
			wantImage:   "nginx:1.0",
			wantCause:   "deploy 1.0",
		},
		{
			name:           "deprecated annotation",
			giveAnnotation: "1",
			wantEvent:      `Normal DeploymentRollback: Rolled back deployment "web" to revision 1`,
			wantImage:      "nginx:1.0",
			wantCause:      "deploy 1.0",
		},
		{
			name:           "signal wins over the annotation",
			giveRequest:    ptrTo(int64(2)),
			giveAnnotation: "1",
			wantEvent:      `Warning DeploymentRollbackTemplateUnchanged: The rollback revision contains the same template as current deployment "web"`,
			wantImage:      "nginx:1.1",
			wantCause:      "deploy 1.1",
		},
		{
			name:        "unknown revision",
			giveRequest: ptrTo(int64(7)),
			wantNoWrite: true,
			wantEvent:   "Warning DeploymentRollbackRevisionNotFound: Unable to find the revision to rollback to.",
			wantImage:   "nginx:1.1",
			wantCause:   "deploy 1.1",
		},
		{
			name:           "unknown revision by annotation",
			giveAnnotation: "9",
			wantEvent:      "Warning DeploymentRollbackRevisionNotFound: Unable to find the revision to rollback to.",
			wantImage:      "nginx:1.1",
			wantCause:      "deploy 1.1",
		},
		{
			name:        "no previous revision",
			giveRequest: ptrTo(int64(0)),
			wantNoWrite: true,
			giveOnlyNew: true,
			wantEvent:   "Warning DeploymentRollbackRevisionNotFound: Unable to find last revision.",
			wantImage:   "nginx:1.1",
			wantCause:   "deploy 1.1",
		},
		{
			name:        "current template",
			giveRequest: ptrTo(int64(2)),
			wantNoWrite: true,
			wantEvent:   `Warning DeploymentRollbackTemplateUnchanged: The rollback revision contains the same template as current deployment "web"`,
			wantImage:   "nginx:1.1",
			wantCause:   "deploy 1.1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := webDeployment(10, "nginx:1.1")
			d.Annotations[RevisionAnnotation] = "2"
			d.Annotations[ChangeCauseAnnotation] = "deploy 1.1"
			if tt.giveAnnotation != "" {
				d.Annotations[appsv1.DeprecatedRollbackTo] = tt.giveAnnotation
			}
			d.Status = settledStatus(d, 10)
			rs1 := ownedRS(d, "nginx:1.0", 1, 0, 0, ago(2*time.Hour))
			rs1.Annotations[ChangeCauseAnnotation] = "deploy 1.0"
			rs2 := ownedRS(d, "nginx:1.1", 2, 10, 10, ago(time.Hour))
			rs2.Annotations[ChangeCauseAnnotation] = "deploy 1.1"
			rss := []*appsv1.ReplicaSet{rs1, rs2}
			if tt.giveOnlyNew {
				rss = rss[1:]
			}
			plan := decide(t, Snapshot{Deployment: d, ReplicaSets: rss}, Request{RollbackTo: tt.giveRequest})

			if tt.wantNoWrite {
				// A signal that changes nothing writes nothing: only the event.
				reason, _, _ := strings.Cut(strings.TrimPrefix(tt.wantEvent, "Warning "), ":")
				if got, want := describePlan(plan), []string{"RecordEvent " + reason}; !reflect.DeepEqual(got, want) {
					t.Fatalf("steps = %q, want %q", got, want)
				}
				if got, want := eventsOf(plan), []string{tt.wantEvent}; !reflect.DeepEqual(got, want) {
					t.Errorf("events = %q, want %q", got, want)
				}
				if !plan.RollbackHandled {
					t.Errorf("RollbackHandled = false, want true")
				}
				return
			}
			if got, want := describePlan(plan), []string{"RollbackDeployment"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("steps = %q, want %q", got, want)
			}
			if got, want := eventsOf(plan), []string{tt.wantEvent}; !reflect.DeepEqual(got, want) {
				t.Errorf("events = %q, want %q", got, want)
			}
			if !plan.RollbackHandled {
				t.Errorf("RollbackHandled = false, want true")
			}
			if plan.Phase != PhaseRollingBack {
				t.Errorf("Phase = %s, want %s", plan.Phase, PhaseRollingBack)
			}
			// The plan names the new ReplicaSet of the template rolled back to, not the one
			// the sync found first (the planner's memo of it is reset with the template).
			wantNew := rs2.Name
			if tt.wantImage == "nginx:1.0" {
				wantNew = rs1.Name
			}
			if plan.NewReplicaSet != wantNew {
				t.Errorf("NewReplicaSet = %q, want %q", plan.NewReplicaSet, wantNew)
			}
			got := plan.Steps[0].Deployment
			wantTemplate := templateFor(d, tt.wantImage)
			if !reflect.DeepEqual(got.Spec.Template, wantTemplate) {
				t.Errorf("template = %+v, want %+v", got.Spec.Template, wantTemplate)
			}
			wantAnn := map[string]string{RevisionAnnotation: "2", ChangeCauseAnnotation: tt.wantCause}
			if !reflect.DeepEqual(got.Annotations, wantAnn) {
				t.Errorf("annotations = %v, want %v", got.Annotations, wantAnn)
			}
			if _, ok := d.Annotations[appsv1.DeprecatedRollbackTo]; tt.giveAnnotation != "" && !ok {
				t.Errorf("Decide() removed the annotation from its snapshot")
			}
		})
	}
}

// A sync retried after a crash that came between the rollback write and the workflow task's
// completion sees the Deployment already at the revision's template, while that ReplicaSet
// still has its old revision. The rollback is done: the event it lost is recorded again,
// nothing is written, and no RevisionNotFound or TemplateUnchanged warning appears.
func TestDecideRollbackAlreadyWritten(t *testing.T) {
	tests := []struct {
		name string
		give int64
	}{
		{name: "to revision 1", give: 1},
		{name: "to the previous revision", give: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := webDeployment(10, "nginx:1.0")
			d.Annotations[RevisionAnnotation] = "2"
			d.Annotations[ChangeCauseAnnotation] = "deploy 1.0"
			rs1 := ownedRS(d, "nginx:1.0", 1, 0, 0, ago(2*time.Hour))
			rs1.Annotations[ChangeCauseAnnotation] = "deploy 1.0"
			rs2 := ownedRS(d, "nginx:1.1", 2, 10, 10, ago(time.Hour))
			d.Status = settledStatus(d, 10)
			plan := decide(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{rs1, rs2}}, Request{RollbackTo: ptrTo(tt.give)})

			if got, want := describePlan(plan), []string{"RecordEvent DeploymentRollback"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("steps = %q, want %q", got, want)
			}
			if got, want := eventsOf(plan), []string{`Normal DeploymentRollback: Rolled back deployment "web" to revision 1`}; !reflect.DeepEqual(got, want) {
				t.Errorf("events = %q, want %q", got, want)
			}
			if !plan.RollbackHandled || plan.Phase != PhaseRollingBack {
				t.Errorf("RollbackHandled, Phase = %t, %s, want true, %s", plan.RollbackHandled, plan.Phase, PhaseRollingBack)
			}
		})
	}
}

// A rollback keeps the Deployment's own temporal-rollout.io annotations (the strategy: steps,
// traffic, blue-green) and takes the rest from the ReplicaSet, as upstream does: aborting the
// rollout that added the traffic and steps annotations does not remove them. An annotation of
// ours that the ReplicaSet has and the Deployment no longer has is not brought back.
func TestDecideRollbackKeepsRolloutAnnotations(t *testing.T) {
	d := webDeployment(10, "nginx:1.1")
	d.Annotations[RevisionAnnotation] = "2"
	d.Annotations[ChangeCauseAnnotation] = "deploy 1.1"
	d.Annotations[TrafficAnnotation] = `{"httpRoute":{"name":"web"},"stableService":"s","canaryService":"c"}`
	d.Annotations[StepsAnnotation] = `[{"setWeight":20},{"pause":{}}]`
	d.Status = settledStatus(d, 10)
	rs1 := ownedRS(d, "nginx:1.0", 1, 0, 0, ago(2*time.Hour))
	rs1.Annotations = map[string]string{RevisionAnnotation: "1", ChangeCauseAnnotation: "deploy 1.0", AutoRollbackAnnotation: "true"}
	rs2 := ownedRS(d, "nginx:1.1", 2, 10, 10, ago(time.Hour))
	for k, v := range d.Annotations {
		if !annotationsToSkip[k] {
			rs2.Annotations[k] = v
		}
	}
	plan := decide(t, Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{rs1, rs2}}, Request{RollbackTo: ptrTo(int64(1))})
	if got, want := describePlan(plan), []string{"RollbackDeployment"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("steps = %q, want %q", got, want)
	}
	want := map[string]string{
		RevisionAnnotation: "2", ChangeCauseAnnotation: "deploy 1.0",
		TrafficAnnotation: d.Annotations[TrafficAnnotation], StepsAnnotation: d.Annotations[StepsAnnotation],
	}
	if got := plan.Steps[0].Deployment.Annotations; !reflect.DeepEqual(got, want) {
		t.Errorf("annotations = %v, want %v", got, want)
	}
}
