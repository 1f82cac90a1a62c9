package workflows

import (
	"github.com/temporal-rollout/rollout/activities"
)

// Notifications. A Deployment annotated temporal-rollout.io/notify gets a webhook on its
// rollout's events (k8s.NotifyEvents): a step (or blue-green phase) reached, a pause for
// promote, promote, abort, a failed analysis, completion. Each delivery is a Notify activity
// started from a goroutine, so the rollout never waits for it; a webhook that fails is retried
// for a while and then only logged. Without the annotation nothing is sent, and the workflow issues no command it
// did not issue before.
//
// Delivery is at least once: notifications not delivered when a run continues as new are
// carried to the next run, which sends them again.

// notifier is a run's notification state.
type notifier struct {
	// warned is the invalid annotation value already warned about.
	warned string
	// pending are the notifications not yet delivered (or given up on).
	pending []*activities.NotifyInput
	// ending: the run is continuing as new; notifications not yet started wait for the next.
	ending bool
}
