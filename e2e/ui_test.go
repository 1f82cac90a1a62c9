//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/temporal-rollout/rollout/contract"
)

// TestUISummaries (issue 48, in part): what the Temporal UI shows of a stepped rollout held at
// a timed pause, read back through Temporal's API: each local activity's marker, each
// activity and each timer carries a one-line summary naming the object and the change
// ("scale web-… 0 → 2", "pause at step 2 of 2 of ns/web until …", "wait for the next move of
// ns/web").
func TestUISummaries(t *testing.T) {
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	create(t, newDeployment(ns, "web", 4, "nginx:v1", rolling("25%", "25%"), withSteps(`[{"setWeight":50},{"pause":{"duration":"1h"}}]`)))
	waitComplete(t, ns, "web")
	setImage(t, ns, "web", "nginx:v2")
	waitHeld(t, ns, 2, contract.WaitingForTimer)
	ctx := context.Background()
	summaries := map[string][]string{}
	eventually(t, time.Minute, func() string {
		summaries = map[string][]string{}
		iter := env.tc.GetWorkflowHistory(ctx, workflowID(ns, "web"), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			e, err := iter.Next()
			if err != nil {
				return err.Error()
			}
			p := e.GetUserMetadata().GetSummary()
			if p == nil {
				continue
			}
			var s string
			if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
				return "decode summary: " + err.Error()
			}
			summaries[e.GetEventType().String()] = append(summaries[e.GetEventType().String()], s)
		}
		if len(summaries["TimerStarted"]) == 0 {
			return fmt.Sprintf("no timer summary yet: %q", summaries)
		}
		return ""
	})
	has := func(kind, prefix string) {
		t.Helper()
		for _, s := range summaries[kind] {
			if strings.HasPrefix(s, prefix) {
				return
			}
		}
		t.Errorf("%s: no summary starting %q among %q", kind, prefix, summaries[kind])
	}
	newRS := "web-" + hashOf(t, ns, "nginx:v2")
	has("MarkerRecorded", "create ReplicaSet "+newRS+" with ")
	has("MarkerRecorded", "write the status of "+ns+"/web: ")
	has("MarkerRecorded", "record RolloutStep")
	has("TimerStarted", "pause at step 2 of 2 of "+ns+"/web until ")
	has("ActivityTaskScheduled", "wait for the next move of "+ns+"/web")
	var scaled bool
	for _, s := range summaries["MarkerRecorded"] {
		if strings.HasPrefix(s, "scale web-") && strings.Contains(s, " → ") {
			scaled = true
		}
	}
	if !scaled {
		t.Errorf("no scale summary (\"scale web-… N → M\") among %q", summaries["MarkerRecorded"])
	}
	if out, err := updateCLI(ns, "web", contract.UpdatePromote, `{"full":true}`); err != nil {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	waitCompleteImage(t, ns, "nginx:v2")
}
