//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// TestStepsHeldByFleetFreeze: a fleet freeze (`starter freeze`) holds a stepped rollout before
// its next step, at its weight, well past its pause, with a Warning event, Freeze in the status
// query and `starter status`, and promote refused; `starter thaw` lets it go on to completion.
func TestStepsHeldByFleetFreeze(t *testing.T) {
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	steps := `[{"setWeight":20},{"pause":{"duration":"5s"}},{"setWeight":60},{"pause":{"duration":"5s"}}]`
	create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("25%", "25%"), withSteps(steps)))
	waitComplete(t, ns, "web")

	reason := "e2e freeze " + ns
	out, err := starterCmd(t, "freeze", "--until", "30m", "--reason", reason, "--identity", "ops")
	if err != nil {
		t.Fatalf("starter freeze: %v\n%s", err, out)
	}
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			_, _ = starterCmd(t, "thaw")
		}
	})
	obs := observe(t, ns, 13, 8)
	setImage(t, ns, "web", "nginx:1.26")

	// The first step runs (a rollout under way when the freeze came would hold at its own
	// next step); the next one is held.
	const held = "nginx:1.26=2/2 nginx:1.25=8/8"
	st := waitSteps(t, ns, "web", 1, contract.WaitingForFreeze, held)
	if st.Steps.Weight != 20 || st.Steps.Freeze == nil || st.Steps.Freeze.Reason != reason || st.Steps.Freeze.By != "ops" ||
		!strings.Contains(st.Steps.Message, "Held before step 2 of 4 (pause 5s): fleet freeze until") {
		t.Errorf("held: steps %+v (freeze %+v), want weight 20, held before step 2 by the freeze", st.Steps, st.Steps.Freeze)
	}
	waitEvent(t, ns, "web", "RolloutFrozen: Held before step 2 of 4 (pause 5s): fleet freeze until")
	waitEvent(t, ns, "web", "("+reason+")")
	d := getDeployment(t, ns, "web")
	if c := k8s.GetCondition(d.Status, appsv1.DeploymentProgressing); c == nil || c.Reason != k8s.CanaryPausedReason || !strings.Contains(c.Message, "Held before step 2 of 4") {
		t.Errorf("Progressing condition while held: %+v, want CanaryPaused with the hold's message", c)
	}
	id := workflowID(ns, "web")
	eventually(t, 30*time.Second, func() string {
		return listed(t, fmt.Sprintf(`%s = "%s" AND WorkflowId = "%s"`, contract.SearchAttrWaitingFor, contract.WaitingForFreeze, id), id)
	})
	// Twice the pause and more: nothing moves.
	for i := 0; i < 12; i++ {
		time.Sleep(time.Second)
		if got := sizes(t, ns); got != held {
			t.Fatalf("%ds into the freeze: %s, want %s", i+1, got, held)
		}
	}
	if st := queryStatus(t, ns, "web"); st.Steps == nil || st.Steps.Step != 1 || st.Steps.WaitingFor != contract.WaitingForFreeze {
		t.Errorf("after 12s frozen: steps %+v, want still held at step 1", st.Steps)
	}
	out, err = starterCmd(t, "status", ns+"/web")
	if err != nil || !strings.Contains(out, "Freeze, until") || !strings.Contains(out, reason) {
		t.Errorf("starter status while held: %v\n%s\nwant Waiting for Freeze with the reason", err, out)
	}
	out, err = starterCmd(t, "promote", ns+"/web")
	if err == nil || !strings.Contains(out, "promote refused: the fleet is frozen until") || !strings.Contains(out, reason) {
		t.Errorf("starter promote while held: %v\n%s\nwant refused, naming the freeze", err, out)
	}
	if got := sizes(t, ns); got != held {
		t.Errorf("after the refused promote: %s, want %s", got, held)
	}

	if out, err := starterCmd(t, "thaw", "--identity", "ops"); err != nil {
		t.Fatalf("starter thaw: %v\n%s", err, out)
	}
	thawed = true
	waitEvent(t, ns, "web", "RolloutThawed: Fleet freeze over")
	// On through the pause to 60%, its pause, then to the end.
	d = waitComplete(t, ns, "web")
	obs.stop()
	if got := sizes(t, ns); got != "nginx:1.26=10/10 nginx:1.25=0/0" {
		t.Errorf("after the thaw: %s, want all on the new template", got)
	}
	if d.Status.Replicas != 10 || d.Status.UpdatedReplicas != 10 || d.Status.AvailableReplicas != 10 {
		t.Errorf("status %+v, want 10 replicas, all updated and available", d.Status)
	}
	for _, want := range []string{"RolloutStepReached: Step 1 of 4 (setWeight 20) reached", "RolloutStep: Step 2 of 4 (pause 5s): paused until",
		"RolloutStepReached: Step 3 of 4 (setWeight 60) reached",
		"RolloutStepReached: Step 4 of 4 (pause 5s) done", "RolloutStepsPassed"} {
		waitEvent(t, ns, "web", want)
	}
	if n := strings.Count(strings.Join(events(t, ns, "web"), "\n"), "RolloutFrozen"); n != 1 {
		t.Errorf("%d RolloutFrozen events, want 1: %s", n, fmt.Sprint(events(t, ns, "web")))
	}
}

// TestBlueGreenHeldByFleetFreeze: a blue-green rollout's automatic promotion holds during the
// fleet freeze, the preview ready and the active Service on the old pods; after `starter thaw`
// it promotes and completes.
func TestBlueGreenHeldByFleetFreeze(t *testing.T) {
	ns := newNamespace(t)
	h1 := newBlueGreen(t, ns, `{"activeService":"web","previewService":"web-preview","scaleDownDelaySeconds":3}`)
	reason := "e2e freeze " + ns
	if out, err := starterCmd(t, "freeze", "--until", "30m", "--reason", reason); err != nil {
		t.Fatalf("starter freeze: %v\n%s", err, out)
	}
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			_, _ = starterCmd(t, "thaw")
		}
	})
	setImage(t, ns, "web", "nginx:1.26")
	h2 := ""
	eventually(t, 60*time.Second, func() string {
		if st := queryStatus(t, ns, "web"); st.BlueGreen != nil && st.BlueGreen.Hash != "" {
			h2 = st.BlueGreen.Hash
			return ""
		}
		return "no blue-green rollout yet"
	})
	held := fmt.Sprintf("replicasets nginx:1.26=3/3 nginx:1.25=3/3; active %s; preview %s", sel(h1), sel(h2))
	st := waitBlueGreen(t, ns, contract.BlueGreenPaused, contract.WaitingForFreeze, held)
	if bg := st.BlueGreen; bg.Freeze == nil || bg.Freeze.Reason != reason || bg.Promoted {
		t.Errorf("held: blueGreen %+v, want the freeze and not promoted", bg)
	}
	waitEvent(t, ns, "web", "RolloutFrozen: Blue-green: automatic promotion held: fleet freeze until")
	for i := 0; i < 8; i++ {
		time.Sleep(time.Second)
		if got := bgState(t, ns); got != held {
			t.Fatalf("%ds into the freeze: %s, want %s", i+1, got, held)
		}
	}
	if out, err := starterCmd(t, "promote", ns+"/web"); err == nil || !strings.Contains(out, "promote refused: the fleet is frozen until") {
		t.Errorf("starter promote while held: %v\n%s\nwant refused, naming the freeze", err, out)
	}
	if out, err := starterCmd(t, "thaw"); err != nil {
		t.Fatalf("starter thaw: %v\n%s", err, out)
	}
	thawed = true
	waitEvent(t, ns, "web", "RolloutPromoted: Promoted automatically after the fleet freeze")
	waitComplete(t, ns, "web")
	eventually(t, 60*time.Second, func() string {
		if got, want := bgState(t, ns), fmt.Sprintf("replicasets nginx:1.26=3/3 nginx:1.25=0/0; active %s; preview %s", sel(h2), sel(h2)); got != want {
			return fmt.Sprintf("after the thaw: %s, want %s", got, want)
		}
		return ""
	})
	waitEvent(t, ns, "web", "RolloutThawed: Fleet freeze over")
}
