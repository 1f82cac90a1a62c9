package workflows

import (
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// Input is the workflow's input: the contract's (what a user or the watcher starts it with) and
// the state a run hands to the next. Its JSON is contract.Input's with "carry" after it.
type Input struct {
	contract.Input
	// State is the previous run's state, whole, handed over by Continue-As-New (state.go).
	// Users leave it out.
	State *State `json:"carry,omitempty"`
}

// State is one run's state, whole: a run starts from it (Input.State) and hands it, as it
// then is, to the next run through Continue-As-New. The rollout works on it in place (it is
// embedded in rollout), so nothing is copied by hand either way: a field added here is carried
// over with no other line to write (TestStateCarriedWhole checks every field by reflection).
// What is not here is rebuilt by each run from it (newRollout): the signal channels, the
// timers, analyses and waits under way, the last snapshot, and the answers of
// workflow.GetVersion, which belong to one run's history.
//
// Its JSON is the "carry" object of the runs recorded before it had this name: the field
// names are unchanged, so those runs' inputs decode as they did.
type State struct {
	// Idle: the previous run converged, so wait for a change before syncing. Set as a run
	// continues as new; Dirty is the work owed (a sync), at any time.
	Idle  bool `json:"idle,omitempty"`
	Dirty bool `json:"dirty,omitempty"`
	// RollbackTo: a rollback asked (the signal, an abort) and not yet done; Pause: a pause or
	// resume asked and not yet written to spec.paused.
	RollbackTo *int64 `json:"rollbackTo,omitempty"`
	Pause      *bool  `json:"pause,omitempty"`
	// Runs counts the runs before this one.
	Runs int `json:"runs,omitempty"`
	// UID is the Deployment's UID as last seen, so the events a run records before its first
	// sync (a step timer that fires, a promote) name the object.
	UID types.UID `json:"uid,omitempty"`
	// LocalWait is the worker's --local-wait, as its last Observe reported it (so a replay
	// decides as the run did): how long the wait for a rollout's next move runs first inside
	// the workflow task, as a local AwaitChange. 0: the wait is always the AwaitChange
	// activity, and the workflow task completes after every sync. Signals, updates and
	// queries that arrive during a local wait are delivered when it ends.
	LocalWait time.Duration `json:"localWait,omitempty"`
	// Status is the status query's answer as the last sync left it, so the query answers
	// before a run's first sync.
	Status contract.Status `json:"status"`
	// AtLeast and LiveNext are read-your-writes: the versions the next sync must see, and
	// whether it must read live (after a stale decision).
	AtLeast  []k8s.ObjectVersion `json:"atLeast,omitempty"`
	LiveNext bool                `json:"liveNext,omitempty"`
	// A stepped rollout in progress (steps.go): its state and steps; the stable template (the
	// last that completed); the template of the last sync; an abort under way; the invalid
	// annotation already warned about.
	Steps      *stepsState       `json:"steps,omitempty"`
	StepList   []k8s.RolloutStep `json:"stepList,omitempty"`
	StableHash string            `json:"stableHash,omitempty"`
	LastHash   string            `json:"lastHash,omitempty"`
	Abort      *abortState       `json:"abort,omitempty"`
	Warned     string            `json:"warned,omitempty"`
	// AnnotationError: an invalid rollout annotation holds the rollout (the last sync's).
	AnnotationError string `json:"annotationError,omitempty"`
	// Managed and ManagedGuard: the worker runs in managed mode (--managed-guard), as Observe
	// last said; ManagedProgress: the rollout's own Progressing condition there, the progress
	// deadline's clock (k8s.Request.ManagedProgress).
	Managed         bool                        `json:"managed,omitempty"`
	ManagedProgress *appsv1.DeploymentCondition `json:"managedProgress,omitempty"`
	ManagedGuard    bool                        `json:"managedGuard,omitempty"`
	// Traffic: the route as the last traffic move left it (traffic.go).
	Traffic *contract.TrafficStatus `json:"traffic,omitempty"`
	// RouteFence: the epoch of the route's wait fence the run wants (raised each time it
	// gives up a wait that may move the route, change inline-traffic-moves);
	// RouteFenced: the epoch a sync last found on the route, or wrote (traffic.go).
	RouteFence  int64 `json:"routeFence,omitempty"`
	RouteFenced int64 `json:"routeFenced,omitempty"`
	// BlueGreen: a blue-green rollout in progress, and what its Services select (bluegreen.go).
	BlueGreen         *blueGreenState             `json:"blueGreen,omitempty"`
	BlueGreenServices *contract.BlueGreenServices `json:"blueGreenServices,omitempty"`
	// Notify is the notify annotation as the last sync read it, UIURL the worker's --ui-url,
	// and Notifications, as a run continues, those not yet delivered, which the next run
	// sends (notify.go).
	Notify        *k8s.NotifyConfig        `json:"notify,omitempty"`
	UIURL         string                   `json:"uiURL,omitempty"`
	Notifications []activities.NotifyInput `json:"notifications,omitempty"`
}

// stepsState is a stepped rollout in progress.
type stepsState struct {
	// Hash is the pod-template-hash the steps run for; Revision its revision.
	Hash     string `json:"hash"`
	Revision int64  `json:"revision,omitempty"`
	// Step is the current step, 0-based; past the last, the rollout goes to 100%.
	Step int `json:"step"`
	// Full: promote {"full":true} skipped the remaining steps.
	Full       bool       `json:"full,omitempty"`
	PauseUntil *time.Time `json:"pauseUntil,omitempty"`
	// PhaseWait: what the step waits for; its Analysis is an analysis step's measurements,
	// its Freeze the fleet freeze the rollout holds for before its next step.
	PhaseWait
}

// PhaseWait is what a phase waits for, a step's and a blue-green phase's alike (holds.go
// reads it): the wait (a WaitingFor value, empty when the phase goes on by itself), what it
// says, the analysis under way and the fleet freeze that holds the phase. Its fields are its
// holder's in JSON.
type PhaseWait struct {
	WaitingFor string                   `json:"waitingFor,omitempty"`
	Message    string                   `json:"message,omitempty"`
	Analysis   *contract.AnalysisStatus `json:"analysis,omitempty"`
	Freeze     *contract.FreezeHold     `json:"freeze,omitempty"`
}

// abortState is an abort under way: the rollback to the stable revision, until it completes.
type abortState struct {
	Reason string `json:"reason"`
	// Hash is the template that was aborted.
	Hash string `json:"hash"`
	// Until (a blue-green abort, abortScaleDownDelaySeconds Delay) ends the hold of the
	// aborted ReplicaSet's pods, on a durable timer; nil once it passed, or without a hold.
	Until *time.Time `json:"until,omitempty"`
	Delay int32      `json:"delay,omitempty"`
}

// blueGreenState is a blue-green rollout in progress.
type blueGreenState struct {
	// Hash is the template rolled out, Revision its revision. The template the active Service
	// selects until promotion is the stable one, State.StableHash (runs recorded before this
	// kept a copy here, "stableHash", which decodes to nothing).
	Hash     string `json:"hash"`
	Revision int64  `json:"revision,omitempty"`
	Phase    string `json:"phase"`
	// PhaseWait: what the phase waits for; its Analysis is the pre- or post-promotion
	// analysis under way (AnalysisSpec), its Freeze the fleet freeze the automatic promotion
	// holds for (WaitingFor Freeze, Until the next look at it; freeze.go).
	PhaseWait
	// Promoted: promote (or the automatic promotion) happened; Full: promote {"full":true}
	// skipped the analyses.
	Promoted bool `json:"promoted,omitempty"`
	Full     bool `json:"full,omitempty"`
	// Until ends the automatic promotion's wait or the scale-down delay.
	Until        *time.Time        `json:"until,omitempty"`
	AnalysisSpec *k8s.AnalysisStep `json:"analysisSpec,omitempty"`
	// Spec is the annotation as the last sync read it, so a run continued from this one acts
	// on a timer or an analysis that ends before its first sync.
	Spec *k8s.BlueGreenSpec `json:"spec,omitempty"`
}

// currentStep describes the current step.
func (s *State) currentStep() string {
	if s.Steps == nil || s.Steps.Step >= len(s.StepList) {
		return "done"
	}
	return s.StepList[s.Steps.Step].String()
}

// weight is the weight in force at the current step: the last setWeight at or before it.
func (s *State) weight() int32 {
	var w int32
	for i := 0; i <= s.Steps.Step && i < len(s.StepList); i++ {
		if sw := s.StepList[i].SetWeight; sw != nil {
			w = *sw
		}
	}
	return w
}

// stepsStatus is the status query's view of the stepped rollout.
func (s *State) stepsStatus() *contract.StepsStatus {
	cur := s.Steps
	if cur == nil {
		return nil
	}
	st := &contract.StepsStatus{
		Step: cur.Step + 1, Steps: len(s.StepList), Current: s.currentStep(), Weight: s.weight(),
		WaitingFor: cur.WaitingFor, Message: cur.Message, PauseUntil: cur.PauseUntil, Full: cur.Full, Analysis: cur.Analysis,
		Traffic: s.Traffic, Freeze: cur.Freeze,
	}
	if cur.Full {
		st.Weight = 100
	}
	if a := cur.Analysis; a != nil && len(a.Measurements) > 0 {
		m := a.Measurements[len(a.Measurements)-1]
		st.LastValue = &m
	}
	return st
}

// stepSummary is one line on the stepped rollout: "step 2 of 5 (pause 30s): paused until ...".
func (s *State) stepSummary() string {
	switch {
	case s.Abort != nil:
		return "aborting: " + s.Abort.Reason
	case s.BlueGreen != nil:
		return s.BlueGreen.Message
	case s.Steps == nil:
		return string(s.Status.Phase)
	case s.Steps.Full:
		return "promoted in full, rolling out to 100%"
	}
	return s.Steps.Message
}

// blueGreenStatus is the status query's view: nil for a Deployment without blue-green.
func (s *State) blueGreenStatus() *contract.BlueGreenStatus {
	if s.BlueGreen == nil && s.BlueGreenServices == nil {
		return nil
	}
	st := &contract.BlueGreenStatus{}
	if sv := s.BlueGreenServices; sv != nil {
		st.BlueGreenServices = *sv
	}
	if bg := s.BlueGreen; bg != nil {
		st.Phase, st.Hash, st.StableHash, st.WaitingFor, st.Message = bg.Phase, bg.Hash, s.StableHash, bg.WaitingFor, bg.Message
		st.Promoted, st.Until, st.Analysis, st.Freeze = bg.Promoted, bg.Until, bg.Analysis, bg.Freeze
	}
	return st
}

// report refreshes the status query's answer from the snapshot and plan.
func (s *State) report(snap k8s.Snapshot, plan k8s.Plan) {
	d := snap.Deployment
	st := &s.Status
	st.Phase = string(plan.Phase)
	st.Paused = k8s.Effective(d).Spec.Paused
	if d.Spec.Replicas != nil {
		st.Replicas = *d.Spec.Replicas
	}
	st.Conditions = plan.Status.Conditions
	st.NewReplicaSet = plan.NewReplicaSet
	st.TargetRevision = plan.Revision
	st.Message = plan.Message
	st.ReplicaSets = nil
	for _, rs := range snap.ReplicaSets {
		rev, _ := k8s.Revision(rs.Annotations)
		var n int32
		if rs.Spec.Replicas != nil {
			n = *rs.Spec.Replicas
		}
		st.ReplicaSets = append(st.ReplicaSets, contract.ReplicaSetStatus{Name: rs.Name, Hash: rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey], Revision: rev, Replicas: n, Ready: rs.Status.ReadyReplicas, Available: rs.Status.AvailableReplicas})
	}
	sort.Slice(st.ReplicaSets, func(i, j int) bool { return st.ReplicaSets[i].Revision > st.ReplicaSets[j].Revision })
	if plan.Phase == k8s.PhaseComplete {
		st.CurrentRevision = plan.Revision
	}
}

// frozenMessage: "Held before step 3 of 4 (setWeight 60): fleet freeze until ... (reason)".
func (s *State) frozenMessage() string {
	cur := s.Steps
	next := "100%"
	if cur.Step+1 < len(s.StepList) {
		next = fmt.Sprintf("step %d of %d (%s)", cur.Step+2, len(s.StepList), s.StepList[cur.Step+1])
	}
	return fmt.Sprintf("Held before %s: %s %s (%s)", next, k8s.FleetFreezeHeldText, cur.Freeze.Until.Format(time.RFC3339), cur.Freeze.Reason)
}

// headerStep reports whether the current step is a setHeaderRoute that adds a route: it
// passes only once the canary has available pods and the route carries the header routes
// (unless the canary has no pods at this step: its header route is written once it has).
func (s *State) headerStep() bool {
	cur := s.Steps
	if cur == nil || cur.Full || cur.Step >= len(s.StepList) {
		return false
	}
	h := s.StepList[cur.Step].SetHeaderRoute
	return h != nil && len(h.Match) > 0
}

// returning reports whether a sync asks for the way back to the stable template: an abort, or
// no canary while the route's canary Service is on another template (the rollback signal,
// kubectl rollout undo, a release's rollback).
func (s *State) returning(ask k8s.TrafficAsk) bool {
	if s.Abort != nil || ask.Aborted != "" {
		return true
	}
	t := s.Traffic
	return ask.Canary == ask.Stable && t != nil && t.Canary.Hash != "" && t.Canary.Hash != ask.Stable
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

func conditionMessage(st appsv1.DeploymentStatus) string {
	if c := k8s.GetCondition(st, appsv1.DeploymentProgressing); c != nil {
		return c.Message
	}
	return ""
}
