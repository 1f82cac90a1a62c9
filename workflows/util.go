package workflows

import (
	"bytes"
	"fmt"
	"io"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/contract"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

var (
	saNamespace  = temporal.NewSearchAttributeKeyKeyword(SearchAttrNamespace)
	saDeployment = temporal.NewSearchAttributeKeyKeyword(SearchAttrDeployment)
	saRevision   = temporal.NewSearchAttributeKeyInt64(SearchAttrRevision)
	saOutcome    = temporal.NewSearchAttributeKeyKeyword(SearchAttrOutcome)
	saWaitingFor = temporal.NewSearchAttributeKeyKeyword(SearchAttrWaitingFor)
)

// upsertSearchAttributes, at the end of a run, records the revision and outcome for filtering
// the workflow list, and a readable memo ("default/web: revision 3 → 4, Complete"). It only runs when the starter set
// K8sNamespace at start, which it does only where the attributes are registered, so an
// unregistered server never sees an upsert it would reject.
func (r *rollout) upsertSearchAttributes(ctx workflow.Context, outcome string) {
	sa := workflow.GetTypedSearchAttributes(ctx)
	if !sa.ContainsKey(saNamespace) || outcome == "" {
		return
	}
	updates := []temporal.SearchAttributeUpdate{saRevision.ValueSet(r.Status.TargetRevision)}
	if !sa.ContainsKey(saDeployment) {
		updates = append(updates, saDeployment.ValueSet(r.in.Name))
	}
	if outcome != "" {
		updates = append(updates, saOutcome.ValueSet(outcome))
	}
	summary := fmt.Sprintf("%s/%s: revision %d → %d, %s", r.in.Namespace, r.in.Name, r.fromRevision, r.Status.TargetRevision, outcome)
	if r.stateDirty {
		// The step state marked in this task goes in the same two upserts.
		r.stateDirty = false
		r.writeStepState(ctx, summary, updates)
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		r.log.Warn("Upsert search attributes failed", "error", err)
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{contract.MemoSummary: summary}); err != nil {
		r.log.Warn("Upsert memo failed", "error", err)
	}
}
