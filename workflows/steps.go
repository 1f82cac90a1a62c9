package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/activities"
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

// Outcomes of an analysis.
const (
	analysisSuccessful   = "Successful"
	analysisFailed       = "Failed"
	analysisInconclusive = "Inconclusive"
)

// maxKeptMeasurements bounds the measurements the state (and the status query) keeps; every
// one is in the history as its activity's result.
const maxKeptMeasurements = 10

// stepState is a stepped rollout's part of a run.
type stepState struct {
	canaryReq *k8s.Canary
	// rolloutAnnotations: k8s.RolloutAnnotations at the last sync.
	rolloutAnnotations string
	// releaseRollback: the template of the last sync is the one a release's rollback restored
	// (k8s.ReleaseRestoredHashAnnotation): the fleet freeze does not hold it.
	releaseRollback bool
	aborted         *abortState
	// stepWaits: the step's timer (for step stepTimerFor) and analysis.
	stepWaits    phaseWaits
	stepTimerFor int
}

// updateState holds the users' updates: queued by their handlers (kick wakes the main loop),
// applied by the main loop, answered once applied and recorded (returnUpdates).
type updateState struct {
	updates, applied []*update
	updateSeq        int
	kick             workflow.Channel
	ended            bool
}

// update is a promote or abort waiting for the main loop.
type update struct {
	seq     int
	promote *PromoteRequest
	abort   *AbortRequest
	err     error
	done    bool
}

// parseUpdate decodes an update's payload strictly: a JSON object with only the known fields.
// No payload is {}.
func parseUpdate(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytesReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("payload %s: %w", string(raw), err)
	}
	if dec.More() {
		return fmt.Errorf("payload %s has data after the object", string(raw))
	}
	return nil
}

// registerUpdates sets the promote and abort update handlers. Each validator rejects what makes
// no sense now (promote with nothing paused, abort with nothing to abort); an accepted update
// is applied by the main loop, and returns the status once it is applied and recorded.
func (r *rollout) registerUpdates(ctx workflow.Context) error {
	promote := func(ctx workflow.Context, raw json.RawMessage) (Status, error) {
		var req PromoteRequest
		if err := parseUpdate(raw, &req); err != nil {
			return Status{}, err
		}
		return r.awaitUpdate(ctx, &update{promote: &req})
	}
	validatePromote := func(ctx workflow.Context, raw json.RawMessage) error {
		var req PromoteRequest
		if err := parseUpdate(raw, &req); err != nil {
			return err
		}
		return r.canPromote(req)
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdatePromote, promote, workflow.UpdateHandlerOptions{Validator: validatePromote}); err != nil {
		return fmt.Errorf("register promote: %w", err)
	}
	abort := func(ctx workflow.Context, raw json.RawMessage) (Status, error) {
		var req AbortRequest
		if err := parseUpdate(raw, &req); err != nil {
			return Status{}, err
		}
		return r.awaitUpdate(ctx, &update{abort: &req})
	}
	validateAbort := func(ctx workflow.Context, raw json.RawMessage) error {
		var req AbortRequest
		if err := parseUpdate(raw, &req); err != nil {
			return err
		}
		return r.canAbort()
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateAbort, abort, workflow.UpdateHandlerOptions{Validator: validateAbort}); err != nil {
		return fmt.Errorf("register abort: %w", err)
	}
	return nil
}

// awaitUpdate queues an update for the main loop and waits until it was applied and synced.
func (r *rollout) awaitUpdate(ctx workflow.Context, u *update) (Status, error) {
	r.updateSeq++
	u.seq = r.updateSeq
	r.updates = append(r.updates, u)
	r.kick.SendAsync(true)
	if err := workflow.Await(ctx, func() bool { return u.done || r.ended }); err != nil {
		return Status{}, err
	}
	if u.err != nil {
		return Status{}, u.err
	}
	if !u.done {
		return Status{}, errors.New("the workflow ended before the update was applied")
	}
	return r.queryStatus(), nil
}

// applyUpdates applies queued updates (main loop only). Each is validated again: the state may
// have moved since its validator ran.
func (r *rollout) applyUpdates(ctx workflow.Context) bool {
	applied := len(r.applied)
	for len(r.updates) > 0 {
		u := r.updates[0]
		r.updates = r.updates[1:]
		switch {
		case u.promote != nil:
			if u.err = r.canPromote(*u.promote); u.err == nil {
				u.err = r.promoteFrozen(ctx)
			}
			if u.err == nil {
				r.promote(ctx, *u.promote)
			}
		case u.abort != nil:
			if u.err = r.canAbort(); u.err == nil {
				reason := "aborted by user"
				if strings.TrimSpace(u.abort.Reason) != "" {
					reason += ": " + u.abort.Reason
				}
				r.startAbort(ctx, reason)
			}
		}
		if u.err != nil {
			u.done = true
			continue
		}
		r.Dirty = true
		r.applied = append(r.applied, u)
	}
	return len(r.applied) > applied
}

// returnUpdates answers the updates just applied, before the sync they call for: it marks
// them done and ends the workflow task (a 1ms timer), whose completion carries their answers
// to the caller. The sync then runs in the next task. Answered after the sync instead, an
// update waited for the sync's writes, 300 to 400ms at QPS 200 while 100 Deployments rolled.
func (r *rollout) returnUpdates(ctx workflow.Context) {
	r.syncedUpdates()
	_ = workflow.Sleep(ctx, time.Millisecond)
}

// syncedUpdates marks the updates applied before a sync as done, once it ran.
func (r *rollout) syncedUpdates() {
	for _, u := range r.applied {
		u.done = true
		r.recordUpdate = true
	}
	r.applied = nil
}

func (r *rollout) promote(ctx workflow.Context, req PromoteRequest) {
	if r.BlueGreen != nil {
		r.promoteBlueGreen(ctx, req, "Promoted")
		return
	}
	s := r.Steps
	r.stopStepWaits()
	if req.Full {
		s.Full = true
		s.WaitingFor, s.Message, s.PauseUntil = "", "promoted in full: the remaining steps are skipped", nil
		r.recordStep(ctx, "RolloutPromoted", fmt.Sprintf("Promoted in full at step %d of %d: rolling out to 100%%", s.Step+1, len(r.StepList)))
		return
	}
	r.recordStep(ctx, "RolloutPromoted", fmt.Sprintf("Promoted past step %d of %d (%s)", s.Step+1, len(r.StepList), r.currentStep()))
	r.enterStep(ctx, s.Step+1)
}

// canaryRequest weighs a snapshot's steps before a decision and returns the cap for
// k8s.Decide (nil: roll out as upstream does). It starts a stepped rollout for a new template,
// and reports an invalid annotation once per value, freezing the rollout until it is fixed.
func (r *rollout) canaryRequest(ctx workflow.Context, snap k8s.Snapshot) *k8s.Canary {
	// A parked Deployment (managed mode) is weighed as its user wrote it.
	d := k8s.Effective(snap.Deployment)
	hash := snap.TemplateHash
	if hash == "" {
		hash = k8s.PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)
	}
	r.LastHash = hash
	r.releaseRollback = hash != "" && d.Annotations[k8s.ReleaseRestoredHashAnnotation] == hash
	// The stable template as the cluster records it comes first (k8s.StableTemplate): the
	// status write that completed a rollout recorded it, so a completion this run's memory
	// lost (a discarded workflow task, a template observed before the completion) is not lost.
	// It never moves the stable template back to an older revision than the run's: a
	// blue-green promotion makes the promoted template stable before any status completes it.
	// Nor does it take the current template: a status recorded complete is a sync away from
	// its completion (afterSync), which ends the rollout's phases in order (a blue-green
	// rollout's last event is recorded there).
	if rec := k8s.StableTemplate(d, snap.ReplicaSets, hash, r.StableHash); rec != "" && rec != r.StableHash && rec != hash &&
		newerTemplate(snap.ReplicaSets, rec, r.StableHash) &&
		workflow.GetVersion(ctx, changeStableOnCluster, workflow.DefaultVersion, 1) == 1 {
		r.log.Info("Stable template read from the cluster", "memory", r.StableHash, "cluster", rec)
		r.StableHash = rec
	}
	if r.StableHash == "" {
		r.StableHash = stableHash(d, snap.ReplicaSets, hash)
	}
	if r.Abort != nil && hash != r.Abort.Hash && hash != r.StableHash {
		// A new template arrived after the abort: the user moved on; it rolls out as any other.
		r.log.Info("New template during an abort; the abort is over", "reason", r.Abort.Reason)
		r.Abort = nil
	}
	if ab := r.Abort; ab != nil && ab.Until != nil && hash == r.StableHash {
		// Back on the stable template, the aborted ReplicaSet keeps its pods until the hold
		// ends (a blue-green cap on the stable template scales nothing down).
		r.endSteps()
		r.endBlueGreen()
		return &k8s.Canary{Hash: hash, BlueGreen: true, Hold: true, Message: fmt.Sprintf(
			"Blue-green: aborted; the aborted ReplicaSet keeps its pods until %s (abortScaleDownDelaySeconds %d)", ab.Until.Format(time.RFC3339), ab.Delay)}
	}
	if r.Abort != nil || hash == r.StableHash || r.StableHash == "" {
		r.endSteps()
		r.endBlueGreen()
		return nil
	}
	if c, ok := r.blueGreenRequest(ctx, d, snap.ReplicaSets, hash); ok {
		return c
	}
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
		r.endSteps()
		key := k8s.RolloutAnnotations(d.Annotations)
		msg := "Rollout held: invalid annotation: " + err.Error()
		if r.Warned != key {
			r.Warned = key
			r.recordStepWarning(ctx, "InvalidRolloutAnnotation", msg)
		}
		r.AnnotationError = msg
		return &k8s.Canary{Hash: hash, Hold: true, Freeze: true, Message: msg}
	}
	r.Warned, r.AnnotationError = "", ""
	if len(steps) == 0 {
		r.endSteps()
		return nil
	}
	// Set at every sync: a run continued from one recorded before rolloutRevision took the
	// Deployment's annotation.
	rev := rolloutRevision(snap.ReplicaSets, hash)
	if r.Steps == nil || r.Steps.Hash != hash {
		r.endSteps()
		r.StepList = steps
		r.Steps = &stepsState{Hash: hash, Revision: rev}
		r.recordStep(ctx, "RolloutStepsStarted", fmt.Sprintf("Rolling out template %s in %d steps", hash, len(steps)))
		r.enterStep(ctx, 0)
	}
	r.StepList = steps
	s := r.Steps
	s.Revision = rev
	if s.Full || s.Step >= len(steps) {
		return nil
	}
	c := &k8s.Canary{Hash: hash, Weight: r.weight(), Scale: k8s.ActiveCanaryScale(steps, s.Step)}
	if s.WaitingFor != WaitingForWeight {
		c.Hold, c.Message = true, s.Message
	}
	return c
}

// newerTemplate reports whether template a's ReplicaSet has a higher revision than b's (true
// when b has none).
func newerTemplate(rss []*appsv1.ReplicaSet, a, b string) bool {
	rev := func(h string) int64 {
		var out int64 = -1
		for _, rs := range rss {
			if h != "" && rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == h {
				v, _ := k8s.Revision(rs.Annotations)
				out = max(out, v)
			}
		}
		return out
	}
	rb := rev(b)
	return rb < 0 || rev(a) > rb
}

// stableHash is the template of the revision a rollout would return to, when the workflow has
// not seen one complete: the Deployment's own when it is complete, otherwise the newest other
// ReplicaSet's ("" for a Deployment that never had another template).
func stableHash(d *appsv1.Deployment, rss []*appsv1.ReplicaSet, hash string) string {
	if k8s.DeploymentComplete(d, &d.Status) {
		return hash
	}
	var best string
	var bestRev int64 = -1
	for _, rs := range rss {
		h := rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		if h == "" || h == hash {
			continue
		}
		if rev, _ := k8s.Revision(rs.Annotations); rev > bestRev {
			best, bestRev = h, rev
		}
	}
	return best
}

// rolloutRevision is the revision of template hash's rollout: its ReplicaSet's when that is the
// newest, otherwise the one the sync that makes it the new ReplicaSet gives it, as upstream
// does (the highest other revision plus one). The Deployment's own annotation names the
// previous revision until that sync's write, so it cannot say.
func rolloutRevision(rss []*appsv1.ReplicaSet, hash string) int64 {
	var own, others int64
	for _, rs := range rss {
		rev, _ := k8s.Revision(rs.Annotations)
		if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == hash {
			own = max(own, rev)
		} else {
			others = max(others, rev)
		}
	}
	if own > others {
		return own
	}
	return others + 1
}

// afterSync moves a stepped rollout on from a sync's plan: a setWeight step whose weight is
// reached passes; a complete rollout makes its template the stable one; a deadline exceeded
// with auto-rollback aborts.
func (r *rollout) afterSync(ctx workflow.Context, snap k8s.Snapshot, plan k8s.Plan) {
	if plan.CanaryStale {
		r.Dirty = true
		return
	}
	if plan.Phase == k8s.PhaseComplete {
		if r.Abort != nil {
			if r.LastHash == r.StableHash {
				r.aborted = r.Abort
			}
			r.Abort = nil
		}
		r.StableHash = r.LastHash
		r.endSteps()
		return
	}
	if s := r.Steps; s != nil && !s.Full && s.WaitingFor == WaitingForWeight && plan.CanaryReached && r.trafficStepReached(ctx, snap, plan) {
		r.recordStep(ctx, "RolloutStepReached", fmt.Sprintf("Step %d of %d (%s) reached", s.Step+1, len(r.StepList), r.currentStep()))
		r.nextStep(ctx)
		r.Dirty = true
	}
	if plan.Phase == k8s.PhaseDeadlineExceeded && r.Abort == nil && r.StableHash != "" && r.LastHash != r.StableHash {
		if auto, err := k8s.ParseAutoRollback(snap.Deployment.Annotations); err == nil && auto {
			r.startAbort(ctx, "progress deadline exceeded ("+plan.Message+conditionMessage(plan.Status)+")")
		}
	}
}

func conditionMessage(st appsv1.DeploymentStatus) string {
	if c := k8s.GetCondition(st, appsv1.DeploymentProgressing); c != nil {
		return c.Message
	}
	return ""
}

// enterStep makes step i current: a setWeight waits for its weight, a pause starts its timer
// or waits for promote, an analysis starts measuring. Past the last step the rollout goes to
// 100%.
func (r *rollout) enterStep(ctx workflow.Context, i int) {
	s := r.Steps
	r.stopStepWaits()
	s.Step, s.PauseUntil, s.Analysis, s.Freeze = i, nil, nil, nil
	n := len(r.StepList)
	if i >= n {
		s.WaitingFor, s.Message = "", fmt.Sprintf("All %d steps passed: rolling out to 100%%", n)
		r.recordStep(ctx, "RolloutStepsPassed", s.Message)
		return
	}
	step := r.StepList[i]
	prefix := fmt.Sprintf("Step %d of %d (%s)", i+1, n, step)
	if r.enterTrafficStep(ctx, i, prefix) {
		return
	}
	switch {
	case step.SetWeight != nil:
		s.WaitingFor, s.Message = WaitingForWeight, prefix+": scaling"
	case step.Pause != nil && step.Pause.Duration > 0:
		until := workflow.Now(ctx).Add(time.Duration(step.Pause.Duration)).UTC()
		s.PauseUntil = &until
		s.WaitingFor, s.Message = WaitingForTimer, fmt.Sprintf("%s: paused until %s", prefix, until.Format(time.RFC3339))
		r.startStepTimer(ctx)
	case step.Pause != nil:
		s.WaitingFor, s.Message = WaitingForPromote, prefix+": paused until promoted"
	case step.Analysis != nil:
		s.Analysis = &analysisState{Step: i}
		s.WaitingFor, s.Message = WaitingForAnalysis, prefix+": measuring"
		r.startAnalysis(ctx)
	}
	r.recordStep(ctx, "RolloutStep", s.Message)
}

// resumeStepWaits restarts, in a run continued from another, the timer or analysis the step
// waits for: a timed pause waits only what is left of it.
func (r *rollout) resumeStepWaits(ctx workflow.Context) {
	s := r.Steps
	if s == nil || s.Full {
		return
	}
	switch s.WaitingFor {
	case WaitingForTimer:
		r.startStepTimer(ctx)
	case WaitingForAnalysis:
		r.startAnalysis(ctx)
	case WaitingForFreeze:
		r.startFreezeTimer(ctx)
	}
}

func (r *rollout) startStepTimer(ctx workflow.Context) {
	s := r.Steps
	r.stepWaits.startTimer(ctx, *s.PauseUntil, fmt.Sprintf("pause at step %d of %d of %s/%s until %s", s.Step+1, len(r.StepList), r.in.Namespace, r.in.Name, s.PauseUntil.UTC().Format(time.RFC3339)))
	r.stepTimerFor = s.Step
}

// stopStepWaits cancels the step's timer and analysis.
func (r *rollout) stopStepWaits() {
	r.stepWaits.stop()
}

// endSteps forgets the stepped rollout.
func (r *rollout) endSteps() {
	if r.Steps != nil {
		r.stopStepWaits()
	}
	r.Steps, r.StepList = nil, nil
}

// measureOptions: one measurement retries a failing query every few seconds for up to 5
// minutes (a query error is not a failed measurement); after that the analysis is
// inconclusive and the rollout waits for promote or abort.
var measureOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    45 * time.Second,
	ScheduleToCloseTimeout: 5 * time.Minute,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:        time.Second,
		BackoffCoefficient:     2,
		MaximumInterval:        15 * time.Second,
		NonRetryableErrorTypes: []string{activities.ErrNoPrometheus},
	},
}

// analysisResult is what an analysis goroutine hands the main loop.
type analysisResult struct {
	gen     int
	verdict string
	message string
}

// startAnalysis measures the current analysis step in a goroutine: Count measurements,
// Interval apart, each an activity whose result (value and verdict) is in the history (see
// analysis.go for the providers).
func (r *rollout) startAnalysis(ctx workflow.Context) {
	s := r.Steps
	spec := r.StepList[s.Step].Analysis
	r.stepWaits.startAnalysis(ctx, r.newMeasurer(ctx, spec, s.Analysis))
}

// run takes the analysis's measurements, Interval apart, and hands its verdict to send (also
// recorded in the state); it returns without a verdict when ctx is canceled.
func (meas *measurer) run(gctx workflow.Context, send func(verdict, msg string)) {
	spec, st := meas.spec, meas.st
	done := func(verdict, msg string) {
		st.Verdict, st.Message = verdict, msg
		send(verdict, msg)
	}
	for st.Taken < spec.Count {
		if st.Taken > 0 {
			if err := workflow.Sleep(gctx, time.Duration(spec.Interval)); err != nil {
				return
			}
		}
		m, err := meas.take(gctx)
		if gctx.Err() != nil {
			return
		}
		if err != nil {
			done(analysisInconclusive, fmt.Sprintf("measurement %d could not be taken: %v", st.Taken+1, err))
			return
		}
		st.Taken++
		st.Measurements = append(st.Measurements, m)
		if len(st.Measurements) > maxKeptMeasurements {
			st.Measurements = st.Measurements[len(st.Measurements)-maxKeptMeasurements:]
		}
		switch m.Verdict {
		case activities.VerdictFailed:
			st.Failures++
		case activities.VerdictNoData:
			if spec.OnNoData != k8s.OnNoDataFail {
				done(analysisInconclusive, m.Message+" (onNoData: pause)")
				return
			}
			st.Failures++
		}
		if st.Failures > spec.FailureLimit {
			done(analysisFailed, fmt.Sprintf("%d of %d measurements failed (failureLimit %d); last: %s", st.Failures, st.Taken, spec.FailureLimit, m.Message))
			return
		}
	}
	done(analysisSuccessful, fmt.Sprintf("%d measurements, %d failed (failureLimit %d)", st.Taken, st.Failures, spec.FailureLimit))
}

// addStepWaits adds the step's timer and analysis to a selector.
func (r *rollout) addStepWaits(ctx workflow.Context, sel workflow.Selector) {
	sel.AddReceive(r.kick, func(c workflow.ReceiveChannel, _ bool) {
		var v bool
		c.Receive(ctx, &v)
	})
	r.stepWaits.addTo(ctx, sel, func() {
		if r.Steps == nil || r.Steps.Step != r.stepTimerFor {
			return
		}
		switch r.Steps.WaitingFor {
		case WaitingForFreeze:
			r.recheckFreeze(ctx)
			return
		case WaitingForTimer:
		default:
			return
		}
		r.recordStep(ctx, "RolloutStepReached", fmt.Sprintf("Step %d of %d (%s) done", r.Steps.Step+1, len(r.StepList), r.currentStep()))
		r.nextStep(ctx)
		r.Dirty = true
	}, func(res analysisResult) {
		s := r.Steps
		if s == nil || s.WaitingFor != WaitingForAnalysis {
			return
		}
		prefix := fmt.Sprintf("Step %d of %d (%s)", s.Step+1, len(r.StepList), r.currentStep())
		switch res.verdict {
		case analysisSuccessful:
			r.recordStep(ctx, "AnalysisSuccessful", prefix+": analysis passed: "+res.message)
			r.nextStep(ctx)
		case analysisFailed:
			r.recordStepWarning(ctx, "AnalysisFailed", prefix+": analysis failed: "+res.message)
			r.startAbort(ctx, "analysis failed at step "+fmt.Sprint(s.Step+1)+": "+res.message)
		default:
			s.WaitingFor, s.Message = WaitingForPromote, prefix+": analysis inconclusive, paused until promoted or aborted: "+res.message
			r.recordStepWarning(ctx, "AnalysisInconclusive", s.Message)
		}
		r.Dirty = true
	})
}

// startAbort returns the Deployment to the stable revision at full speed, skipping all steps:
// a rollback to it, which restores its template as `kubectl rollout undo` does.
func (r *rollout) startAbort(ctx workflow.Context, reason string) {
	rev := int64(0)
	for _, rs := range r.Status.ReplicaSets {
		if rs.Hash == r.StableHash {
			rev = rs.Revision
		}
	}
	spec := r.bgSpec
	blueGreen := r.BlueGreen != nil && spec != nil
	r.endSteps()
	r.endBlueGreen()
	r.Abort = &abortState{Reason: reason, Hash: r.LastHash}
	if blueGreen {
		if d := spec.AbortScaleDownDelay(); d > 0 && workflow.GetVersion(ctx, changeBlueGreenAbortDelay, workflow.DefaultVersion, 1) >= 1 {
			until := workflow.Now(ctx).Add(d).UTC()
			r.Abort.Until, r.Abort.Delay = &until, int32(d/time.Second)
			r.startAbortHold(ctx)
		}
	}
	r.aborted = nil
	r.RollbackTo = &rev
	r.Dirty = true
	r.Status.AbortReason = reason
	target := "the previous revision"
	if rev > 0 {
		target = fmt.Sprintf("revision %d", rev)
	}
	msg := fmt.Sprintf("Rollout of revision %d aborted: %s; returning to %s", r.Status.TargetRevision, reason, target)
	r.log.Warn("Rollout aborted", "reason", reason, "to", target)
	r.recordStepWarning(ctx, "RolloutAborted", msg)
}
