package release

import (
	"testing"

	"github.com/temporal-rollout/rollout/activities"
)

// The fleet freeze's IDs are repeated in activities (which this package imports, so it cannot
// import this one): they agree.
func TestFleetFreezeIDsAgree(t *testing.T) {
	if activities.FleetFreezeID != FleetFreezeID || activities.QueryFleetFreeze != QueryFreeze {
		t.Errorf("activities has %q/%q, release %q/%q", activities.FleetFreezeID, activities.QueryFleetFreeze, FleetFreezeID, QueryFreeze)
	}
}
