package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// The fleet freeze (docs/releases.md): while `starter freeze` holds, a stepped rollout that is
// about to enter its next step holds where it is, at its current weight, until `starter thaw`
// or the freeze's end. The workflow learns the freeze from the FleetFreeze local activity (its
// answer is in the history), only when a step is passed, and while held again on a durable
// timer, every freezeRecheck or at the freeze's end if sooner. An error asking is no freeze: a
// rollout never sticks on an unreachable freeze workflow. A blue-green rollout's automatic
// promotion holds the same way, in its Paused phase. Promote is refused during a freeze; abort
// always works. Plain rollouts are not held.

// freezeRecheck is how often a held rollout asks the freeze again.
const freezeRecheck = 15 * time.Second

// freezeChecked reports whether this run asks for the fleet freeze (the versioned branch).
func freezeChecked(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, changeFleetFreezeHold, workflow.DefaultVersion, 1) >= 1
}

func blueGreenFrozenMessage(f *contract.FreezeHold) string {
	return fmt.Sprintf("Blue-green: automatic promotion held: %s %s (%s)", k8s.FleetFreezeHeldText, f.Until.Format(time.RFC3339), f.Reason)
}

func frozenError(ns, name string, f *contract.FreezeHold) error {
	return fmt.Errorf("promote refused: the fleet is frozen until %s (%s); %s/%s goes on after `starter thaw` or the freeze's end, and abort still works", f.Until.Format(time.RFC3339), f.Reason, ns, name)
}
