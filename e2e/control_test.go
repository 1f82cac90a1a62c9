//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

func workflowID(ns, name string) string { return contract.WorkflowID(ns, name) }

// queryStatus asks the workflow for its status through the Temporal CLI.
func queryStatus(t *testing.T, ns, name string) contract.Status {
	t.Helper()
	out := temporalCLI(t, "workflow", "query", "--workflow-id", workflowID(ns, name), "--type", contract.QueryStatus, "-o", "json")
	var res struct {
		QueryResult []contract.Status `json:"queryResult"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.QueryResult) != 1 {
		t.Fatalf("decode status query %q: %v", out, err)
	}
	return res.QueryResult[0]
}

func signal(t *testing.T, ns, name, sig string, input ...string) {
	t.Helper()
	args := []string{"workflow", "signal", "--workflow-id", workflowID(ns, name), "--name", sig}
	if len(input) > 0 {
		args = append(args, "--input", input[0])
	}
	// A signal that reaches a run while it continues as new (a rollout that just converged)
	// is refused with "workflow is closing"; the server takes it once the next run has
	// started, which is what a user does too: send it again (docs/operations.md, Troubleshooting).
	for deadline := time.Now().Add(10 * time.Second); ; {
		out, err := temporalCLIErr(args...)
		if err == nil {
			return
		}
		if !strings.Contains(out, "workflow is closing") || time.Now().After(deadline) {
			t.Fatalf("temporal %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRollover changes the image again while the first change is rolling out: a third
// ReplicaSet takes over and every older one goes to 0.
func TestRollover(t *testing.T) {
	ns := newNamespace(t)
	create(t, newDeployment(ns, "web", 6, "nginx:1.25", rolling("2", "1")))
	d := waitComplete(t, ns, "web")
	rs1 := expectedRSName(d)
	obs := observe(t, ns, 8, 5)
	// The second image never becomes ready, so the change is still rolling when the third
	// arrives.
	setImage(t, ns, "web", "nginx:404")
	eventually(t, 30*time.Second, func() string {
		if rss := replicaSets(t, ns); len(rss) != 2 || *rss[0].Spec.Replicas == 0 {
			return "second replicaset not scaled up yet: " + rsSummary(rss)
		}
		return ""
	})
	rs2 := replicaSets(t, ns)[0].Name
	setImage(t, ns, "web", "nginx:1.27")
	d = waitComplete(t, ns, "web")
	obs.stop()
	rs3 := expectedRSName(d)
	if got, want := rsSummary(replicaSets(t, ns)), fmt.Sprintf("%s:r3:6 %s:r2:0 %s:r1:0", rs3, rs2, rs1); got != want {
		t.Fatalf("replicasets = %s, want %s", got, want)
	}
	if got := d.Annotations[k8s.RevisionAnnotation]; got != "3" {
		t.Errorf("revision = %s, want 3", got)
	}
}

// TestScaleMidRollout scales a stuck rollout and checks proportional scaling against numbers
// worked out by hand.
//
// 10 replicas, maxSurge 3, maxUnavailable 2, new image never ready: the new ReplicaSet is
// created at 3 and the old scaled to 8 (13−8−3 = 2 may go), then the new grows to 5 (13−11
// = 2 of surge left). Both carry max-replicas 13. Scaling to 20: allowed 23, 10 to add. Old
// (8, largest) first: round(8×23/13) = 14, +6. New: round(5×23/13) = 9, +4. Leftover 0.
// Result: old 14, new 9, and neither may move while the new pods stay unready.
func TestScaleMidRollout(t *testing.T) {
	ns := newNamespace(t)
	create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("3", "2")))
	d := waitComplete(t, ns, "web")
	oldRS := expectedRSName(d)
	setImage(t, ns, "web", "nginx:404")
	var newRS string
	eventually(t, 30*time.Second, func() string {
		rss := replicaSets(t, ns)
		if len(rss) != 2 || *rss[0].Spec.Replicas != 5 || *rss[1].Spec.Replicas != 8 {
			return "want new 5, old 8: " + rsSummary(rss)
		}
		newRS = rss[0].Name
		return ""
	})
	update(t, ns, "web", func(d *appsv1.Deployment) { n := int32(20); d.Spec.Replicas = &n })
	want := fmt.Sprintf("%s:r2:9 %s:r1:14", newRS, oldRS)
	eventually(t, 30*time.Second, func() string {
		if got := rsSummary(replicaSets(t, ns)); got != want {
			return fmt.Sprintf("replicasets = %s, want %s", got, want)
		}
		return ""
	})
	// Stable: nothing moves while the new pods stay unready.
	time.Sleep(3 * time.Second)
	rss := replicaSets(t, ns)
	if got := rsSummary(rss); got != want {
		t.Fatalf("replicasets later = %s, want %s", got, want)
	}
	for _, rs := range rss {
		if rs.Annotations[k8s.DesiredReplicasAnnotation] != "20" || rs.Annotations[k8s.MaxReplicasAnnotation] != "23" {
			t.Errorf("replicaset %s annotations desired/max = %s/%s, want 20/23", rs.Name, rs.Annotations[k8s.DesiredReplicasAnnotation], rs.Annotations[k8s.MaxReplicasAnnotation])
		}
	}
	waitEvent(t, ns, "web", fmt.Sprintf("Scaled up replica set %s from 8 to 14", oldRS))
	waitEvent(t, ns, "web", fmt.Sprintf("Scaled up replica set %s from 5 to 9", newRS))
}

// TestPause pauses from the Temporal CLI and from kubectl, checks that nothing moves while
// paused, and resumes from both.
func TestPause(t *testing.T) {
	tests := []struct {
		name          string
		pause, resume func(t *testing.T, ns string)
	}{
		{
			name:   "temporal",
			pause:  func(t *testing.T, ns string) { signal(t, ns, "web", contract.SignalPause) },
			resume: func(t *testing.T, ns string) { signal(t, ns, "web", contract.SignalResume) },
		},
		{
			name:   "kubectl",
			pause:  func(t *testing.T, ns string) { kubectl(t, "-n", ns, "rollout", "pause", "deployment/web") },
			resume: func(t *testing.T, ns string) { kubectl(t, "-n", ns, "rollout", "resume", "deployment/web") },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := newNamespace(t)
			recordHistories(t, ns, "web")
			create(t, newDeployment(ns, "web", 4, "nginx:1.25", rolling("1", "1")))
			d := waitComplete(t, ns, "web")
			rs1 := expectedRSName(d)

			tt.pause(t, ns)
			eventually(t, 30*time.Second, func() string {
				d := getDeployment(t, ns, "web")
				if !d.Spec.Paused || condition(d, appsv1.DeploymentProgressing) != "Unknown/DeploymentPaused" {
					return fmt.Sprintf("paused=%t Progressing=%s", d.Spec.Paused, condition(d, appsv1.DeploymentProgressing))
				}
				return ""
			})
			setImage(t, ns, "web", "nginx:1.26")
			time.Sleep(3 * time.Second)
			if got, want := rsSummary(replicaSets(t, ns)), rs1+":r1:4"; got != want {
				t.Fatalf("while paused replicasets = %s, want %s", got, want)
			}
			if st := queryStatus(t, ns, "web"); !st.Paused || st.Phase != string(k8s.PhasePaused) {
				t.Errorf("status query paused=%t phase=%s, want true/Paused", st.Paused, st.Phase)
			}
			tt.resume(t, ns)
			d = waitComplete(t, ns, "web")
			if d.Spec.Paused {
				t.Errorf("spec.paused still true after resume")
			}
			if got, want := rsSummary(replicaSets(t, ns)), fmt.Sprintf("%s:r2:4 %s:r1:0", expectedRSName(d), rs1); got != want {
				t.Fatalf("replicasets = %s, want %s", got, want)
			}
		})
	}
}

// TestRollback rolls back with the rollback signal and with kubectl rollout undo.
func TestRollback(t *testing.T) {
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	create(t, newDeployment(ns, "web", 3, "nginx:1.25", rolling("1", "0")))
	d := waitComplete(t, ns, "web")
	rs1 := expectedRSName(d)
	setImage(t, ns, "web", "nginx:1.26")
	d = waitComplete(t, ns, "web")
	rs2 := expectedRSName(d)
	setImage(t, ns, "web", "nginx:1.27")
	d = waitComplete(t, ns, "web")
	rs3 := expectedRSName(d)

	// Signal: back to revision 1, which becomes revision 4.
	signal(t, ns, "web", contract.SignalRollback, `{"revision":1}`)
	eventually(t, waitTimeout, func() string {
		d := getDeployment(t, ns, "web")
		if d.Spec.Template.Spec.Containers[0].Image != "nginx:1.25" {
			return "image " + d.Spec.Template.Spec.Containers[0].Image
		}
		return rolloutPending(d)
	})
	if got, want := rsSummary(replicaSets(t, ns)), fmt.Sprintf("%s:r4:3 %s:r3:0 %s:r2:0", rs1, rs3, rs2); got != want {
		t.Fatalf("after signal rollback replicasets = %s, want %s", got, want)
	}
	if got := replicaSets(t, ns)[0].Annotations[k8s.RevisionHistoryAnnotation]; got != "1" {
		t.Errorf("revision-history of %s = %q, want \"1\"", rs1, got)
	}
	waitEvent(t, ns, "web", `DeploymentRollback: Rolled back deployment "web" to revision 1`)

	// kubectl rollout undo --to-revision=2.
	kubectl(t, "-n", ns, "rollout", "undo", "deployment/web", "--to-revision=2")
	d = waitComplete(t, ns, "web")
	if got := d.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.26" {
		t.Fatalf("after undo image = %s, want nginx:1.26", got)
	}
	if got, want := rsSummary(replicaSets(t, ns)), fmt.Sprintf("%s:r5:3 %s:r4:0 %s:r3:0", rs2, rs1, rs3); got != want {
		t.Fatalf("after undo replicasets = %s, want %s", got, want)
	}
	if got := d.Annotations[k8s.ChangeCauseAnnotation]; got != "image nginx:1.26" {
		t.Errorf("change-cause after undo = %q, want the revision's %q", got, "image nginx:1.26")
	}

	// The deprecated annotation older clients set: back to revision 3 (nginx:1.27), and the
	// annotation is cleared.
	kubectl(t, "-n", ns, "annotate", "deployment/web", "deprecated.deployment.rollback.to=3")
	eventually(t, waitTimeout, func() string {
		d := getDeployment(t, ns, "web")
		if _, ok := d.Annotations["deprecated.deployment.rollback.to"]; ok {
			return "rollback annotation not cleared yet"
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.27" {
			return "image " + got
		}
		return rolloutPending(d)
	})
	if got, want := rsSummary(replicaSets(t, ns)), fmt.Sprintf("%s:r6:3 %s:r5:0 %s:r4:0", rs3, rs2, rs1); got != want {
		t.Fatalf("after annotation rollback replicasets = %s, want %s", got, want)
	}
	// No event check here: by now the Deployment has had more than 25 events, and client-go's
	// per-object spam filter (burst 25, as in kube-controller-manager) drops further ones.
}

// TestProgressDeadline: a :404 image sticks, ProgressDeadlineExceeded appears after
// progressDeadlineSeconds, and a rollback to the previous revision recovers.
func TestProgressDeadline(t *testing.T) {
	ns := newNamespace(t)
	create(t, newDeployment(ns, "web", 3, "nginx:1.25", rolling("1", "0"), progressDeadline(8)))
	d := waitComplete(t, ns, "web")
	rs1 := expectedRSName(d)
	start := time.Now()
	setImage(t, ns, "web", "nginx:404")
	eventually(t, 60*time.Second, func() string {
		d := getDeployment(t, ns, "web")
		if got := condition(d, appsv1.DeploymentProgressing); got != "False/ProgressDeadlineExceeded" {
			return "Progressing " + got
		}
		return ""
	})
	if el := time.Since(start); el < 8*time.Second {
		t.Errorf("deadline exceeded after %s, before progressDeadlineSeconds=8", el)
	}
	d = getDeployment(t, ns, "web")
	rss := replicaSets(t, ns)
	c := k8s.GetCondition(d.Status, appsv1.DeploymentProgressing)
	if want := fmt.Sprintf("ReplicaSet %q has timed out progressing.", rss[0].Name); c.Message != want {
		t.Errorf("Progressing message = %q, want %q", c.Message, want)
	}
	if st := queryStatus(t, ns, "web"); st.Phase != string(k8s.PhaseDeadlineExceeded) {
		t.Errorf("status phase = %s, want DeadlineExceeded", st.Phase)
	}
	signal(t, ns, "web", contract.SignalRollback, `{"revision":0}`)
	d = waitComplete(t, ns, "web")
	if got := d.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.25" {
		t.Fatalf("after rollback image = %s, want nginx:1.25", got)
	}
	if got, want := rsSummary(replicaSets(t, ns)), fmt.Sprintf("%s:r3:3 %s:r2:0", rs1, rss[0].Name); got != want {
		t.Fatalf("replicasets = %s, want %s", got, want)
	}
}

// TestStartFromCLI starts a rollout with `temporal workflow start` and an image input.
func TestStartFromCLI(t *testing.T) {
	ns := newNamespace(t)
	create(t, newDeployment(ns, "api", 2, "nginx:1.25", rolling("1", "0")))
	waitComplete(t, ns, "api")
	in := fmt.Sprintf(`{"namespace":%q,"name":"api","image":{"app":"nginx:1.26"}}`, ns)
	temporalCLI(t, "workflow", "start", "--task-queue", contract.DefaultTaskQueue, "--type", contract.WorkflowType,
		"--workflow-id", workflowID(ns, "api"), "--input", in, "--id-conflict-policy", "TerminateExisting")
	eventually(t, waitTimeout, func() string {
		d := getDeployment(t, ns, "api")
		if got := d.Spec.Template.Spec.Containers[0].Image; got != "nginx:1.26" {
			return "image " + got
		}
		return rolloutPending(d)
	})
	rss := replicaSets(t, ns)
	if len(rss) != 2 || !strings.Contains(rss[0].Annotations[k8s.ChangeCauseAnnotation], "set image app=nginx:1.26") {
		t.Errorf("replicasets %s, change-cause %q: want 2 and the image change recorded", rsSummary(rss), rss[0].Annotations[k8s.ChangeCauseAnnotation])
	}
	hist := kubectl(t, "-n", ns, "rollout", "history", "deployment/api")
	if !strings.Contains(hist, "set image app=nginx:1.26") {
		t.Errorf("rollout history = %q, want the change-cause", hist)
	}
}
