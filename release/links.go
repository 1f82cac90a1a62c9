package release

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/contract"
)

// Links between a release and the Deployment runs it drove, both ways, for the Temporal UI
// (docs/ui.md). A release changes a Deployment by writing it; the Deployment's own workflow
// rolls the change out. After each change the release runs LinkRollout (a local activity,
// behind the change release-link-rollouts), which:
//
//  1. describes the Deployment's workflow (contract.WorkflowIDIn) for the run under way;
//  2. signals that run with SignalLink carrying a link to the release's run: the UI shows it
//     on the Deployment's history as a link to release/<name>;
//  3. signals the release's own run with SignalLink carrying a link to that Deployment run:
//     the UI shows it on the release's history as a link to deployment/<ns>/<name>.
//
// Both signals are metadata: the Deployment workflow never reads SignalLink (the SDK keeps
// it buffered, and drops it at the run's end), the release drains it (drainLinks); neither
// decides anything on it. The link is best effort: a Deployment workflow not started yet, or
// a Temporal error, leaves the target without one (LinkResult empty), and the release goes on.

// SignalLink is the signal that carries a link between a release and a Deployment run
// (contract.SignalLink), with no payload, read by no workflow.
const SignalLink = contract.SignalLink

// changeLinkRollouts: after each Deployment change the release links itself and the
// Deployment's run (LinkRollout, a local activity). docs/versioning.md.
const changeLinkRollouts = "release-link-rollouts"

// LinkInput names the release's run and the Deployment whose workflow it links with.
type LinkInput struct {
	// Namespace is the Temporal namespace of both workflows.
	Namespace      string `json:"namespace"`
	ReleaseID      string `json:"releaseId"`
	ReleaseRunID   string `json:"releaseRunId"`
	Cluster        string `json:"cluster,omitempty"`
	DeploymentNS   string `json:"deploymentNamespace"`
	DeploymentName string `json:"deploymentName"`
	Wave           string `json:"wave"`
	ReleaseName    string `json:"release"`
}

// LinkResult is the Deployment run linked: empty when there was none to link.
type LinkResult struct {
	WorkflowID string `json:"workflowId,omitempty"`
	RunID      string `json:"runId,omitempty"`
}

// linkOptions: a link is best effort and quick; it never holds a wave long.
var linkOptions = workflow.LocalActivityOptions{
	StartToCloseTimeout:    10 * time.Second,
	ScheduleToCloseTimeout: 30 * time.Second,
	RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 3},
}

// LinkRollout links a release's run and a Deployment's run, both ways (see above).
func (a *Activities) LinkRollout(ctx context.Context, in LinkInput) (LinkResult, error) {
	svc := a.Client.WorkflowService()
	wid := contract.WorkflowIDIn(in.Cluster, in.DeploymentNS, in.DeploymentName)
	d, err := svc.DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: in.Namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: wid},
	})
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return LinkResult{}, nil
	}
	if err != nil {
		return LinkResult{}, fmt.Errorf("describe %s: %w", wid, err)
	}
	run := d.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	signal := func(to, toRun string, link *commonpb.Link_WorkflowEvent) error {
		// No payload: the link is the message, and workflow IDs stay in clear with a codec
		// (docs/codec.md), where a payload sent past the worker's data converter would not.
		_, err := svc.SignalWorkflowExecution(ctx, &workflowservice.SignalWorkflowExecutionRequest{
			Namespace:         in.Namespace,
			WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: to, RunId: toRun},
			SignalName:        SignalLink,
			// The workflow ID, in clear anyway: nothing of the spec (docs/codec.md).
			Identity: in.ReleaseID,
			Links:    []*commonpb.Link{{Variant: &commonpb.Link_WorkflowEvent_{WorkflowEvent: link}}},
		})
		if err != nil {
			return fmt.Errorf("signal %s %s: %w", to, SignalLink, err)
		}
		return nil
	}
	started := func(id, run string) *commonpb.Link_WorkflowEvent {
		return &commonpb.Link_WorkflowEvent{
			Namespace: in.Namespace, WorkflowId: id, RunId: run,
			Reference: &commonpb.Link_WorkflowEvent_EventRef{EventRef: &commonpb.Link_WorkflowEvent_EventReference{
				EventId: 1, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
			}},
		}
	}
	if err := signal(wid, run, started(in.ReleaseID, in.ReleaseRunID)); err != nil {
		if errors.As(err, &notFound) {
			// The run ended between the describe and the signal (continued as new): no link.
			return LinkResult{}, nil
		}
		return LinkResult{}, err
	}
	if err := signal(in.ReleaseID, in.ReleaseRunID, started(wid, run)); err != nil {
		return LinkResult{}, err
	}
	return LinkResult{WorkflowID: wid, RunID: run}, nil
}

// linkRollout runs LinkRollout for target i in runs with the change release-link-rollouts,
// and keeps the Deployment run it names in the target's status. A failure is logged: a link
// never fails a release.
func (r *run) linkRollout(ctx workflow.Context, i int) {
	if workflow.GetVersion(ctx, changeLinkRollouts, workflow.DefaultVersion, 1) < 1 {
		return
	}
	t := &r.st.Status.Targets[i]
	info := workflow.GetInfo(ctx)
	opts := linkOptions
	opts.Summary = fmt.Sprintf("link %s and the rollout of %s", info.WorkflowExecution.ID, targetString(t.Cluster, t.Namespace, t.Name))
	var fa *Activities
	var res LinkResult
	err := workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, opts), fa.LinkRollout, LinkInput{
		Namespace: info.Namespace, ReleaseID: info.WorkflowExecution.ID, ReleaseRunID: info.WorkflowExecution.RunID,
		Cluster: t.Cluster, DeploymentNS: t.Namespace, DeploymentName: t.Name, Wave: t.Wave, ReleaseName: r.spec.Name,
	}).Get(ctx, &res)
	if err != nil {
		workflow.GetLogger(ctx).Warn("Link release and rollout", "release", r.spec.Name, "deployment", targetString(t.Cluster, t.Namespace, t.Name), "error", err)
		return
	}
	t.Workflow, t.RunID = res.WorkflowID, res.RunID
}

// drainLinks takes SignalLink off its channel as it comes: the signal carries a link for the
// UI and nothing the release decides on.
func drainLinks(ctx workflow.Context) {
	ch := workflow.GetSignalChannel(ctx, SignalLink)
	workflow.Go(ctx, func(c workflow.Context) {
		for {
			ch.Receive(c, nil)
		}
	})
}

// StartSummary is the summary and details a release run shows in the Temporal UI from its
// start (StartWorkflowOptions.StaticSummary and StaticDetails, which `starter release apply`
// sets): the change and its waves in one line, then each wave's targets, approvals, bake and
// analysis, a Markdown list item each (the UI draws details as Markdown), and the author.
// Pure: it reads the spec.
//
//	release web-1-27: images app=nginx:1.27 in 2 waves (first, second)
func StartSummary(spec Spec) (summary, details string) {
	r := run{spec: spec}
	var names []string
	for _, w := range spec.Waves {
		names = append(names, w.Name)
	}
	summary = fmt.Sprintf("release %s: %s in %d waves (%s)", spec.Name, r.changeString(), len(spec.Waves), strings.Join(names, ", "))
	var b strings.Builder
	for i, w := range spec.Waves {
		var groups []string
		for _, gname := range w.Targets {
			g := spec.group(gname)
			if g == nil {
				groups = append(groups, gname)
				continue
			}
			what := strings.Join(g.Names, ", ")
			if g.Selector != "" {
				what = "selector " + g.Selector
			}
			groups = append(groups, fmt.Sprintf("%s (%s%s: %s)", gname, clusterPrefix(g.Cluster), g.Namespace, what))
		}
		fmt.Fprintf(&b, "- wave %d %s: %s", i+1, w.Name, strings.Join(groups, "; "))
		switch n := w.approvers(); {
		case n == 1:
			b.WriteString("; 1 approval")
		case n > 1:
			fmt.Fprintf(&b, "; %d approvals", n)
		}
		if w.Analysis != nil {
			fmt.Fprintf(&b, "; analysis %s", w.Analysis.String())
		}
		if bake := time.Duration(w.Bake); bake > 0 {
			fmt.Fprintf(&b, "; bake %s", bake)
		}
		b.WriteString("\n")
	}
	if spec.Author != "" {
		fmt.Fprintf(&b, "\nstarted by %s", spec.Author)
	}
	return summary, strings.TrimSpace(b.String())
}

func clusterPrefix(cluster string) string {
	if cluster == "" {
		return ""
	}
	return cluster + ":"
}

// details are the release's current details in the Temporal UI (workflow.SetCurrentDetails,
// metadata): the phase and its message, then each wave's state.
func (r *run) details() string {
	st := &r.st.Status
	var b strings.Builder
	// Sprintf, not Fprintf: workflowcheck counts writing to an io.Writer as I/O.
	b.WriteString(fmt.Sprintf("**release %s** %s, wave %d of %d: %s\n", st.Name, st.Phase, st.Wave, len(st.Waves), st.Message))
	for i, w := range st.Waves {
		b.WriteString(fmt.Sprintf("\n- wave %d %s: %s", i+1, w.Name, w.State))
	}
	return b.String()
}
