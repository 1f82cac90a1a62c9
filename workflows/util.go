package workflows

import (
	"bytes"
	"io"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

var (
	saNamespace  = temporal.NewSearchAttributeKeyKeyword(contract.SearchAttrNamespace)
	saDeployment = temporal.NewSearchAttributeKeyKeyword(contract.SearchAttrDeployment)
	saRevision   = temporal.NewSearchAttributeKeyInt64(contract.SearchAttrRevision)
	saOutcome    = temporal.NewSearchAttributeKeyKeyword(contract.SearchAttrOutcome)
	saWaitingFor = temporal.NewSearchAttributeKeyKeyword(contract.SearchAttrWaitingFor)
)

// a names the activities for workflow.ExecuteActivity and ExecuteLocalActivity (never called).
var a *activities.Activities

// withSummary names the local activities started with ctx in the Temporal UI (metadata, not a
// command: histories replay unchanged).
func withSummary(ctx workflow.Context, summary string) workflow.Context {
	o := workflow.GetLocalActivityOptions(ctx)
	o.Summary = summary
	return workflow.WithLocalActivityOptions(ctx, o)
}
