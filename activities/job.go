package activities

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/activity"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/temporal-rollout/rollout/k8s"
)

// defaultJobPoll: how often RunAnalysisJob reads its Job.
const defaultJobPoll = 2 * time.Second

// ErrJobGone: the analysis Job was deleted before it finished; the analysis is inconclusive.
const ErrJobGone = "AnalysisJobGone"

// JobAnalysisInput is a job analysis step: the Job to create (Name, see k8s.AnalysisJobName)
// for the Deployment's step.
type JobAnalysisInput struct {
	Deployment DeploymentRef `json:"deployment"`
	// Step is the 1-based step.
	Step int `json:"step"`
	// Hash is the pod-template-hash being rolled out (a label on the Job).
	Hash string        `json:"hash,omitempty"`
	Name string        `json:"name"`
	Job  k8s.JobMetric `json:"job"`
}

// RunAnalysisJob creates the step's analysis Job (or finds the one an earlier attempt created:
// the name is the step's own) and waits for it, heartbeating: Complete is a Successful
// measurement, Failed a Failed one. The Job is owned by the Deployment (deleted with it) and
// labelled with it and the step; it keeps ttlSecondsAfterFinished (an hour unless the
// template says otherwise) for inspection after it finished, and activeDeadlineSeconds (the
// step's timeout unless the template says otherwise). When the activity is canceled (the
// step was promoted or the rollout aborted) or times out, the Job is deleted, its pods with
// it; when the worker stops, it is left running for the retry to find.
func (a *Activities) RunAnalysisJob(ctx context.Context, in JobAnalysisInput) (Measurement, error) {
	if in.Deployment.Namespace == "" || in.Deployment.Name == "" || in.Deployment.UID == "" || in.Name == "" {
		return Measurement{}, nonRetryable(ErrInvalid, "analysis job: namespace, deployment name, UID and job name are required, got %q/%q uid %q job %q",
			in.Deployment.Namespace, in.Deployment.Name, in.Deployment.UID, in.Name)
	}
	job, err := a.ensureAnalysisJob(ctx, in)
	if err != nil {
		return Measurement{}, err
	}
	poll := a.JobPoll
	if poll <= 0 {
		poll = defaultJobPoll
	}
	jobs := a.Client.BatchV1().Jobs(in.Deployment.Namespace)
	for {
		if m, done := jobVerdict(job); done {
			m.Provider, m.Job, m.At = k8s.ProviderJob, job.Name, time.Now().UTC()
			return m, nil
		}
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, job.Name)
		}
		select {
		case <-ctx.Done():
			a.abandonAnalysisJob(ctx, in)
			return Measurement{}, fmt.Errorf("wait for analysis job %s/%s: %w", in.Deployment.Namespace, in.Name, ctx.Err())
		case <-time.After(poll):
		}
		got, err := jobs.Get(ctx, in.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return Measurement{}, nonRetryable(ErrJobGone, "analysis job %s/%s was deleted before it finished", in.Deployment.Namespace, in.Name)
		}
		if err != nil {
			if ctx.Err() != nil {
				// Canceled during the read: the next turn deletes the Job.
				continue
			}
			return Measurement{}, fmt.Errorf("get analysis job %s/%s: %w", in.Deployment.Namespace, in.Name, err)
		}
		job = got
	}
}

// ensureAnalysisJob creates the Job, or returns the one of that name that this step created.
func (a *Activities) ensureAnalysisJob(ctx context.Context, in JobAnalysisInput) (*batchv1.Job, error) {
	ns := in.Deployment.Namespace
	want := analysisJob(in)
	jobs := a.Client.BatchV1().Jobs(ns)
	job, err := jobs.Create(ctx, want, metav1.CreateOptions{FieldManager: fieldManager})
	a.countWrite("create", "jobs", err)
	if err == nil {
		if activity.IsActivity(ctx) {
			activity.GetLogger(ctx).Info("Analysis job created", "namespace", ns, "deployment", in.Deployment.Name, "job", in.Name, "step", in.Step)
		}
		return job, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, classify("create analysis job "+ns+"/"+in.Name, err)
	}
	job, err = jobs.Get(ctx, in.Name, metav1.GetOptions{})
	if err != nil {
		return nil, classify("get analysis job "+ns+"/"+in.Name, err)
	}
	if job.Labels[k8s.AnalysisDeploymentLabel] != in.Deployment.Name || job.Labels[k8s.AnalysisStepLabel] != strconv.Itoa(in.Step) || !ownedBy(job.OwnerReferences, in.Deployment) {
		return nil, nonRetryable(ErrInvalid, "job %s/%s exists and is not the analysis job of step %d of deployment %s", ns, in.Name, in.Step, in.Deployment)
	}
	return job, nil
}

func ownedBy(refs []metav1.OwnerReference, d DeploymentRef) bool {
	for _, r := range refs {
		if r.Kind == "Deployment" && r.Name == d.Name && r.UID == d.UID {
			return true
		}
	}
	return false
}

// analysisJob is the Job a step creates: the step's template, owned by the Deployment,
// labelled, with a TTL and an active deadline when the template sets none, and restartPolicy
// Never when it sets none.
func analysisJob(in JobAnalysisInput) *batchv1.Job {
	labels := map[string]string{
		k8s.AnalysisDeploymentLabel: in.Deployment.Name,
		k8s.AnalysisStepLabel:       strconv.Itoa(in.Step),
	}
	spec := *in.Job.Template.DeepCopy()
	if spec.TTLSecondsAfterFinished == nil {
		ttl := k8s.DefaultJobTTL
		spec.TTLSecondsAfterFinished = &ttl
	}
	if spec.ActiveDeadlineSeconds == nil {
		deadline := int64(time.Duration(in.Job.Timeout) / time.Second)
		if deadline <= 0 {
			deadline = int64(k8s.DefaultJobTimeout / time.Second)
		}
		spec.ActiveDeadlineSeconds = &deadline
	}
	if spec.Template.Spec.RestartPolicy == "" {
		spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	podLabels := map[string]string{}
	for k, v := range spec.Template.Labels {
		podLabels[k] = v
	}
	for k, v := range labels {
		podLabels[k] = v
	}
	spec.Template.Labels = podLabels
	jobLabels := map[string]string{}
	for k, v := range labels {
		jobLabels[k] = v
	}
	if in.Hash != "" {
		jobLabels["pod-template-hash"] = in.Hash
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      in.Name,
			Namespace: in.Deployment.Namespace,
			Labels:    jobLabels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: in.Deployment.Name, UID: in.Deployment.UID,
			}},
		},
		Spec: spec,
	}
}

// jobVerdict reads a finished Job's verdict: Complete is Successful, Failed is Failed; done
// is false while it runs.
func jobVerdict(job *batchv1.Job) (m Measurement, done bool) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return Measurement{Verdict: VerdictSuccessful, Message: fmt.Sprintf("job %s completed (%d succeeded)", job.Name, job.Status.Succeeded)}, true
		case batchv1.JobFailed:
			msg := fmt.Sprintf("job %s failed: %s", job.Name, c.Reason)
			if c.Message != "" {
				msg += ": " + c.Message
			}
			return Measurement{Verdict: VerdictFailed, Message: msg}, true
		}
	}
	return Measurement{}, false
}

// abandonAnalysisJob deletes the Job of a canceled (or timed-out) analysis, with its pods
// (propagation Background). A worker that stops leaves it for the activity's retry.
func (a *Activities) abandonAnalysisJob(ctx context.Context, in JobAnalysisInput) {
	if activity.IsActivity(ctx) {
		select {
		case <-activity.GetWorkerStopChannel(ctx):
			return
		default:
		}
	}
	dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	err := a.Client.BatchV1().Jobs(in.Deployment.Namespace).Delete(dctx, in.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
	a.countWrite("delete", "jobs", err)
	if activity.IsActivity(ctx) {
		if err != nil && !apierrors.IsNotFound(err) {
			activity.GetLogger(ctx).Warn("Deleting the canceled analysis job failed", "namespace", in.Deployment.Namespace, "job", in.Name, "error", err)
		} else {
			activity.GetLogger(ctx).Info("Canceled analysis job deleted", "namespace", in.Deployment.Namespace, "job", in.Name)
		}
	}
}
