package workflows

import (
	"fmt"
	"time"

	"github.com/temporal-rollout/rollout/contract"
)

// Why a rollout waits, in one place (as Argo Rollouts' pauseContext): holds lists every reason
// from the state, and every view of it is read from that list: the status query (Status.Holds),
// the RolloutWaitingFor search attribute (waitingForAttr), the run's current details in the
// Temporal UI, and what promote and abort accept (canPromote, canAbort).

// holds lists why the rollout waits, first what must end first; id is the workflow's ID, for
// the commands a hold names.
func (s *State) holds(id string) []contract.Hold {
	ns, name := s.Status.Namespace, s.Status.Name
	updateCmd := func(u, input string) string {
		return fmt.Sprintf("temporal workflow update execute --workflow-id %s --name %s --input '%s'", id, u, input)
	}
	promoteCmd, abortCmd := updateCmd(contract.UpdatePromote, `{}`), updateCmd(contract.UpdateAbort, `{"reason":"..."}`)
	var hs []contract.Hold
	if ab := s.Abort; ab != nil {
		hs = append(hs, contract.Hold{Kind: contract.HoldAbort, Message: "aborting: " + ab.Reason, Until: ab.Until})
	}
	if s.AnnotationError != "" {
		hs = append(hs, contract.Hold{Kind: contract.HoldInvalidAnnotation, Message: s.AnnotationError,
			Do: fmt.Sprintf("kubectl edit deployment/%s -n %s (fix the temporal-rollout.io annotation)", name, ns)})
	}
	if (s.Pause != nil && *s.Pause) || (s.Pause == nil && s.Status.Paused) {
		hs = append(hs, contract.Hold{Kind: contract.HoldPaused, Message: "paused (spec.paused)", Do: fmt.Sprintf("kubectl rollout resume deployment/%s -n %s", name, ns)})
	}
	if t := s.Traffic; t != nil && t.Hold != "" {
		hs = append(hs, contract.Hold{Kind: contract.WaitingForTrafficGate, Message: "traffic gate: " + t.Hold})
	}
	if b := s.BlueGreenServices; b != nil && b.Hold != "" {
		hs = append(hs, contract.Hold{Kind: contract.WaitingForTrafficGate, Message: "traffic gate: " + b.Hold})
	}
	addPhase := func(w PhaseWait, until *time.Time) {
		h := contract.Hold{Kind: w.WaitingFor, Message: w.Message, Until: until}
		switch w.WaitingFor {
		case contract.WaitingForPromote, contract.WaitingForTimer, contract.WaitingForAnalysis:
			h.Do = promoteCmd + " (or abort: " + abortCmd + ")"
		case contract.WaitingForWeight:
			h.Do = updateCmd(contract.UpdatePromote, `{"full":true}`) + " skips the remaining steps"
		case contract.WaitingForFreeze:
			h.Do = "starter thaw (abort still works: " + abortCmd + ")"
			if w.Freeze != nil {
				u := w.Freeze.Until
				h.Until = &u
			}
		}
		hs = append(hs, h)
	}
	if st := s.Steps; st != nil {
		if st.WaitingFor != "" {
			addPhase(st.PhaseWait, st.PauseUntil)
		}
	} else if bg := s.BlueGreen; bg != nil && bg.WaitingFor != "" {
		addPhase(bg.PhaseWait, bg.Until)
	}
	return hs
}

// waitingForAttr is the RolloutWaitingFor search attribute: the first hold it names (a step's or
// blue-green phase's wait, or the traffic gate), empty when none. An abort, an invalid
// annotation and a user's pause are in the status and the details only: the attribute's
// values are those recorded histories wrote.
func waitingForAttr(hs []contract.Hold) string {
	for _, h := range hs {
		switch h.Kind {
		case contract.HoldAbort, contract.HoldInvalidAnnotation, contract.HoldPaused:
			continue
		}
		return h.Kind
	}
	return ""
}

// canPromote says whether promote (req) makes sense now: a stepped rollout paused at a step or
// measuring, a blue-green rollout paused or measuring (or, with {"full":true}, still
// scaling its preview), and never while the fleet freeze holds the phase.
func (s *State) canPromote(req contract.PromoteRequest) error {
	if bg := s.BlueGreen; bg != nil {
		// Blue-green: promote goes past a paused rollout or an analysis; {"full":true} also
		// promotes a preview still scaling, and skips both analyses.
		if bg.WaitingFor == contract.WaitingForFreeze && bg.Freeze != nil {
			return frozenError(s.Status.Namespace, s.Status.Name, bg.Freeze)
		}
		switch bg.Phase {
		case contract.BlueGreenPaused, contract.BlueGreenPrePromotionAnalysis, contract.BlueGreenPostPromotionAnalysis:
			return nil
		case contract.BlueGreenPreview:
			if req.Full {
				return nil
			}
			return fmt.Errorf("the preview of %s/%s is not ready: its new pods are not all available yet; promote {\"full\":true} promotes it as soon as they are", s.Status.Namespace, s.Status.Name)
		}
		return fmt.Errorf("%s/%s is already promoted (%s)", s.Status.Namespace, s.Status.Name, bg.Message)
	}
	cur := s.Steps
	if cur == nil || cur.Full {
		return fmt.Errorf("no stepped rollout is in progress for %s/%s", s.Status.Namespace, s.Status.Name)
	}
	if cur.WaitingFor == contract.WaitingForFreeze && cur.Freeze != nil {
		return frozenError(s.Status.Namespace, s.Status.Name, cur.Freeze)
	}
	if req.Full {
		return nil
	}
	switch cur.WaitingFor {
	case contract.WaitingForPromote, contract.WaitingForTimer, contract.WaitingForAnalysis:
		return nil
	case contract.WaitingForWeight:
		return fmt.Errorf("step %d of %d (%s) is not paused: it goes on by itself once its weight is reached; promote {\"full\":true} skips the remaining steps", cur.Step+1, len(s.StepList), s.currentStep())
	}
	return fmt.Errorf("nothing is paused for %s/%s: every step has passed and the rollout goes to 100%%", s.Status.Namespace, s.Status.Name)
}

// canAbort says whether abort makes sense now: a template other than the stable one rolls out
// and no abort is under way.
func (s *State) canAbort() error {
	switch {
	case s.Abort != nil:
		return fmt.Errorf("%s/%s is already aborting: %s", s.Status.Namespace, s.Status.Name, s.Abort.Reason)
	case s.StableHash == "":
		return fmt.Errorf("%s/%s has no revision that completed to return to", s.Status.Namespace, s.Status.Name)
	case s.LastHash == "" || s.LastHash == s.StableHash:
		return fmt.Errorf("nothing to abort: %s/%s runs its last completed template (revision %d)", s.Status.Namespace, s.Status.Name, s.Status.CurrentRevision)
	}
	return nil
}
