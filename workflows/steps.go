package workflows

import (
	"fmt"
	"strconv"
	"time"

	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// Stepped rollouts. A Deployment whose temporal-rollout.io/steps
// annotation lists steps rolls a new template out step by step: setWeight caps the new
// ReplicaSet (k8s.Canary), pause waits on a durable timer or for promote, analysis measures a
// Prometheus query. The state is the workflow's, carried over Continue-As-New, so a worker that
// dies mid-step changes nothing: a timed pause waits only what is left of it.
//
// Steps apply to a template other than the stable one (the last that completed). A rollout to
// the stable template (abort, rollback, `kubectl rollout undo` to it) skips them, as does the
// first rollout of a new Deployment.

// canaryStrategy drives a stepped rollout's steps (State.Steps, State.StepList) on the shared phase
// machinery (phase.go): which step comes next, what each waits for, and promote.
type canaryStrategy struct {
	phase
}

func newCanary(ctx workflow.Context, fx *effects) *canaryStrategy {
	c := &canaryStrategy{phase: newPhase(ctx, fx)}
	c.fired, c.verdict = c.stepTimerFired, c.stepVerdict
	return c
}

// request weighs the steps annotation for template hash, a template other than the stable one
// (canaryRequest has ruled out the rest): the cap for k8s.Decide, nil to roll out as upstream
// does. It starts a stepped rollout for a new template, and holds the rollout for an invalid
// annotation until it is fixed.
func (c *canaryStrategy) stepsRequest(ctx workflow.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, hash string) *k8s.Canary {
	steps, err := k8s.ParseSteps(d.Annotations)
	if err == nil && len(steps) > 0 {
		err = k8s.StepsApply(d)
	}
	if err == nil {
		_, err = k8s.ParseAutoRollback(d.Annotations)
	}
	if err == nil {
		err = checkTraffic(d.Annotations, steps)
	}
	if err != nil {
		c.endSteps()
		return c.holdInvalid(ctx, d, hash, err)
	}
	c.Warned, c.AnnotationError = "", ""
	if len(steps) == 0 {
		c.endSteps()
		return nil
	}
	// Set at every sync: a run continued from one recorded before rolloutRevision took the
	// Deployment's annotation.
	rev := rolloutRevision(rss, hash)
	if c.Steps == nil || c.Steps.Hash != hash {
		c.endSteps()
		c.StepList = steps
		c.Steps = &stepsState{Hash: hash, Revision: rev}
		c.recordStep(ctx, "RolloutStepsStarted", fmt.Sprintf("Rolling out template %s in %d steps", hash, len(steps)))
		c.enterStep(ctx, 0)
	}
	c.StepList = steps
	s := c.Steps
	s.Revision = rev
	if s.Full || s.Step >= len(steps) {
		return nil
	}
	cp := &k8s.Canary{Hash: hash, Weight: c.weight(), Scale: k8s.ActiveCanaryScale(steps, s.Step)}
	if s.WaitingFor != contract.WaitingForWeight {
		cp.Hold, cp.Message = true, s.Message
	}
	return cp
}

// enter makes step i current: a setWeight waits for its weight, a pause starts its timer or
// waits for promote, an analysis starts measuring. Past the last step the rollout goes to
// 100%.
func (c *canaryStrategy) enterStep(ctx workflow.Context, i int) {
	s := c.Steps
	c.stop()
	s.Step, s.PauseUntil, s.Analysis, s.Freeze = i, nil, nil, nil
	n := len(c.StepList)
	if i >= n {
		s.WaitingFor, s.Message = "", fmt.Sprintf("All %d steps passed: rolling out to 100%%", n)
		c.recordStep(ctx, "RolloutStepsPassed", s.Message)
		return
	}
	step := c.StepList[i]
	prefix := fmt.Sprintf("Step %d of %d (%s)", i+1, n, step)
	if c.enterTraffic(ctx, i, prefix) {
		return
	}
	switch {
	case step.SetWeight != nil:
		s.WaitingFor, s.Message = contract.WaitingForWeight, prefix+": scaling"
	case step.Pause != nil && step.Pause.Duration > 0:
		until := workflow.Now(ctx).Add(time.Duration(step.Pause.Duration)).UTC()
		s.PauseUntil = &until
		s.WaitingFor, s.Message = contract.WaitingForTimer, fmt.Sprintf("%s: paused until %s", prefix, until.Format(time.RFC3339))
		c.startPauseTimer(ctx)
	case step.Pause != nil:
		s.WaitingFor, s.Message = contract.WaitingForPromote, prefix+": paused until promoted"
	case step.Analysis != nil:
		s.Analysis = &contract.AnalysisStatus{Step: i}
		s.WaitingFor, s.Message = contract.WaitingForAnalysis, prefix+": measuring"
		c.startAnalysis(ctx, c.StepList[i].Analysis, s.Analysis, s.Hash)
	}
	c.recordStep(ctx, "RolloutStep", s.Message)
}

// enterTraffic enters a setHeaderRoute or setCanaryScale step. Since changeTrafficStepPods it
// waits, as a setWeight step does, until the canaryStrategy has its pods available and the route
// carries what the step asks (router.stepReached): a pause after it starts only then, and a
// header route goes only to a canaryStrategy with available pods. Before, it passed at once (as Argo
// Rollouts does) and the sync that followed wrote the route or scaled the canary. It reports
// whether step i was one.
func (c *canaryStrategy) enterTraffic(ctx workflow.Context, i int, prefix string) bool {
	step := c.StepList[i]
	if step.SetHeaderRoute == nil && step.SetCanaryScale == nil {
		return false
	}
	c.Dirty = true
	if workflow.GetVersion(ctx, changeTrafficStepPods, workflow.DefaultVersion, 1) == 1 {
		c.Steps.WaitingFor, c.Steps.Message = contract.WaitingForWeight, prefix+": waiting for the canary's pods"
		c.recordStep(ctx, "RolloutStep", c.Steps.Message)
		return true
	}
	c.Steps.WaitingFor, c.Steps.Message = "", prefix+": set"
	c.recordStep(ctx, "RolloutStep", c.Steps.Message)
	c.enterStep(ctx, i+1)
	return true
}

// next passes the current step: it enters the next one, or, while the fleet is frozen, holds
// before it, asking again on a timer.
func (c *canaryStrategy) nextStep(ctx workflow.Context) {
	s := c.Steps
	f := c.freezeHold(ctx)
	if f == nil {
		c.enterStep(ctx, s.Step+1)
		return
	}
	c.stop()
	s.PauseUntil, s.Freeze = nil, f
	s.WaitingFor, s.Message = contract.WaitingForFreeze, c.frozenMessage()
	c.stepFreezeLook(ctx)
	c.recordStepWarning(ctx, "RolloutFrozen", s.Message)
}

// reached passes a setWeight (or traffic) step once the sync's plan reached its weight and
// routeReached says the route carries it.
func (c *canaryStrategy) weightReached(ctx workflow.Context, plan k8s.Plan, routeReached func() bool) {
	if s := c.Steps; s != nil && !s.Full && s.WaitingFor == contract.WaitingForWeight && plan.CanaryReached && routeReached() {
		c.recordStep(ctx, "RolloutStepReached", fmt.Sprintf("Step %d of %d (%s) reached", s.Step+1, len(c.StepList), c.currentStep()))
		c.nextStep(ctx)
		c.Dirty = true
	}
}

// resume restarts, in a run continued from another, the timer or analysis the step waits for:
// a timed pause waits only what is left of it.
func (c *canaryStrategy) resumeSteps(ctx workflow.Context) {
	s := c.Steps
	if s == nil || s.Full {
		return
	}
	switch s.WaitingFor {
	case contract.WaitingForTimer:
		c.startPauseTimer(ctx)
	case contract.WaitingForAnalysis:
		c.startAnalysis(ctx, c.StepList[s.Step].Analysis, s.Analysis, s.Hash)
	case contract.WaitingForFreeze:
		c.stepFreezeLook(ctx)
	}
}

func (c *canaryStrategy) startPauseTimer(ctx workflow.Context) {
	s := c.Steps
	c.startTimer(ctx, strconv.Itoa(s.Step), *s.PauseUntil, fmt.Sprintf("pause at step %d of %d of %s/%s until %s", s.Step+1, len(c.StepList), c.dep.Namespace, c.dep.Name, s.PauseUntil.UTC().Format(time.RFC3339)))
}

// stepFreezeLook starts the held rollout's next look at the freeze.
func (c *canaryStrategy) stepFreezeLook(ctx workflow.Context) {
	s := c.Steps
	c.startTimer(ctx, strconv.Itoa(s.Step), nextLook(ctx, s.Freeze), fmt.Sprintf("fleet freeze: %s/%s asks again before step %d", c.dep.Namespace, c.dep.Name, s.Step+1))
}

// stepTimerFired: the step's pause passed (the next step), or a frozen rollout's next look at the
// freeze (on, or hold on).
func (c *canaryStrategy) stepTimerFired(ctx workflow.Context) {
	s := c.Steps
	if s == nil || strconv.Itoa(s.Step) != c.timerFor {
		return
	}
	switch s.WaitingFor {
	case contract.WaitingForFreeze:
		if !c.recheckFreeze(ctx, &s.PhaseWait, c.frozenMessage, c.stepFreezeLook, fmt.Sprintf("going on past step %d of %d", s.Step+1, len(c.StepList))) {
			c.enterStep(ctx, s.Step+1)
			c.Dirty = true
		}
		return
	case contract.WaitingForTimer:
	default:
		return
	}
	c.recordStep(ctx, "RolloutStepReached", fmt.Sprintf("Step %d of %d (%s) done", s.Step+1, len(c.StepList), c.currentStep()))
	c.nextStep(ctx)
	c.Dirty = true
}

// stepVerdict goes on from an analysis step's verdict.
func (c *canaryStrategy) stepVerdict(ctx workflow.Context, res analysisResult) {
	s := c.Steps
	if s == nil || s.WaitingFor != contract.WaitingForAnalysis {
		return
	}
	prefix := fmt.Sprintf("Step %d of %d (%s)", s.Step+1, len(c.StepList), c.currentStep())
	c.analysisVerdict(ctx, res, prefix+": analysis", "analysis failed at step "+fmt.Sprint(s.Step+1)+": ", &s.PhaseWait, func() { c.nextStep(ctx) })
}

// promote goes past the step the rollout waits at, or ({"full":true}) skips every step left.
func (c *canaryStrategy) promoteSteps(ctx workflow.Context, req contract.PromoteRequest) {
	s := c.Steps
	c.stop()
	if req.Full {
		s.Full = true
		s.WaitingFor, s.Message, s.PauseUntil = "", "promoted in full: the remaining steps are skipped", nil
		c.recordStep(ctx, "RolloutPromoted", fmt.Sprintf("Promoted in full at step %d of %d: rolling out to 100%%", s.Step+1, len(c.StepList)))
		return
	}
	c.recordStep(ctx, "RolloutPromoted", fmt.Sprintf("Promoted past step %d of %d (%s)", s.Step+1, len(c.StepList), c.currentStep()))
	c.enterStep(ctx, s.Step+1)
}

// end forgets the stepped rollout.
func (c *canaryStrategy) endSteps() {
	if c.Steps != nil {
		c.stop()
	}
	c.Steps, c.StepList = nil, nil
}
