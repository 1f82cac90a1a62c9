package workflows

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// Blue-green rollouts (temporal-rollout.io/blue-green, docs/blue-green.md), in Argo Rollouts'
// blueGreenStrategy vocabulary. A new template runs through these phases:
//
//	Preview               the new ReplicaSet scales to its full size (previewReplicaCount)
//	                      beside the old one; once all its pods are available the preview
//	                      Service selects them
//	PrePromotionAnalysis  the pre-promotion analysis measures (optional)
//	Paused                waits for promote, or autoPromotionSeconds on a durable timer
//	                      (autoPromotionEnabled without seconds promotes at once)
//	Promoting             the new ReplicaSet at full size; the active Service switches to it
//	                      once all its pods are available (traffic never exceeds capacity)
//	PostPromotionAnalysis the post-promotion analysis measures (optional)
//	ScaleDownDelay        the old ReplicaSet stays at full size for scaleDownDelaySeconds: a
//	                      rollback (undo, the rollback signal, abort) switches the active
//	                      Service straight back to its warm pods
//	ScalingDown           the old ReplicaSet goes to 0 (upstream's rolling update) and the
//	                      rollout completes
//
// A failed analysis aborts (the steps' abort: back to the stable revision). The state is the
// workflow's, carried over Continue-As-New: a worker killed mid-phase changes nothing, a
// timer waits only what is left of it. The whole branch runs only for a Deployment with the
// annotation, behind the "blue-green" change ID.

// abortHoldTimer is what timerFor names while the timer is an abort's hold.
const abortHoldTimer = "AbortHold"

// blueGreenStrategy drives a blue-green rollout's phases (State.BlueGreen) and its Services on the
// shared phase machinery (phase.go).
type blueGreenStrategy struct {
	phase
	// spec: the annotation as the last sync read it.
	spec *k8s.BlueGreenSpec
	// version: the "blue-green" change's version, once asked in this run.
	version      workflow.Version
	versionKnown bool
	// endCanary ends a stepped rollout (the canary's): a template rolls out one way.
	endCanary func()
}

func newBlueGreen(ctx workflow.Context, fx *effects, endCanary func()) *blueGreenStrategy {
	b := &blueGreenStrategy{phase: newPhase(ctx, fx), endCanary: endCanary}
	b.fired, b.verdict = b.phaseTimerFired, b.phaseVerdict
	return b
}

// promote promotes (the promote update).
func (b *blueGreenStrategy) promoteBlueGreen(ctx workflow.Context, req contract.PromoteRequest) {
	b.promoteWhy(ctx, req, "Promoted")
}

func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func analysisName(of string) string {
	if of == contract.BlueGreenPostPromotionAnalysis {
		return "post-promotion analysis"
	}
	return "pre-promotion analysis"
}

// switchesDone: every switch leaves its Service as it is, or points it where it already is.
func switchesDone(switches []activities.ServiceSwitch, sv *contract.BlueGreenServices) bool {
	for _, sw := range switches {
		cur := sv.ActiveSelects
		if sw.Service == sv.Preview && sw.Service != sv.Active {
			cur = sv.PreviewSelects
		}
		if sw.Hash != "" && sw.Hash != cur {
			return false
		}
	}
	return true
}

// serviceSwitch is the switch of one Service to hash, if the ReplicaSet of hash serves fully
// (otherwise the Service is left as it is).
func serviceSwitch(snap k8s.Snapshot, plan k8s.Plan, service, reason, role, hash string) activities.ServiceSwitch {
	if !k8s.ServesFully(snap.ReplicaSets, plan, hash) {
		return activities.ServiceSwitch{Service: service}
	}
	var name string
	var n int32
	for _, rs := range snap.ReplicaSets {
		if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == hash {
			name, n = rs.Name, rs.Status.AvailableReplicas
		}
	}
	return activities.ServiceSwitch{Service: service, Hash: hash, Active: role == "Active", Event: k8s.Event{
		Type: "Normal", Reason: reason,
		Message: fmt.Sprintf("%s Service %s selects pod-template-hash %s (ReplicaSet %s, %d pods available)", role, service, hash, name, n),
	}}
}

// on reports whether this run drives blue-green rollouts: a run recorded before the
// change ignored the annotation, and replays so.
func (b *blueGreenStrategy) blueGreenOn(ctx workflow.Context) bool {
	if !b.versionKnown {
		b.version = workflow.GetVersion(ctx, changeBlueGreen, workflow.DefaultVersion, 1)
		b.versionKnown = true
	}
	return b.version >= 1
}

// request weighs a snapshot's blue-green annotation for a template other than the
// stable one, as canary.request weighs the steps. handled is false without the annotation;
// otherwise the cap for k8s.Decide: a freeze for an invalid annotation (warned about once per
// value), nil once the scale-down delay passed (upstream scales the old ReplicaSets down).
func (b *blueGreenStrategy) blueGreenRequest(ctx workflow.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, hash string) (c *k8s.Canary, handled bool) {
	if _, ok := d.Annotations[k8s.BlueGreenAnnotation]; !ok || !b.blueGreenOn(ctx) {
		b.endBlueGreen()
		return nil, false
	}
	spec, err := k8s.ParseBlueGreen(d)
	if err == nil {
		_, err = k8s.ParseAutoRollback(d.Annotations)
	}
	b.endCanary()
	if err != nil {
		b.endBlueGreen()
		return b.holdInvalid(ctx, d, hash, err), true
	}
	b.Warned, b.AnnotationError = "", ""
	b.spec = spec
	// Set at every sync: a run continued from one recorded before rolloutRevision took the
	// Deployment's annotation.
	rev := rolloutRevision(rss, hash)
	if b.BlueGreen == nil || b.BlueGreen.Hash != hash {
		if prev := b.BlueGreen; prev != nil && prev.Promoted && prev.Hash != b.StableHash && b.activeServes(ctx, spec, prev.Hash) &&
			workflow.GetVersion(ctx, changeBlueGreenPromotedStable, workflow.DefaultVersion, 1) >= 1 {
			// A new template after the active Service switched to the promoted one (in the
			// scale-down delay): the promoted ReplicaSet serves production, so it is the
			// stable one the new rollout starts from, not the one before it.
			b.recordStep(ctx, "BlueGreenPhase", fmt.Sprintf("Blue-green: new template %s while %s serves production; %s is the stable template", hash, prev.Hash, prev.Hash))
			b.StableHash = prev.Hash
		}
		b.endBlueGreen()
		b.BlueGreen = &blueGreenState{Hash: hash, Revision: rev}
		b.recordStep(ctx, "BlueGreenStarted", fmt.Sprintf("Rolling out template %s blue-green: active Service %s stays on %s until promoted", hash, spec.ActiveService, b.StableHash))
		b.enterPhase(ctx, contract.BlueGreenPreview)
	}
	bg := b.BlueGreen
	bg.Spec = spec
	bg.Revision = rev
	c = &k8s.Canary{Hash: hash, BlueGreen: true}
	switch bg.Phase {
	case contract.BlueGreenScalingDown:
		return nil, true
	case contract.BlueGreenPreview, contract.BlueGreenPrePromotionAnalysis, contract.BlueGreenPaused:
		c.BlueGreenReplicas = spec.PreviewReplicas(replicasOf(d))
	}
	switch bg.Phase {
	case contract.BlueGreenPreview, contract.BlueGreenPromoting:
	default:
		c.Hold, c.Message = true, bg.Message
	}
	if workflow.GetVersion(ctx, changeBlueGreenScale, workflow.DefaultVersion, 1) >= 1 {
		c.StableHash = b.StableHash
	}
	return c, true
}

// enterPhase makes phase to current: it sets what the phase waits for and starts its timer
// or analysis.
func (b *blueGreenStrategy) enterPhase(ctx workflow.Context, to string) {
	bg, spec := b.BlueGreen, b.spec
	b.stop()
	bg.Phase, bg.Until, bg.Analysis, bg.AnalysisSpec, bg.Freeze = to, nil, nil, nil, nil
	active, preview := spec.ActiveService, spec.PreviewService
	switch to {
	case contract.BlueGreenPreview:
		bg.WaitingFor = contract.WaitingForReplicaSet
		bg.Message = fmt.Sprintf("Blue-green: scaling up the new ReplicaSet (template %s)", bg.Hash)
		if preview != "" {
			bg.Message += "; the preview Service " + preview + " switches once all its pods are available"
		}
	case contract.BlueGreenPrePromotionAnalysis, contract.BlueGreenPostPromotionAnalysis:
		bg.AnalysisSpec = spec.PrePromotionAnalysis
		step := 1
		if to == contract.BlueGreenPostPromotionAnalysis {
			bg.AnalysisSpec, step = spec.PostPromotionAnalysis, 2
		}
		bg.Analysis = &contract.AnalysisStatus{Step: step - 1}
		bg.WaitingFor = contract.WaitingForAnalysis
		bg.Message = fmt.Sprintf("Blue-green: %s (%s): measuring", analysisName(to), bg.AnalysisSpec)
		b.startAnalysis(ctx, b.BlueGreen.AnalysisSpec, b.BlueGreen.Analysis, b.BlueGreen.Hash)
	case contract.BlueGreenPaused:
		if spec.AutoPromotionSeconds > 0 {
			until := workflow.Now(ctx).Add(time.Duration(spec.AutoPromotionSeconds) * time.Second).UTC()
			bg.Until = &until
			bg.WaitingFor = contract.WaitingForTimer
			bg.Message = fmt.Sprintf("Blue-green: preview ready, promoting automatically at %s (autoPromotionSeconds %d)", until.Format(time.RFC3339), spec.AutoPromotionSeconds)
			b.startPhaseTimer(ctx)
		} else {
			bg.WaitingFor = contract.WaitingForPromote
			bg.Message = "Blue-green: preview ready, paused until promoted"
		}
	case contract.BlueGreenPromoting:
		bg.WaitingFor = contract.WaitingForReplicaSet
		bg.Message = fmt.Sprintf("Blue-green: promoted; the active Service %s switches to template %s once all its pods are available", active, bg.Hash)
	case contract.BlueGreenScaleDownDelay:
		delay := spec.ScaleDownDelay()
		until := workflow.Now(ctx).Add(delay).UTC()
		bg.Until = &until
		bg.WaitingFor = contract.WaitingForTimer
		bg.Message = fmt.Sprintf("Blue-green: active Service %s on template %s; the old ReplicaSet stays warm until %s (scaleDownDelaySeconds %d)", active, bg.Hash, until.Format(time.RFC3339), int64(delay/time.Second))
		b.startPhaseTimer(ctx)
	case contract.BlueGreenScalingDown:
		bg.WaitingFor = ""
		bg.Message = "Blue-green: scaling the old ReplicaSet down"
	}
	b.recordStep(ctx, "BlueGreenPhase", bg.Message)
	b.Dirty = true
}

// after moves a blue-green rollout on from a sync: the preview is ready, the active
// Service switched, or the rollout completed.
func (b *blueGreenStrategy) afterBlueGreen(ctx workflow.Context, plan k8s.Plan) {
	bg, spec := b.BlueGreen, b.spec
	if bg == nil || spec == nil || plan.CanaryStale {
		return
	}
	sv := b.BlueGreenServices
	switch {
	case plan.Phase == k8s.PhaseComplete:
		if bg.Phase == contract.BlueGreenScalingDown {
			b.recordStep(ctx, "OldReplicaSetScaledDown", fmt.Sprintf("Blue-green: the old ReplicaSet is scaled down; template %s is complete", bg.Hash))
		}
		b.endBlueGreen()
	case bg.Phase == contract.BlueGreenPreview && plan.CanaryReached && (spec.PreviewService == "" || sv != nil && sv.PreviewSelects == bg.Hash):
		b.previewReady(ctx)
	case bg.Phase == contract.BlueGreenPromoting && sv != nil && sv.ActiveSelects == bg.Hash:
		if spec.PostPromotionAnalysis != nil && !bg.Full {
			b.enterPhase(ctx, contract.BlueGreenPostPromotionAnalysis)
			return
		}
		b.enterPhase(ctx, contract.BlueGreenScaleDownDelay)
	}
}

// previewReady goes on from a ready preview: to the pre-promotion analysis, or to promotion.
func (b *blueGreenStrategy) previewReady(ctx workflow.Context) {
	bg, spec := b.BlueGreen, b.spec
	switch {
	case bg.Promoted:
		b.enterPhase(ctx, contract.BlueGreenPromoting)
	case spec.PrePromotionAnalysis != nil:
		b.enterPhase(ctx, contract.BlueGreenPrePromotionAnalysis)
	case spec.AutoPromotes() && spec.AutoPromotionSeconds == 0:
		b.autoPromote(ctx, "Promoted automatically (autoPromotionEnabled)")
	default:
		b.enterPhase(ctx, contract.BlueGreenPaused)
	}
}

// promoteWhy promotes: the active Service switches at the next sync once the new pods
// are all available. During the post-promotion analysis it skips the analysis.
func (b *blueGreenStrategy) promoteWhy(ctx workflow.Context, req contract.PromoteRequest, why string) {
	bg := b.BlueGreen
	b.stop()
	if bg.Phase == contract.BlueGreenPostPromotionAnalysis {
		b.recordStep(ctx, "RolloutPromoted", why+": the post-promotion analysis is skipped")
		b.enterPhase(ctx, contract.BlueGreenScaleDownDelay)
		return
	}
	bg.Promoted, bg.Full = true, req.Full
	msg := fmt.Sprintf("%s: the active Service %s switches to template %s", why, b.spec.ActiveService, bg.Hash)
	if req.Full {
		msg += "; both analyses are skipped"
	}
	b.recordStep(ctx, "RolloutPromoted", msg)
	if bg.Phase == contract.BlueGreenPreview {
		// promote {"full":true} before the preview is ready: it stays in Preview, which goes
		// on to Promoting once the new pods are available.
		bg.Message = "Blue-green: promoted in full; waiting for the new pods to be available"
		b.Dirty = true
		return
	}
	b.enterPhase(ctx, contract.BlueGreenPromoting)
}

// sync points the active and preview Services at their templates before the plan's
// writes (nothing without a valid annotation, or while one holds the rollout). A Service
// switches only to a ReplicaSet whose pods are all available; until then it keeps selecting
// what it selects.
func (b *blueGreenStrategy) syncServices(ctx workflow.Context, ref activities.DeploymentRef, snap k8s.Snapshot, plan k8s.Plan) error {
	d := k8s.Effective(snap.Deployment)
	_, annotated := d.Annotations[k8s.BlueGreenAnnotation]
	if !annotated && b.BlueGreenServices == nil || plan.CanaryStale || b.AnnotationError != "" || !b.blueGreenOn(ctx) {
		return nil
	}
	var spec *k8s.BlueGreenSpec
	if annotated {
		var err error
		if spec, err = k8s.ParseBlueGreen(d); err != nil {
			return nil
		}
	} else {
		// The annotation is gone (removed, or a rollback restored annotations from an older
		// ReplicaSet): the Services are pointed at the Deployment's template once, as at rest,
		// and then left to the user.
		spec = &k8s.BlueGreenSpec{ActiveService: b.BlueGreenServices.Active, PreviewService: b.BlueGreenServices.Preview}
		b.endBlueGreen()
	}
	stable, target := b.StableHash, b.LastHash
	if b.Abort != nil && stable != "" {
		target = stable
	}
	rolling := b.BlueGreen != nil && b.Abort == nil
	active, preview := k8s.BlueGreenTargets(stable, target, rolling, rolling && b.BlueGreen.Promoted)
	switches := []activities.ServiceSwitch{serviceSwitch(snap, plan, spec.ActiveService, "ActiveSwitched", "Active", active)}
	if spec.PreviewService != "" {
		switches = append(switches, serviceSwitch(snap, plan, spec.PreviewService, "PreviewSwitched", "Preview", preview))
	}
	if b.BlueGreenServices != nil && annotated && b.BlueGreenServices.Active == spec.ActiveService && b.BlueGreenServices.Preview == spec.PreviewService &&
		switchesDone(switches, b.BlueGreenServices) && workflow.GetVersion(ctx, changeBlueGreenUnchanged, workflow.DefaultVersion, 1) == 1 {
		// Both Services already select what this sync would switch them to (or stay as they
		// are): no reads, no writes, so the syncs leave the client budget to their writes.
		return nil
	}
	var res activities.SyncBlueGreenResult
	var points []string
	for _, sw := range switches {
		points = append(points, sw.Service+" → "+cmp.Or(sw.Hash, "unchanged"))
	}
	sctx := withSummary(ctx, fmt.Sprintf("point the Services of %s/%s: %s", ref.Namespace, ref.Name, strings.Join(points, ", ")))
	if err := workflow.ExecuteLocalActivity(sctx, a.SyncBlueGreen, activities.SyncBlueGreenInput{Deployment: ref, Switches: switches}).Get(ctx, &res); err != nil {
		return fmt.Errorf("switch blue-green services: %w", err)
	}
	sv := &contract.BlueGreenServices{Active: spec.ActiveService, ActiveSelects: res.Selects[spec.ActiveService], Hold: res.Hold}
	if spec.PreviewService != "" {
		sv.Preview, sv.PreviewSelects = spec.PreviewService, res.Selects[spec.PreviewService]
	}
	changed := b.BlueGreenServices == nil || *b.BlueGreenServices != *sv
	b.BlueGreenServices = sv
	if !annotated && sv.ActiveSelects == target && (sv.Preview == "" || sv.PreviewSelects == target) {
		b.BlueGreenServices, changed = nil, true
	}
	if changed {
		b.upsertStepState(ctx)
	}
	return nil
}

// activeServes reports whether the active Service selects the promoted template hash: as the
// last sync left it, or else (change blue-green-promoted-live) as the cluster has it, read
// with a SyncBlueGreen that switches nothing. The workflow task in which the switch was made
// may have been lost (a worker killed before it completed): the switch is on the cluster, but
// the run that replays it learns of it only from the cluster.
func (b *blueGreenStrategy) activeServes(ctx workflow.Context, spec *k8s.BlueGreenSpec, hash string) bool {
	if sv := b.BlueGreenServices; sv != nil && sv.ActiveSelects == hash {
		return true
	}
	if workflow.GetVersion(ctx, changeBlueGreenPromotedLive, workflow.DefaultVersion, 1) < 1 {
		return false
	}
	ref := activities.DeploymentRef{Namespace: b.dep.Namespace, Name: b.dep.Name, UID: b.UID}
	sctx := withSummary(ctx, fmt.Sprintf("read which template the active Service %s of %s/%s selects", spec.ActiveService, ref.Namespace, ref.Name))
	var res activities.SyncBlueGreenResult
	in := activities.SyncBlueGreenInput{Deployment: ref, Switches: []activities.ServiceSwitch{{Service: spec.ActiveService, Active: true}}}
	if err := workflow.ExecuteLocalActivity(sctx, a.SyncBlueGreen, in).Get(ctx, &res); err != nil {
		b.log.Warn("Reading the active Service failed; the rollout starts from the stable template", "error", err)
		return false
	}
	return res.Selects[spec.ActiveService] == hash
}

// startPhaseTimer waits for the automatic promotion or the end of the scale-down delay.
func (b *blueGreenStrategy) startPhaseTimer(ctx workflow.Context) {
	bg := b.BlueGreen
	what := "blue-green scale-down delay"
	if bg.Phase != contract.BlueGreenScalingDown && bg.Phase != contract.BlueGreenScaleDownDelay {
		what = "blue-green automatic promotion"
	}
	b.startTimer(ctx, bg.Phase, *bg.Until, fmt.Sprintf("%s of %s/%s, template %s, until %s", what, b.dep.Namespace, b.dep.Name, bg.Hash, bg.Until.UTC().Format(time.RFC3339)))
}

// startAbortHold starts the timer that ends an abort's hold (abortState.Until) on the phase
// waits, which the aborted blue-green rollout no longer uses.
func (b *blueGreenStrategy) startAbortHold(ctx workflow.Context) {
	b.startTimer(ctx, abortHoldTimer, *b.Abort.Until, fmt.Sprintf("aborted blue-green of %s/%s keeps its pods until %s", b.dep.Namespace, b.dep.Name, b.Abort.Until.UTC().Format(time.RFC3339)))
}

// endAbortHold lets the aborted ReplicaSet go once its hold passed.
func (b *blueGreenStrategy) endAbortHold(ctx workflow.Context) {
	b.timerFor = ""
	if ab := b.Abort; ab != nil && ab.Until != nil {
		ab.Until = nil
		b.recordStep(ctx, "BlueGreenPhase", fmt.Sprintf("Blue-green: abortScaleDownDelaySeconds %d passed; scaling the aborted ReplicaSet down", ab.Delay))
		b.Dirty = true
	}
}

// resume restarts, in a run continued from another, the timer or analysis the
// phase waits for, or an abort's hold: a timer waits only what is left of it.
func (b *blueGreenStrategy) resumeBlueGreen(ctx workflow.Context) {
	if ab := b.Abort; ab != nil && ab.Until != nil {
		b.startAbortHold(ctx)
		return
	}
	bg := b.BlueGreen
	if bg == nil || bg.Spec == nil {
		return
	}
	b.spec = bg.Spec
	switch {
	case bg.Until != nil && (bg.Phase == contract.BlueGreenPaused || bg.Phase == contract.BlueGreenScaleDownDelay):
		b.startPhaseTimer(ctx)
	case bg.WaitingFor == contract.WaitingForAnalysis && bg.AnalysisSpec != nil && bg.Analysis != nil:
		b.startAnalysis(ctx, b.BlueGreen.AnalysisSpec, b.BlueGreen.Analysis, b.BlueGreen.Hash)
	}
}

// phaseTimerFired: an abort's hold passed, the automatic promotion is due, the scale-down delay
// passed, or a held promotion's next look at the fleet freeze.
func (b *blueGreenStrategy) phaseTimerFired(ctx workflow.Context) {
	if b.timerFor == abortHoldTimer {
		b.endAbortHold(ctx)
		return
	}
	bg := b.BlueGreen
	if bg == nil || bg.Phase != b.timerFor || b.spec == nil {
		return
	}
	if bg.WaitingFor == contract.WaitingForFreeze && bg.Phase == contract.BlueGreenPaused {
		bg.Until = nil
		if !b.recheckFreeze(ctx, &bg.PhaseWait, func() string { return blueGreenFrozenMessage(bg.Freeze) }, b.phaseFreezeLook, "promoting") {
			b.promoteWhy(ctx, contract.PromoteRequest{}, "Promoted automatically after the fleet freeze")
			b.Dirty = true
		}
		return
	}
	if bg.WaitingFor != contract.WaitingForTimer {
		return
	}
	switch bg.Phase {
	case contract.BlueGreenPaused:
		b.autoPromote(ctx, fmt.Sprintf("Promoted automatically after autoPromotionSeconds %d", b.spec.AutoPromotionSeconds))
	case contract.BlueGreenScaleDownDelay:
		b.enterPhase(ctx, contract.BlueGreenScalingDown)
	}
}

// phaseVerdict goes on from the pre- or post-promotion analysis's verdict.
func (b *blueGreenStrategy) phaseVerdict(ctx workflow.Context, res analysisResult) {
	bg := b.BlueGreen
	if bg == nil || bg.WaitingFor != contract.WaitingForAnalysis || b.spec == nil {
		return
	}
	name := analysisName(bg.Phase)
	b.analysisVerdict(ctx, res, "Blue-green: "+name, name+" failed: ", &bg.PhaseWait, func() {
		if bg.Phase == contract.BlueGreenPostPromotionAnalysis {
			b.enterPhase(ctx, contract.BlueGreenScaleDownDelay)
		} else {
			b.afterPrePromotion(ctx)
		}
	})
}

// afterPrePromotion goes on once the pre-promotion analysis passed: to promotion, at once or
// after autoPromotionSeconds, or to a pause until promoted.
func (b *blueGreenStrategy) afterPrePromotion(ctx workflow.Context) {
	spec := b.spec
	if spec.AutoPromotes() && spec.AutoPromotionSeconds == 0 {
		b.autoPromote(ctx, "Promoted automatically (autoPromotionEnabled)")
		return
	}
	b.enterPhase(ctx, contract.BlueGreenPaused)
}

// end forgets the blue-green rollout.
func (b *blueGreenStrategy) endBlueGreen() {
	if b.BlueGreen != nil {
		b.stop()
	}
	b.BlueGreen = nil
}

// autoPromote promotes a blue-green rollout automatically, unless the fleet is frozen: then
// it holds in the Paused phase (the preview ready, the active Service where it is), asking
// again on a timer.
func (b *blueGreenStrategy) autoPromote(ctx workflow.Context, why string) {
	f := b.freezeHold(ctx)
	if f == nil {
		b.promoteWhy(ctx, contract.PromoteRequest{}, why)
		return
	}
	bg := b.BlueGreen
	b.stop()
	bg.Phase, bg.Analysis, bg.AnalysisSpec, bg.Freeze = contract.BlueGreenPaused, nil, nil, f
	bg.WaitingFor, bg.Message = contract.WaitingForFreeze, blueGreenFrozenMessage(f)
	b.phaseFreezeLook(ctx)
	b.recordStepWarning(ctx, "RolloutFrozen", bg.Message)
	b.Dirty = true
}

// phaseFreezeLook: the held promotion's next look at the freeze (Until is that look, so a
// continued run resumes it).
func (b *blueGreenStrategy) phaseFreezeLook(ctx workflow.Context) {
	at := nextLook(ctx, b.BlueGreen.Freeze)
	b.BlueGreen.Until = &at
	b.startPhaseTimer(ctx)
}
