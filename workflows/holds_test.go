package workflows

import (
	"strings"
	"testing"
	"time"

	"github.com/temporal-rollout/rollout/contract"
)

// TestHolds: why a rollout waits, from the state, in the order a user must clear them, with the
// command that does; and the RolloutWaitingFor search attribute read from the same list.
func TestHolds(t *testing.T) {
	until := time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)
	yes, no := true, false
	base := func() State { return State{Status: contract.Status{Namespace: "shop", Name: "web"}} }
	tests := []struct {
		name    string
		state   func(s *State)
		kinds   []string
		waiting string
		do      string
	}{
		{"nothing", func(*State) {}, nil, "", ""},
		{"step paused until promoted", func(s *State) {
			s.Steps = &stepsState{PhaseWait: PhaseWait{WaitingFor: contract.WaitingForPromote, Message: "Step 2 of 3 (pause): paused until promoted"}}
		}, []string{contract.WaitingForPromote}, contract.WaitingForPromote, "temporal workflow update execute --workflow-id deployment/shop/web --name promote --input '{}'"},
		{"user pause over a timed step", func(s *State) {
			s.Status.Paused = true
			s.Steps = &stepsState{PhaseWait: PhaseWait{WaitingFor: contract.WaitingForTimer}, PauseUntil: &until}
		}, []string{contract.HoldPaused, contract.WaitingForTimer}, contract.WaitingForTimer, "kubectl rollout resume deployment/web -n shop"},
		{"resume asked while spec.paused", func(s *State) { s.Status.Paused, s.Pause = true, &no }, nil, "", ""},
		{"pause asked", func(s *State) { s.Pause = &yes }, []string{contract.HoldPaused}, "", "kubectl rollout resume deployment/web -n shop"},
		{"abort with a traffic gate", func(s *State) {
			s.Abort = &abortState{Reason: "analysis failed"}
			s.Traffic = &contract.TrafficStatus{Hold: "no available canary pod"}
		}, []string{contract.HoldAbort, contract.WaitingForTrafficGate}, contract.WaitingForTrafficGate, ""},
		{"invalid annotation", func(s *State) { s.AnnotationError = "Rollout held: invalid annotation: x" },
			[]string{contract.HoldInvalidAnnotation}, "", "kubectl edit deployment/web -n shop (fix the temporal-rollout.io annotation)"},
		{"blue-green frozen", func(s *State) {
			s.BlueGreen = &blueGreenState{PhaseWait: PhaseWait{WaitingFor: contract.WaitingForFreeze, Freeze: &contract.FreezeHold{Until: until, Reason: "sale"}}}
		}, []string{contract.WaitingForFreeze}, contract.WaitingForFreeze, "starter thaw"},
		{"steps passed, blue-green state ignored", func(s *State) {
			s.Steps = &stepsState{Full: true}
			s.BlueGreen = &blueGreenState{PhaseWait: PhaseWait{WaitingFor: contract.WaitingForPromote}}
		}, nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base()
			tt.state(&s)
			hs := s.holds(contract.WorkflowID("shop", "web"))
			var kinds []string
			for _, h := range hs {
				kinds = append(kinds, h.Kind)
			}
			if strings.Join(kinds, ",") != strings.Join(tt.kinds, ",") {
				t.Errorf("holds: got %v, want %v", kinds, tt.kinds)
			}
			if got := waitingForAttr(hs); got != tt.waiting {
				t.Errorf("waitingForAttr: got %q, want %q", got, tt.waiting)
			}
			if tt.do != "" && (len(hs) == 0 || !strings.HasPrefix(hs[0].Do, tt.do)) {
				t.Errorf("first hold's command: got %+v, want it to start %q", hs, tt.do)
			}
		})
	}
}
