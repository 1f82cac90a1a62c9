package main

import (
	"fmt"
	"time"

	"github.com/temporal-rollout/rollout/contract"
)

// renderBlueGreen is a blue-green Deployment's part of renderStatus: the phase of the rollout
// in progress and what it waits for, and what the active and preview Services select.
func renderBlueGreen(row func(key, format string, a ...any), st contract.Status, bg *contract.BlueGreenStatus) {
	if bg.Phase != "" {
		phase := bg.Phase
		if bg.Promoted {
			phase += " (promoted)"
		}
		row("Blue-green", "%s, template %s (stable %s)", phase, bg.Hash, bg.StableHash)
		switch {
		case bg.WaitingFor == contract.WaitingForTimer && bg.Until != nil:
			row("Waiting for", "%s, until %s", bg.WaitingFor, bg.Until.UTC().Format(time.RFC3339))
		case bg.WaitingFor == contract.WaitingForPromote:
			row("Waiting for", "%s (starter promote %s/%s)", bg.WaitingFor, st.Namespace, st.Name)
		case bg.WaitingFor != "":
			row("Waiting for", "%s", bg.WaitingFor)
		}
		if bg.Message != "" {
			row("Blue-green message", "%s", bg.Message)
		}
		if a := bg.Analysis; a != nil {
			row("Analysis", "%d measurements, %d failed", a.Taken, a.Failures)
		}
	}
	row("Active Service", "%s", service(bg.Active, bg.ActiveSelects))
	if bg.Preview != "" {
		row("Preview Service", "%s", service(bg.Preview, bg.PreviewSelects))
	}
}

func service(name, hash string) string {
	if hash == "" {
		return name + " (no pod-template-hash selected yet)"
	}
	return fmt.Sprintf("%s → pod-template-hash %s", name, hash)
}
