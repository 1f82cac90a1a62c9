package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/k8s"
)

// Blue-green rollouts (temporal-rollout.io/blue-green, docs/blue-green.md), in Argo Rollouts'
// blueGreen vocabulary. A new template runs through these phases:
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

// abortHoldTimer is what bgTimerFor names while the timer is an abort's hold.
const abortHoldTimer = "AbortHold"

// bgState is a blue-green rollout's part of a run.
type bgState struct {
	// bgSpec: the annotation as the last sync read it.
	bgSpec *k8s.BlueGreenSpec
	// bgVersion: the "blue-green" change's version, once asked in this run.
	bgVersion      workflow.Version
	bgVersionKnown bool

	// bgWaits: the phase's timer (for phase bgTimerFor) and analysis.
	bgWaits    phaseWaits
	bgTimerFor string
}

// blueGreenOn reports whether this run drives blue-green rollouts: a run recorded before the
// change ignored the annotation, and replays so.
func (r *rollout) blueGreenOn(ctx workflow.Context) bool {
	if !r.bgVersionKnown {
		r.bgVersion = workflow.GetVersion(ctx, changeBlueGreen, workflow.DefaultVersion, 1)
		r.bgVersionKnown = true
	}
	return r.bgVersion >= 1
}

// blueGreenRequest weighs a snapshot's blue-green annotation for a template other than the
// stable one, as canaryRequest weighs the steps. handled is false without the annotation;
// otherwise the cap for k8s.Decide: a freeze for an invalid annotation (warned about once per
// value), nil once the scale-down delay passed (upstream scales the old ReplicaSets down).
func (r *rollout) blueGreenRequest(ctx workflow.Context, d *appsv1.Deployment, rss []*appsv1.ReplicaSet, hash string) (c *k8s.Canary, handled bool) {
	if _, ok := d.Annotations[k8s.BlueGreenAnnotation]; !ok || !r.blueGreenOn(ctx) {
		r.endBlueGreen()
		return nil, false
	}
	spec, err := k8s.ParseBlueGreen(d)
	if err == nil {
		_, err = k8s.ParseAutoRollback(d.Annotations)
	}
	r.endSteps()
	if err != nil {
		r.endBlueGreen()
		key := k8s.RolloutAnnotations(d.Annotations)
		msg := "Rollout held: invalid annotation: " + err.Error()
		if r.Warned != key {
			r.Warned = key
			r.recordStepWarning(ctx, "InvalidRolloutAnnotation", msg)
		}
		r.AnnotationError = msg
		return &k8s.Canary{Hash: hash, Hold: true, Freeze: true, Message: msg}, true
	}
	r.Warned, r.AnnotationError = "", ""
	r.bgSpec = spec
	// Set at every sync: a run continued from one recorded before rolloutRevision took the
	// Deployment's annotation.
	rev := rolloutRevision(rss, hash)
	if r.BlueGreen == nil || r.BlueGreen.Hash != hash {
		if prev := r.BlueGreen; prev != nil && prev.Promoted && prev.Hash != r.StableHash && r.BlueGreenServices != nil &&
			r.BlueGreenServices.ActiveSelects == prev.Hash && workflow.GetVersion(ctx, changeBlueGreenPromotedStable, workflow.DefaultVersion, 1) >= 1 {
			// A new template after the active Service switched to the promoted one (in the
			// scale-down delay): the promoted ReplicaSet serves production, so it is the
			// stable one the new rollout starts from, not the one before it.
			r.recordStep(ctx, "BlueGreenPhase", fmt.Sprintf("Blue-green: new template %s while %s serves production; %s is the stable template", hash, prev.Hash, prev.Hash))
			r.StableHash = prev.Hash
		}
		r.endBlueGreen()
		r.BlueGreen = &blueGreenState{Hash: hash, Revision: rev, StableHash: r.StableHash}
		r.recordStep(ctx, "BlueGreenStarted", fmt.Sprintf("Rolling out template %s blue-green: active Service %s stays on %s until promoted", hash, spec.ActiveService, r.StableHash))
		r.enterBlueGreen(ctx, BlueGreenPreview)
	}
	bg := r.BlueGreen
	bg.Spec = spec
	bg.Revision = rev
	c = &k8s.Canary{Hash: hash, BlueGreen: true}
	switch bg.Phase {
	case BlueGreenScalingDown:
		return nil, true
	case BlueGreenPreview, BlueGreenPrePromotionAnalysis, BlueGreenPaused:
		c.BlueGreenReplicas = spec.PreviewReplicas(replicasOf(d))
	}
	switch bg.Phase {
	case BlueGreenPreview, BlueGreenPromoting:
	default:
		c.Hold, c.Message = true, bg.Message
	}
	if workflow.GetVersion(ctx, changeBlueGreenScale, workflow.DefaultVersion, 1) >= 1 {
		c.StableHash = bg.StableHash
	}
	return c, true
}

func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// enterBlueGreen makes phase current: it sets what the phase waits for and starts its timer
// or analysis.
func (r *rollout) enterBlueGreen(ctx workflow.Context, phase string) {
	bg, spec := r.BlueGreen, r.bgSpec
	r.stopBlueGreenWaits()
	bg.Phase, bg.Until, bg.Analysis, bg.AnalysisSpec, bg.Freeze = phase, nil, nil, nil, nil
	active, preview := spec.ActiveService, spec.PreviewService
	switch phase {
	case BlueGreenPreview:
		bg.WaitingFor = WaitingForReplicaSet
		bg.Message = fmt.Sprintf("Blue-green: scaling up the new ReplicaSet (template %s)", bg.Hash)
		if preview != "" {
			bg.Message += "; the preview Service " + preview + " switches once all its pods are available"
		}
	case BlueGreenPrePromotionAnalysis, BlueGreenPostPromotionAnalysis:
		bg.AnalysisSpec = spec.PrePromotionAnalysis
		step := 1
		if phase == BlueGreenPostPromotionAnalysis {
			bg.AnalysisSpec, step = spec.PostPromotionAnalysis, 2
		}
		bg.Analysis = &analysisState{Step: step - 1}
		bg.WaitingFor = WaitingForAnalysis
		bg.Message = fmt.Sprintf("Blue-green: %s (%s): measuring", analysisName(phase), bg.AnalysisSpec)
		r.startBlueGreenAnalysis(ctx)
	case BlueGreenPaused:
		if spec.AutoPromotionSeconds > 0 {
			until := workflow.Now(ctx).Add(time.Duration(spec.AutoPromotionSeconds) * time.Second).UTC()
			bg.Until = &until
			bg.WaitingFor = WaitingForTimer
			bg.Message = fmt.Sprintf("Blue-green: preview ready, promoting automatically at %s (autoPromotionSeconds %d)", until.Format(time.RFC3339), spec.AutoPromotionSeconds)
			r.startBlueGreenTimer(ctx)
		} else {
			bg.WaitingFor = WaitingForPromote
			bg.Message = "Blue-green: preview ready, paused until promoted"
		}
	case BlueGreenPromoting:
		bg.WaitingFor = WaitingForReplicaSet
		bg.Message = fmt.Sprintf("Blue-green: promoted; the active Service %s switches to template %s once all its pods are available", active, bg.Hash)
	case BlueGreenScaleDownDelay:
		delay := spec.ScaleDownDelay()
		until := workflow.Now(ctx).Add(delay).UTC()
		bg.Until = &until
		bg.WaitingFor = WaitingForTimer
		bg.Message = fmt.Sprintf("Blue-green: active Service %s on template %s; the old ReplicaSet stays warm until %s (scaleDownDelaySeconds %d)", active, bg.Hash, until.Format(time.RFC3339), int64(delay/time.Second))
		r.startBlueGreenTimer(ctx)
	case BlueGreenScalingDown:
		bg.WaitingFor = ""
		bg.Message = "Blue-green: scaling the old ReplicaSet down"
	}
	r.recordStep(ctx, "BlueGreenPhase", bg.Message)
	r.Dirty = true
}

func analysisName(phase string) string {
	if phase == BlueGreenPostPromotionAnalysis {
		return "post-promotion analysis"
	}
	return "pre-promotion analysis"
}

// afterBlueGreen moves a blue-green rollout on from a sync: the preview is ready, the active
// Service switched, or the rollout completed.
func (r *rollout) afterBlueGreen(ctx workflow.Context, plan k8s.Plan) {
	bg, spec := r.BlueGreen, r.bgSpec
	if bg == nil || spec == nil || plan.CanaryStale {
		return
	}
	sv := r.BlueGreenServices
	switch {
	case plan.Phase == k8s.PhaseComplete:
		if bg.Phase == BlueGreenScalingDown {
			r.recordStep(ctx, "OldReplicaSetScaledDown", fmt.Sprintf("Blue-green: the old ReplicaSet is scaled down; template %s is complete", bg.Hash))
		}
		r.endBlueGreen()
	case bg.Phase == BlueGreenPreview && plan.CanaryReached && (spec.PreviewService == "" || sv != nil && sv.PreviewSelects == bg.Hash):
		r.previewReady(ctx)
	case bg.Phase == BlueGreenPromoting && sv != nil && sv.ActiveSelects == bg.Hash:
		if spec.PostPromotionAnalysis != nil && !bg.Full {
			r.enterBlueGreen(ctx, BlueGreenPostPromotionAnalysis)
			return
		}
		r.enterBlueGreen(ctx, BlueGreenScaleDownDelay)
	}
}

// previewReady goes on from a ready preview: to the pre-promotion analysis, or to promotion.
func (r *rollout) previewReady(ctx workflow.Context) {
	bg, spec := r.BlueGreen, r.bgSpec
	switch {
	case bg.Promoted:
		r.enterBlueGreen(ctx, BlueGreenPromoting)
	case spec.PrePromotionAnalysis != nil:
		r.enterBlueGreen(ctx, BlueGreenPrePromotionAnalysis)
	case spec.AutoPromotes() && spec.AutoPromotionSeconds == 0:
		r.autoPromoteBlueGreen(ctx, "Promoted automatically (autoPromotionEnabled)")
	default:
		r.enterBlueGreen(ctx, BlueGreenPaused)
	}
}

// promoteBlueGreen promotes: the active Service switches at the next sync once the new pods
// are all available. During the post-promotion analysis it skips the analysis.
func (r *rollout) promoteBlueGreen(ctx workflow.Context, req PromoteRequest, why string) {
	bg := r.BlueGreen
	r.stopBlueGreenWaits()
	if bg.Phase == BlueGreenPostPromotionAnalysis {
		r.recordStep(ctx, "RolloutPromoted", why+": the post-promotion analysis is skipped")
		r.enterBlueGreen(ctx, BlueGreenScaleDownDelay)
		return
	}
	bg.Promoted, bg.Full = true, req.Full
	msg := fmt.Sprintf("%s: the active Service %s switches to template %s", why, r.bgSpec.ActiveService, bg.Hash)
	if req.Full {
		msg += "; both analyses are skipped"
	}
	r.recordStep(ctx, "RolloutPromoted", msg)
	if bg.Phase == BlueGreenPreview {
		// promote {"full":true} before the preview is ready: it stays in Preview, which goes
		// on to Promoting once the new pods are available.
		bg.Message = "Blue-green: promoted in full; waiting for the new pods to be available"
		r.Dirty = true
		return
	}
	r.enterBlueGreen(ctx, BlueGreenPromoting)
}

// syncBlueGreen points the active and preview Services at their templates before the plan's
// writes (nothing without a valid annotation, or while one holds the rollout). A Service
// switches only to a ReplicaSet whose pods are all available; until then it keeps selecting
// what it selects.
func (r *rollout) syncBlueGreen(ctx workflow.Context, ref activities.DeploymentRef, snap k8s.Snapshot, plan k8s.Plan) error {
	d := k8s.Effective(snap.Deployment)
	_, annotated := d.Annotations[k8s.BlueGreenAnnotation]
	if !annotated && r.BlueGreenServices == nil || plan.CanaryStale || r.AnnotationError != "" || !r.blueGreenOn(ctx) {
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
		spec = &k8s.BlueGreenSpec{ActiveService: r.BlueGreenServices.Active, PreviewService: r.BlueGreenServices.Preview}
		r.endBlueGreen()
	}
	stable, target := r.StableHash, r.LastHash
	if r.Abort != nil && stable != "" {
		target = stable
	}
	rolling := r.BlueGreen != nil && r.Abort == nil
	active, preview := k8s.BlueGreenTargets(stable, target, rolling, rolling && r.BlueGreen.Promoted)
	switches := []activities.ServiceSwitch{serviceSwitch(snap, plan, spec.ActiveService, "ActiveSwitched", "Active", active)}
	if spec.PreviewService != "" {
		switches = append(switches, serviceSwitch(snap, plan, spec.PreviewService, "PreviewSwitched", "Preview", preview))
	}
	if r.BlueGreenServices != nil && annotated && r.BlueGreenServices.Active == spec.ActiveService && r.BlueGreenServices.Preview == spec.PreviewService &&
		switchesDone(switches, r.BlueGreenServices) && workflow.GetVersion(ctx, changeBlueGreenUnchanged, workflow.DefaultVersion, 1) == 1 {
		// Both Services already select what this sync would switch them to (or stay as they
		// are): no reads, no writes, so the syncs leave the client budget to their writes.
		return nil
	}
	var res activities.SyncBlueGreenResult
	if err := workflow.ExecuteLocalActivity(ctx, a.SyncBlueGreen, activities.SyncBlueGreenInput{Deployment: ref, Switches: switches}).Get(ctx, &res); err != nil {
		return fmt.Errorf("switch blue-green services: %w", err)
	}
	sv := &BlueGreenServices{Active: spec.ActiveService, ActiveSelects: res.Selects[spec.ActiveService], Hold: res.Hold}
	if spec.PreviewService != "" {
		sv.Preview, sv.PreviewSelects = spec.PreviewService, res.Selects[spec.PreviewService]
	}
	changed := r.BlueGreenServices == nil || *r.BlueGreenServices != *sv
	r.BlueGreenServices = sv
	if !annotated && sv.ActiveSelects == target && (sv.Preview == "" || sv.PreviewSelects == target) {
		r.BlueGreenServices, changed = nil, true
	}
	if changed {
		r.upsertStepState(ctx)
	}
	return nil
}

// switchesDone: every switch leaves its Service as it is, or points it where it already is.
func switchesDone(switches []activities.ServiceSwitch, sv *BlueGreenServices) bool {
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

// startBlueGreenTimer waits for the automatic promotion or the end of the scale-down delay.
func (r *rollout) startBlueGreenTimer(ctx workflow.Context) {
	bg := r.BlueGreen
	what := "blue-green scale-down delay"
	if bg.Phase != BlueGreenScalingDown {
		what = "blue-green automatic promotion"
	}
	r.bgWaits.startTimer(ctx, *bg.Until, fmt.Sprintf("%s of %s/%s, template %s, until %s", what, r.in.Namespace, r.in.Name, bg.Hash, bg.Until.UTC().Format(time.RFC3339)))
	r.bgTimerFor = bg.Phase
}

// startBlueGreenAnalysis measures the current analysis in a goroutine (as an analysis step
// does), against the new template.
func (r *rollout) startBlueGreenAnalysis(ctx workflow.Context) {
	bg := r.BlueGreen
	spec, st := bg.AnalysisSpec, bg.Analysis
	st.Provider = spec.Provider()
	if spec.Job != nil && st.Job == "" {
		st.Job = k8s.AnalysisJobName(r.in.Name, bg.Hash, st.Step+1, workflow.GetInfo(ctx).WorkflowExecution.RunID)
	}
	meas := &measurer{spec: spec, st: st, hash: bg.Hash, ref: activities.DeploymentRef{Namespace: r.in.Namespace, Name: r.in.Name, UID: r.UID}}
	r.bgWaits.startAnalysis(ctx, meas)
}

// startAbortHold starts the timer that ends an abort's hold (abortState.Until) on the phase
// waits, which the aborted blue-green rollout no longer uses.
func (r *rollout) startAbortHold(ctx workflow.Context) {
	r.bgWaits.startTimer(ctx, *r.Abort.Until, fmt.Sprintf("aborted blue-green of %s/%s keeps its pods until %s", r.in.Namespace, r.in.Name, r.Abort.Until.UTC().Format(time.RFC3339)))
	r.bgTimerFor = abortHoldTimer
}

// endAbortHold lets the aborted ReplicaSet go once its hold passed.
func (r *rollout) endAbortHold(ctx workflow.Context) {
	r.bgTimerFor = ""
	if ab := r.Abort; ab != nil && ab.Until != nil {
		ab.Until = nil
		r.recordStep(ctx, "BlueGreenPhase", fmt.Sprintf("Blue-green: abortScaleDownDelaySeconds %d passed; scaling the aborted ReplicaSet down", ab.Delay))
		r.Dirty = true
	}
}

// resumeBlueGreenWaits restarts, in a run continued from another, the timer or analysis the
// phase waits for, or an abort's hold: a timer waits only what is left of it.
func (r *rollout) resumeBlueGreenWaits(ctx workflow.Context) {
	if ab := r.Abort; ab != nil && ab.Until != nil {
		r.startAbortHold(ctx)
		return
	}
	bg := r.BlueGreen
	if bg == nil || bg.Spec == nil {
		return
	}
	r.bgSpec = bg.Spec
	switch {
	case bg.Until != nil && (bg.Phase == BlueGreenPaused || bg.Phase == BlueGreenScaleDownDelay):
		r.startBlueGreenTimer(ctx)
	case bg.WaitingFor == WaitingForAnalysis && bg.AnalysisSpec != nil && bg.Analysis != nil:
		r.startBlueGreenAnalysis(ctx)
	}
}

// addBlueGreenWaits adds the phase's timer and analysis to a selector.
func (r *rollout) addBlueGreenWaits(ctx workflow.Context, sel workflow.Selector) {
	r.bgWaits.addTo(ctx, sel, func() {
		if r.bgTimerFor == abortHoldTimer {
			r.endAbortHold(ctx)
			return
		}
		bg := r.BlueGreen
		if bg == nil || bg.Phase != r.bgTimerFor || r.bgSpec == nil {
			return
		}
		if bg.WaitingFor == WaitingForFreeze && bg.Phase == BlueGreenPaused {
			r.recheckBlueGreenFreeze(ctx)
			return
		}
		if bg.WaitingFor != WaitingForTimer {
			return
		}
		switch bg.Phase {
		case BlueGreenPaused:
			r.autoPromoteBlueGreen(ctx, fmt.Sprintf("Promoted automatically after autoPromotionSeconds %d", r.bgSpec.AutoPromotionSeconds))
		case BlueGreenScaleDownDelay:
			r.enterBlueGreen(ctx, BlueGreenScalingDown)
		}
	}, func(res analysisResult) {
		bg := r.BlueGreen
		if bg == nil || bg.WaitingFor != WaitingForAnalysis || r.bgSpec == nil {
			return
		}
		name := analysisName(bg.Phase)
		switch res.verdict {
		case analysisSuccessful:
			r.recordStep(ctx, "AnalysisSuccessful", "Blue-green: "+name+" passed: "+res.message)
			if bg.Phase == BlueGreenPostPromotionAnalysis {
				r.enterBlueGreen(ctx, BlueGreenScaleDownDelay)
			} else {
				r.afterPrePromotion(ctx)
			}
		case analysisFailed:
			r.recordStepWarning(ctx, "AnalysisFailed", "Blue-green: "+name+" failed: "+res.message)
			r.startAbort(ctx, name+" failed: "+res.message)
		default:
			bg.WaitingFor = WaitingForPromote
			bg.Message = "Blue-green: " + name + " inconclusive, paused until promoted or aborted: " + res.message
			r.recordStepWarning(ctx, "AnalysisInconclusive", bg.Message)
		}
		r.Dirty = true
	})
}

// afterPrePromotion goes on once the pre-promotion analysis passed: to promotion, at once or
// after autoPromotionSeconds, or to a pause until promoted.
func (r *rollout) afterPrePromotion(ctx workflow.Context) {
	spec := r.bgSpec
	if spec.AutoPromotes() && spec.AutoPromotionSeconds == 0 {
		r.autoPromoteBlueGreen(ctx, "Promoted automatically (autoPromotionEnabled)")
		return
	}
	r.enterBlueGreen(ctx, BlueGreenPaused)
}

// stopBlueGreenWaits cancels the phase's timer and analysis.
func (r *rollout) stopBlueGreenWaits() {
	r.bgWaits.stop()
}

// endBlueGreen forgets the blue-green rollout.
func (r *rollout) endBlueGreen() {
	if r.BlueGreen != nil {
		r.stopBlueGreenWaits()
	}
	r.BlueGreen = nil
}
