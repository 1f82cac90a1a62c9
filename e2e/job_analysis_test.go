//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// TestJobAnalysis runs a stepped rollout whose analysis step is a Kubernetes Job, on the real
// stack: kube-controller-manager's Job controller runs the Job, kwok completes its pod (or,
// for an image tagged :fail, fails it with exit code 1). A Job that completes lets the rollout
// go on to 100%; one that fails aborts it back to the stable revision.
func TestJobAnalysis(t *testing.T) {
	run := func(t *testing.T, image string) (ns string, job batchv1.Job) {
		ns = newNamespace(t)
		recordHistories(t, ns, "web")
		steps := fmt.Sprintf(`[{"setWeight":50},{"analysis":{"job":{"template":{"backoffLimit":0,"template":{"spec":{"containers":[{"name":"smoke","image":%q}]}}},"timeout":"90s"}}}]`, image)
		create(t, newDeployment(ns, "web", 4, "nginx:1.25", rolling("1", "0"), withSteps(steps)))
		waitComplete(t, ns, "web")
		setImage(t, ns, "web", "nginx:1.26")
		// The analysis Job, once finished: created for step 2 of the new template, owned by
		// the Deployment.
		eventually(t, 120*time.Second, func() string {
			jobs, err := env.kube.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return err.Error()
			}
			if len(jobs.Items) != 1 {
				return fmt.Sprintf("%d jobs, want 1", len(jobs.Items))
			}
			job = jobs.Items[0]
			for _, c := range job.Status.Conditions {
				if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
					return ""
				}
			}
			return fmt.Sprintf("job %s not finished: %+v", job.Name, job.Status)
		})
		h2 := hashOf(t, ns, "nginx:1.26")
		if !strings.HasPrefix(job.Name, "web-"+h2+"-s2-") || job.Labels[k8s.AnalysisDeploymentLabel] != "web" ||
			job.Labels[k8s.AnalysisStepLabel] != "2" || job.Labels["pod-template-hash"] != h2 {
			t.Errorf("job %s labels %v, want web-%s-s2-*, labelled for web step 2 and hash %s", job.Name, job.Labels, h2, h2)
		}
		if refs := job.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Deployment" || refs[0].Name != "web" {
			t.Errorf("job owner references %+v, want the Deployment", refs)
		}
		if job.Spec.ActiveDeadlineSeconds == nil || *job.Spec.ActiveDeadlineSeconds != 90 {
			t.Errorf("job activeDeadlineSeconds %v, want 90 (the step's timeout)", job.Spec.ActiveDeadlineSeconds)
		}
		return ns, job
	}

	t.Run("passes", func(t *testing.T) {
		ns, job := run(t, "smoke:ok")
		if job.Status.Succeeded != 1 || job.Status.Failed != 0 {
			t.Errorf("job status succeeded %d failed %d, want 1 and 0", job.Status.Succeeded, job.Status.Failed)
		}
		waitEvent(t, ns, "web", "AnalysisSuccessful: Step 2 of 2 (job analysis): analysis passed: 1 measurements, 0 failed (failureLimit 0)")
		d := waitComplete(t, ns, "web")
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.26" {
			t.Errorf("image = %s, want nginx:1.26", img)
		}
		if got := sizes(t, ns); got != "nginx:1.26=4/4 nginx:1.25=0/0" {
			t.Errorf("after the analysis passed: %s, want all on nginx:1.26", got)
		}
		if st := queryStatus(t, ns, "web"); st.AbortReason != "" || st.CurrentRevision != 2 {
			t.Errorf("status abortReason %q currentRevision %d, want none and 2", st.AbortReason, st.CurrentRevision)
		}
	})

	t.Run("fails and aborts", func(t *testing.T) {
		ns, job := run(t, "smoke:fail")
		if job.Status.Failed != 1 || job.Status.Succeeded != 0 {
			t.Errorf("job status succeeded %d failed %d, want 0 and 1", job.Status.Succeeded, job.Status.Failed)
		}
		waitEvent(t, ns, "web", fmt.Sprintf("AnalysisFailed: Step 2 of 2 (job analysis): analysis failed: 1 of 1 measurements failed (failureLimit 0); last: job %s failed: BackoffLimitExceeded", job.Name))
		waitEvent(t, ns, "web", "RolloutAborted: Rollout of revision 2 aborted: analysis failed at step 2")
		d := waitComplete(t, ns, "web")
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.25" {
			t.Errorf("image after the failed job = %s, want nginx:1.25", img)
		}
		eventually(t, 60*time.Second, func() string {
			if got := sizes(t, ns); got != "nginx:1.25=4/4 nginx:1.26=0/0" {
				return fmt.Sprintf("after the abort: %s, want all back on nginx:1.25", got)
			}
			return ""
		})
		st := queryStatus(t, ns, "web")
		if !strings.Contains(st.AbortReason, "analysis failed at step 2: 1 of 1 measurements failed") || !strings.Contains(st.AbortReason, "BackoffLimitExceeded") {
			t.Errorf("abortReason = %q", st.AbortReason)
		}
		if st.Steps != nil {
			t.Errorf("steps %+v after the abort, want none", st.Steps)
		}
		id := workflowID(ns, "web")
		eventually(t, 30*time.Second, func() string {
			return listed(t, fmt.Sprintf(`%s = "%s" AND WorkflowId = "%s"`, contract.SearchAttrOutcome, contract.OutcomeAborted, id), id)
		})
	})
}
