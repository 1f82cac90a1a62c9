package k8s

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Blue-green rollouts on the plain Deployment, in Argo Rollouts' blueGreen vocabulary
// (docs/blue-green.md). The new ReplicaSet scales to its full size beside the old one, which
// keeps its pods; a preview Service selects the new pods, the active Service the old ones
// until promotion; then the active Service switches and the old ReplicaSet stays warm for
// scaleDownDelaySeconds, for an instant rollback.

// BlueGreenAnnotation holds a blue-green rollout's settings as a JSON object:
//
//	{"activeService":"web","previewService":"web-preview","autoPromotionEnabled":false,
//	 "scaleDownDelaySeconds":30,"prePromotionAnalysis":{...},"postPromotionAnalysis":{...}}
const BlueGreenAnnotation = "temporal-rollout.io/blue-green"

// DefaultScaleDownDelay is Argo Rollouts' default scaleDownDelaySeconds.
const DefaultScaleDownDelay = 30 * time.Second

// maxBlueGreenSeconds bounds autoPromotionSeconds, scaleDownDelaySeconds and
// abortScaleDownDelaySeconds (a day).
const maxBlueGreenSeconds = 86400

// BlueGreenSpec is the blue-green annotation.
type BlueGreenSpec struct {
	// ActiveService receives production traffic: it selects the stable pods until promotion,
	// the new ones after. Required.
	ActiveService string `json:"activeService"`
	// PreviewService selects the new pods once they are all available, before promotion.
	// Optional.
	PreviewService string `json:"previewService,omitempty"`
	// AutoPromotionEnabled (default true) promotes without a promote update: at once once
	// the new pods are available (and the pre-promotion analysis passed), or after
	// AutoPromotionSeconds. false waits for promote.
	AutoPromotionEnabled *bool `json:"autoPromotionEnabled,omitempty"`
	// AutoPromotionSeconds delays the automatic promotion, counted from the moment the
	// rollout is ready for it, on a durable timer.
	AutoPromotionSeconds int32 `json:"autoPromotionSeconds,omitempty"`
	// ScaleDownDelaySeconds (default 30) keeps the old ReplicaSet at full size after the
	// active Service switched, so a rollback switches back to warm pods.
	ScaleDownDelaySeconds *int32 `json:"scaleDownDelaySeconds,omitempty"`
	// AbortScaleDownDelaySeconds (default 30, as Argo's) keeps the aborted ReplicaSet's pods
	// that long after an abort, once both Services select the stable pods again, so requests
	// already routed to them finish. 0 scales it down at once (Argo's 0, "never", would leave a
	// Deployment that never completes).
	AbortScaleDownDelaySeconds *int32 `json:"abortScaleDownDelaySeconds,omitempty"`
	// PreviewReplicaCount runs the new ReplicaSet at this size until promotion (default: all
	// replicas); on promotion it goes to full size, and the active Service switches once all
	// of it is available.
	PreviewReplicaCount *int32 `json:"previewReplicaCount,omitempty"`
	// PrePromotionAnalysis and PostPromotionAnalysis measure as a steps annotation's analysis
	// step does (Prometheus, web or job). A failed one aborts the rollout.
	PrePromotionAnalysis  *AnalysisStep `json:"prePromotionAnalysis,omitempty"`
	PostPromotionAnalysis *AnalysisStep `json:"postPromotionAnalysis,omitempty"`
}

// AutoPromotes reports whether the rollout promotes itself (autoPromotionEnabled, default
// true).
func (s *BlueGreenSpec) AutoPromotes() bool {
	return s.AutoPromotionEnabled == nil || *s.AutoPromotionEnabled
}

// ScaleDownDelay is scaleDownDelaySeconds, or its default.
func (s *BlueGreenSpec) ScaleDownDelay() time.Duration {
	if s.ScaleDownDelaySeconds == nil {
		return DefaultScaleDownDelay
	}
	return time.Duration(*s.ScaleDownDelaySeconds) * time.Second
}

// AbortScaleDownDelay is abortScaleDownDelaySeconds, or its default (DefaultScaleDownDelay).
func (s *BlueGreenSpec) AbortScaleDownDelay() time.Duration {
	if s.AbortScaleDownDelaySeconds == nil {
		return DefaultScaleDownDelay
	}
	return time.Duration(*s.AbortScaleDownDelaySeconds) * time.Second
}

// PreviewReplicas is the new ReplicaSet's size before promotion: previewReplicaCount, at most
// replicas; replicas without it. 10 replicas, previewReplicaCount 2: 2.
func (s *BlueGreenSpec) PreviewReplicas(replicas int32) int32 {
	if s.PreviewReplicaCount == nil {
		return replicas
	}
	return min(*s.PreviewReplicaCount, replicas)
}

// ParseBlueGreen reads and validates the blue-green annotation: nil, nil when absent. It is
// mutually exclusive with the steps and traffic annotations, and needs the RollingUpdate
// strategy (a Recreate rollout never runs both ReplicaSets). The error names every problem.
func ParseBlueGreen(d *appsv1.Deployment) (*BlueGreenSpec, error) {
	raw, ok := d.Annotations[BlueGreenAnnotation]
	if !ok {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	var spec BlueGreenSpec
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object like {\"activeService\":\"web\",\"previewService\":\"web-preview\"}: %v", BlueGreenAnnotation, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s has data after the object", BlueGreenAnnotation)
	}
	var errs []error
	switch {
	case spec.ActiveService == "":
		errs = append(errs, errors.New("activeService is missing"))
	case len(validation.IsDNS1035Label(spec.ActiveService)) > 0:
		errs = append(errs, fmt.Errorf("activeService %q is not a valid Service name", spec.ActiveService))
	}
	if spec.PreviewService != "" {
		if len(validation.IsDNS1035Label(spec.PreviewService)) > 0 {
			errs = append(errs, fmt.Errorf("previewService %q is not a valid Service name", spec.PreviewService))
		}
		if spec.PreviewService == spec.ActiveService {
			errs = append(errs, fmt.Errorf("activeService and previewService are both %q; they must differ", spec.ActiveService))
		}
	}
	if n := spec.AutoPromotionSeconds; n < 0 || n > maxBlueGreenSeconds {
		errs = append(errs, fmt.Errorf("autoPromotionSeconds %d is not between 0 and %d", n, maxBlueGreenSeconds))
	}
	if spec.AutoPromotionSeconds > 0 && !spec.AutoPromotes() {
		errs = append(errs, errors.New("autoPromotionSeconds is set but autoPromotionEnabled is false; set one or the other"))
	}
	if p := spec.ScaleDownDelaySeconds; p != nil && (*p < 0 || *p > maxBlueGreenSeconds) {
		errs = append(errs, fmt.Errorf("scaleDownDelaySeconds %d is not between 0 and %d", *p, maxBlueGreenSeconds))
	}
	if p := spec.AbortScaleDownDelaySeconds; p != nil && (*p < 0 || *p > maxBlueGreenSeconds) {
		errs = append(errs, fmt.Errorf("abortScaleDownDelaySeconds %d is not between 0 and %d", *p, maxBlueGreenSeconds))
	}
	if p := spec.PreviewReplicaCount; p != nil && *p < 1 {
		errs = append(errs, fmt.Errorf("previewReplicaCount %d is below 1", *p))
	}
	for _, an := range []struct {
		name string
		a    **AnalysisStep
	}{{"prePromotionAnalysis", &spec.PrePromotionAnalysis}, {"postPromotionAnalysis", &spec.PostPromotionAnalysis}} {
		if *an.a == nil {
			continue
		}
		if err := (*an.a).validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", an.name, err))
			continue
		}
		*an.a = (*an.a).withDefaults()
	}
	if s := d.Annotations[StepsAnnotation]; strings.TrimSpace(s) != "" {
		errs = append(errs, fmt.Errorf("%s is set too: a Deployment rolls out either in steps or blue-green, not both", StepsAnnotation))
	}
	if _, ok := d.Annotations[TrafficAnnotation]; ok {
		errs = append(errs, fmt.Errorf("%s is set too: it routes a stepped rollout; blue-green switches its Services' selectors itself", TrafficAnnotation))
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		errs = append(errs, errors.New("blue-green needs the RollingUpdate strategy; this Deployment uses Recreate"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", BlueGreenAnnotation, errors.Join(errs...))
	}
	return &spec, nil
}

// rolloutBlueGreen is one sync of a blue-green rollout (Canary.BlueGreen): the new ReplicaSet
// goes straight to its size (BlueGreenReplicas, or replicas), not bounded by maxSurge, as
// Argo's blue-green runs two full stacks; the stable ReplicaSet keeps its replicas, and an
// earlier preview (neither stable nor new) keeps them until the new one serves fully, then goes
// to 0 (with Canary.StableHash; without it every old one keeps its replicas). 10 replicas,
// old at 10: the new ReplicaSet is created at 10 (20 pods); once the workflow ends the rollout
// (no Canary), upstream's rolling update scales the old one to 0 in one move
// (maxScaledDown = 20 − (10 − maxUnavailable) − 0 ≥ 10).
func (p *planner) rolloutBlueGreen() {
	p.newCap = p.canary.blueGreenSize(replicas(p.d))
	newRS, old := p.getNewReplicaSet(true)
	all := withNew(old, newRS)
	if newRS == nil {
		p.syncRolloutStatus(all, newRS)
		return
	}
	if rsReplicas(newRS) != p.newCap {
		p.scaleReplicaSet(newRS, p.newCap, false)
	}
	p.reached = rsReplicas(newRS) == p.newCap && p.availableNow(newRS) >= p.newCap
	if p.reached && p.canary.StableHash != "" {
		// An earlier preview, never promoted: once the new ReplicaSet serves fully, the preview
		// Service selects it (in this sync, before the writes), the active one the stable
		// template, and none the earlier preview, which goes to 0, as Argo Rollouts scales
		// down the old ReplicaSets the active Service does not select.
		for _, rs := range filterActive(old) {
			if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != p.canary.StableHash {
				p.scaleReplicaSet(rs, 0, false)
			}
		}
	}
	p.syncRolloutStatus(all, newRS)
}

// scaleBlueGreen is a scaling event's sync in a blue-green rollout, as Argo Rollouts'
// scaleBlueGreen: the stable ReplicaSet (Canary.StableHash: what the active Service selects
// until promotion, the warm one after it) goes to replicas, the new one to its blue-green size
// (blueGreenSize), and every other active ReplicaSet keeps its replicas; each gets the new
// desired-replicas annotation, so the next sync is the rollout's again. Upstream's proportional
// scaling would share replicas + maxSurge between two full stacks instead: 10 replicas, old
// and new at 10, scaled to 14 would take the old ReplicaSet, which the active Service
// selects, down to 4. Here both go to 14; scaled to 6, both go to 6.
func (p *planner) scaleBlueGreen(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) {
	n := replicas(p.d)
	for _, rs := range filterActive(old) {
		size := rsReplicas(rs)
		if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == p.canary.StableHash {
			size = n
		}
		p.scaleReplicaSet(rs, size, true)
	}
	p.scaleReplicaSet(newRS, p.canary.blueGreenSize(n), true)
}

// blueGreenSize is the new ReplicaSet's size in a blue-green rollout: BlueGreenReplicas
// (previewReplicaCount before promotion), at most replicas; replicas when 0.
func (c *Canary) blueGreenSize(replicas int32) int32 {
	if c.BlueGreenReplicas > 0 {
		return min(c.BlueGreenReplicas, replicas)
	}
	return replicas
}

// ServesFully reports whether the ReplicaSet with pod-template-hash hash has pods and all of
// them available, before the sync's plan runs and after: only then may a Service switch to it
// (traffic never exceeds capacity). rss: the snapshot's ReplicaSets. A ReplicaSet the plan
// scales is weighed at its new size: 1 of 1 pods available and the plan scaling it to 3 (a
// promotion after previewReplicaCount 1) is not fully available.
func ServesFully(rss []*appsv1.ReplicaSet, plan Plan, hash string) bool {
	if hash == "" {
		return false
	}
	for _, rs := range rss {
		if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash || rs.DeletionTimestamp != nil {
			continue
		}
		n := rsReplicas(rs)
		for _, s := range plan.Steps {
			switch s.Kind {
			case StepScaleUp, StepScaleDown, StepUpdateRS:
				if s.ReplicaSet != nil && s.ReplicaSet.Name == rs.Name && s.ReplicaSet.Spec.Replicas != nil {
					n = max(n, *s.ReplicaSet.Spec.Replicas)
				}
			}
		}
		return n > 0 && rs.Status.AvailableReplicas >= n
	}
	return false
}

// BlueGreenTargets is the pod-template-hash each Service selects: at rest, or after an abort
// or a rollback to the stable template, both select the Deployment's template (current);
// during a rollout of current, the preview Service selects it and the active one the stable
// template until promoted, current from then on.
func BlueGreenTargets(stable, current string, rolling, promoted bool) (active, preview string) {
	switch {
	case !rolling || stable == "":
		return current, current
	case promoted:
		return current, current
	}
	return stable, current
}
