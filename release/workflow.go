package release

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// The release workflow, release/<name>, on the "releases" task queue:
//
//  1. validate the spec (a bad one fails the run at once, naming every problem);
//  2. read the targets (ReadTargets per group, on the group's cluster) and check the change
//     against every one (PreflightChange), before any change;
//  3. per wave, in order: wait for its approvals, for any freeze (the release's windows, the
//     fleet freeze) and for a pause to end; change its Deployments (ApplyTemplateChange, at
//     most maxConcurrent at once, the freezes checked again before each, each followed by
//     AwaitRolloutDone, whose clock stops while the fleet freeze holds the rollout); measure
//     its analysis; bake;
//  4. on a failure (an abort, a failed rollout or analysis, a cluster that did not answer
//     within clusterTimeout; a change whose result was lost is read back first): stop, and
//     unless onFailure is halt restore every changed target whose template is still the
//     release's (RestoreTemplate), the last wave first.
//
// History: each Deployment costs about 20 events on the way (apply, event, wait, the workflow
// tasks and memo updates between) and about as many on a rollback (measured on the real
// stack, docs/releases.md), so 1,000 targets stay near 40,000 events, under Temporal's 51,200
// limit. The change release-link-rollouts adds, per Deployment changed, a marker (LinkRollout)
// and a signal (link), with the workflow task a signal may wake: not yet measured at 1,000. The run continues as new between waves once Temporal suggests it, handing over its
// State.

var saRelease = temporal.NewSearchAttributeKeyKeyword(contract.SearchAttrRelease)

// continueAfterEvents: past this many events the run continues as new before its next wave
// (or when Temporal suggests it first), so a run holds at most this plus one wave and, on a
// failure, the rollback of what was changed: 5,000 + 20,000 + 20,000 for 1,000 Deployments in
// one wave, under Temporal's 51,200.
const continueAfterEvents = 5000

// State is what a run hands the next by Continue-As-New.
type State struct {
	Status Status `json:"status"`
	// Current is the 0-based index of the wave under way or waited at.
	Current  int  `json:"current"`
	Resolved bool `json:"resolved,omitempty"`
	// Points are the targets' restore points, in the order of Status.Targets.
	Points []restorePoint `json:"points,omitempty"`
	Runs   int            `json:"runs,omitempty"`
	// Policy is the worker's policy in force, read at the release's start (nil in a run begun
	// before the change release-worker-policy): later runs keep it.
	Policy *PolicyResult `json:"policy,omitempty"`
}

// Change IDs of the release workflow (docs/versioning.md, "The release workflow").
const (
	// changeResumeOnlyContinued: a run takes Spec.Resume only when it was continued as new.
	changeResumeOnlyContinued = "release-resume-only-continued"
	// changeFreezeEachChange: the release's windows and the fleet freeze are checked before
	// every Deployment change, not only before a wave.
	changeFreezeEachChange = "release-freeze-each-change"
	// changeAwaitHeld: a rollout held by the fleet freeze stops the release's rolloutTimeout
	// clock (AwaitRolloutDone with ReportHold) and shows in the status.
	changeAwaitHeld = "release-await-held"
	// changeReadBackLostChange: a change whose result was lost is read back; one that landed
	// counts as a change.
	changeReadBackLostChange = "release-read-back-lost-change"
	// changeRollbackKeepsLaterChanges: a rollback restores only a Deployment whose template is
	// still the one the release wrote.
	changeRollbackKeepsLaterChanges = "release-rollback-keeps-later-changes"
	// changeApproverNames: approvers' names are normalized as PRECIS UsernameCaseMapped (NFKC,
	// case folding) and refused when they hold invisible characters or mix scripts
	// (CheckApprover).
	changeApproverNames = "release-approver-names"
	// changeWorkerPolicy: the approval policy is the worker's (ReleasePolicy, read once at the
	// start), the author is proven (a start signature) or shown unsigned, and a signed
	// approval signs ApprovalBinding (the whole spec, the wave's targets, the policy, the run,
	// the approver, a not-after time); carried approvals are verified again on resume.
	changeWorkerPolicy = "release-worker-policy"
	// changeRefuseCron: a release run with a cron schedule fails at once (a cron run after the
	// first looks continued, and would take a forged resume).
	changeRefuseCron = "release-refuse-cron"
	// changeFreezeUnreadableHolds: a fleet freeze that cannot be read holds the release and
	// asks again, the reason in its status; before, the release failed.
	changeFreezeUnreadableHolds = "release-freeze-unreadable-holds"
)

// check says what in the state would index out of range or dereference nil in this
// release's run: a state the workflow handed over never does, a hand-made one may.
func (st *State) check(spec *Spec) error {
	switch {
	case st.Status.Name != spec.Name:
		return fmt.Errorf("it is release %q's, not %q's", st.Status.Name, spec.Name)
	case len(st.Status.Waves) != len(spec.Waves):
		return fmt.Errorf("%d waves, the release has %d", len(st.Status.Waves), len(spec.Waves))
	case st.Current < 0 || st.Current >= len(spec.Waves):
		return fmt.Errorf("current wave %d is not one of the release's %d (0-based)", st.Current, len(spec.Waves))
	case len(st.Points) != len(st.Status.Targets):
		return fmt.Errorf("%d restore points for %d targets", len(st.Points), len(st.Status.Targets))
	case !st.Resolved && len(st.Status.Targets) > 0:
		return fmt.Errorf("%d targets, but the targets were not read", len(st.Status.Targets))
	}
	waves := map[string]int{}
	for i, w := range spec.Waves {
		if st.Status.Waves[i].Name != w.Name {
			return fmt.Errorf("wave %d is %q, the release's is %q", i+1, st.Status.Waves[i].Name, w.Name)
		}
		waves[w.Name] = 0
	}
	for i, t := range st.Status.Targets {
		if _, ok := waves[t.Wave]; !ok {
			return fmt.Errorf("target %d (%s) is in wave %q, which the release does not have", i, targetString(t.Cluster, t.Namespace, t.Name), t.Wave)
		}
		waves[t.Wave]++
		if p := st.Points[i]; p.Changed && p.Before == nil && p.BeforeHash == "" {
			return fmt.Errorf("target %d (%s) is changed but has no template to restore", i, targetString(t.Cluster, t.Namespace, t.Name))
		}
	}
	if st.Resolved {
		for _, w := range spec.Waves {
			if waves[w.Name] == 0 {
				return fmt.Errorf("wave %q has no targets", w.Name)
			}
		}
	}
	return nil
}

// restorePoint is what a target was before the release changed it.
//
// The state a run hands over stays bounded: about 150 bytes a target (1,000 targets, with
// Status, under 400 KiB), far from Temporal's 2 MB payload limit. It names the template to
// restore by its pod-template-hash (BeforeHash), the ReplicaSet the cluster keeps for it, not
// by the template: 1,000 realistic templates of 3.4 KB are 3.4 MiB, and a run holding them
// could not continue as new, nor roll back. Within a run, Before holds the template (the
// ApplyTemplateChange result, in memory and in its history); it is dropped from the state
// handed over (compact), and a rollback after that restores from the ReplicaSet
// (RestoreInput.FromHash). State from a run before this change carries Before and no
// BeforeHash, and restores from Before, as it did.
type restorePoint struct {
	UID types.UID `json:"uid,omitempty"`
	// ReadHash is the pod-template-hash when the release read the targets.
	ReadHash string                  `json:"readHash,omitempty"`
	Changed  bool                    `json:"changed,omitempty"`
	Hash     string                  `json:"hash,omitempty"`
	Before   *corev1.PodTemplateSpec `json:"before,omitempty"`
	// BeforeHash is Before's pod-template-hash (ApplyResult.BeforeHash); empty from a cluster
	// worker older than it, whose Before is then carried on.
	BeforeHash string `json:"beforeHash,omitempty"`
	// Unknown: the change's result was lost and reading the Deployment back failed too, so
	// whether it has the change is not known; the release cannot end RolledBack.
	Unknown bool `json:"unknown,omitempty"`
}

// compact drops the templates that a ReplicaSet's hash names, before the state is handed over.
func (st *State) compact() {
	for i := range st.Points {
		if st.Points[i].BeforeHash != "" {
			st.Points[i].Before = nil
		}
	}
}

type run struct {
	spec     Spec
	st       *State
	skipBake bool
	// cancelWave stops the waits of the wave under way (abort, failure).
	cancelWave workflow.CancelFunc
	memo       string
	// held counts the wave's rollouts held by the fleet freeze, heldMsg is the last hold's
	// message (awaitRollout).
	held    int
	heldMsg string
	// checkNames: approvers' names are judged by CheckApprover (NFKC, case folding, no
	// invisible or mixed-script names); false for a run begun before the change
	// release-approver-names, which keeps legacyNormalizeApprover.
	checkNames bool
	// policy is r.st.Policy: the worker's policy in force; nil in a run begun before the change
	// release-worker-policy, which judges approvals by the release file alone.
	policy *PolicyResult
}

// ReleaseWorkflow runs one release. Start it with `starter release apply -f FILE` or:
//
//	temporal workflow start --task-queue releases --type ReleaseWorkflow \
//	  --workflow-id release/web-1-27 --input-file release.json
func ReleaseWorkflow(ctx workflow.Context, spec Spec) (Result, error) {
	resume := spec.Resume
	spec.Resume = nil
	if err := spec.Validate(); err != nil {
		return Result{}, temporal.NewNonRetryableApplicationError("invalid release: "+strings.ReplaceAll(err.Error(), "\n", "; "), ErrInvalid, nil)
	}
	if id := workflow.GetInfo(ctx).WorkflowExecution.ID; id != WorkflowID(spec.Name) {
		return Result{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("workflow ID %q: a release named %q runs as %q", id, spec.Name, WorkflowID(spec.Name)), ErrInvalid, nil)
	}
	if workflow.GetInfo(ctx).CronSchedule != "" && workflow.GetVersion(ctx, changeRefuseCron, workflow.DefaultVersion, 1) >= 1 {
		// Every run of a cron schedule after the first looks continued (it has a
		// ContinuedExecutionRunID) and gets the first run's input again: a forged resume in it
		// would be taken.
		return Result{}, temporal.NewNonRetryableApplicationError("invalid release: a release does not run on a cron schedule; start it once, without --cron", ErrInvalid, nil)
	}
	if resume != nil {
		// Resumed state is the workflow's own, handed over by continue-as-new. A start that
		// passes it (temporal workflow start with "resume") would skip approvals, so it is
		// refused; runs started so before the check keep the old branch.
		if workflow.GetInfo(ctx).ContinuedExecutionRunID == "" &&
			workflow.GetVersion(ctx, changeResumeOnlyContinued, workflow.DefaultVersion, 1) >= 1 {
			return Result{}, temporal.NewNonRetryableApplicationError("invalid release: resume is the state a run hands over by continue-as-new, and this run was not continued as new; start a release without resume", ErrInvalid, nil)
		}
		if err := resume.check(&spec); err != nil {
			return Result{}, temporal.NewNonRetryableApplicationError("invalid release: resumed state: "+err.Error(), ErrInvalid, nil)
		}
	}
	r := &run{spec: spec, st: resume}
	// Asked at every start: a run under the worker's policy, or one begun before it (whose
	// history has no marker). A run continued from one begun before it has no policy in its
	// state, and keeps the old rules.
	withPolicy := workflow.GetVersion(ctx, changeWorkerPolicy, workflow.DefaultVersion, 1) >= 1 &&
		(resume == nil || resume.Policy != nil)
	if r.st == nil {
		r.st = &State{Status: Status{Name: spec.Name, Phase: PhaseResolving}}
		for _, w := range spec.Waves {
			r.st.Status.Waves = append(r.st.Status.Waves, WaveStatus{Name: w.Name, State: WavePending, ApprovalsNeeded: w.approvers()})
		}
		if err := workflow.UpsertTypedSearchAttributes(ctx, saRelease.ValueSet(spec.Name)); err != nil {
			return Result{}, fmt.Errorf("upsert search attribute %s: %w", contract.SearchAttrRelease, err)
		}
		if withPolicy {
			if err := r.readPolicy(ctx); err != nil {
				return Result{}, err
			}
		}
	} else if withPolicy {
		if err := r.checkCarried(); err != nil {
			return Result{}, temporal.NewNonRetryableApplicationError("invalid release: resumed state: "+err.Error(), ErrInvalid, nil)
		}
	}
	r.policy = r.st.Policy
	if r.policy != nil {
		r.checkNames = true
	} else {
		// The approve validator, where a name is refused, may not call GetVersion (it runs
		// read-only), so the change is asked here, before the handlers are registered and
		// any approval is judged, and only for a release with a wave that needs approval.
		for _, w := range spec.Waves {
			if w.approvers() > 0 {
				r.checkNames = workflow.GetVersion(ctx, changeApproverNames, workflow.DefaultVersion, 1) >= 1
				break
			}
		}
	}
	if err := r.register(ctx); err != nil {
		return Result{}, err
	}
	drainLinks(ctx)
	r.upsertMemo(ctx)

	if !r.st.Resolved {
		if err := r.resolve(ctx); err != nil {
			r.failWith(err.Error())
			return r.finish(ctx)
		}
		if workflow.GetVersion(ctx, changePreflight, workflow.DefaultVersion, 1) >= 1 {
			if err := r.preflight(ctx); err != nil {
				r.failWith(err.Error())
				return r.finish(ctx)
			}
		}
		r.st.Resolved = true
	}
	for r.st.Current < len(spec.Waves) {
		if !r.gate(ctx) {
			return r.finish(ctx)
		}
		if !r.runWave(ctx) {
			return r.finish(ctx)
		}
		r.st.Current++
		if info := workflow.GetInfo(ctx); r.st.Current < len(spec.Waves) && (info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > continueAfterEvents) {
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return Result{}, err
			}
			r.st.Runs++
			r.st.compact()
			next := spec
			next.Resume = r.st
			return Result{}, workflow.NewContinueAsNewError(ctx, WorkflowType, next)
		}
	}
	r.setPhase(ctx, PhaseSucceeded, "", fmt.Sprintf("all %d waves done", len(spec.Waves)))
	return Result{Phase: PhaseSucceeded}, nil
}

// resolve reads each target group's Deployments, in wave order, and fails on a duplicate.
func (r *run) resolve(ctx workflow.Context) error {
	st := &r.st.Status
	seen := map[string]bool{}
	for _, w := range r.spec.Waves {
		for _, gname := range w.Targets {
			g := r.spec.group(gname)
			var res activities.ReadTargetsResult
			what := "names " + strings.Join(g.Names, ", ")
			if g.Selector != "" {
				what = "selector " + g.Selector
			}
			sctx := summarized(r.clusterOptions(ctx, g.Cluster), fmt.Sprintf("read target group %s%s: namespace %s, %s", gname, clusterSuffix(g.Cluster), g.Namespace, what))
			err := workflow.ExecuteActivity(sctx, a.ReadTargets, activities.ReadTargetsInput{
				Namespace: g.Namespace, Names: g.Names, Selector: g.Selector,
			}).Get(ctx, &res)
			if err != nil {
				return fmt.Errorf("read target group %s%s: %s", gname, clusterSuffix(g.Cluster), errMessage(err))
			}
			if len(res.Missing) > 0 {
				return fmt.Errorf("read target group %s%s: no deployment %s in namespace %s", gname, clusterSuffix(g.Cluster), strings.Join(res.Missing, ", "), g.Namespace)
			}
			if len(res.Targets) == 0 {
				return fmt.Errorf("target group %s%s: selector %q matches no Deployment in namespace %s", gname, clusterSuffix(g.Cluster), g.Selector, g.Namespace)
			}
			sort.Slice(res.Targets, func(i, j int) bool { return res.Targets[i].Name < res.Targets[j].Name })
			for _, t := range res.Targets {
				key := g.Cluster + "/" + g.Namespace + "/" + t.Name
				if seen[key] {
					return fmt.Errorf("target group %s: deployment %s is also in an earlier group; a Deployment is in one wave", gname, targetString(g.Cluster, g.Namespace, t.Name))
				}
				seen[key] = true
				st.Targets = append(st.Targets, TargetStatus{Cluster: g.Cluster, Namespace: g.Namespace, Name: t.Name, Wave: w.Name, State: TargetPending})
				r.st.Points = append(r.st.Points, restorePoint{UID: t.UID, ReadHash: t.TemplateHash})
			}
		}
	}
	if len(st.Targets) > MaxTargets {
		return fmt.Errorf("the targets are %d Deployments; at most %d", len(st.Targets), MaxTargets)
	}
	return nil
}

// changePreflight: after reading the targets, before any change, the release checks its change
// against every target (PreflightChange). docs/versioning.md.
const changePreflight = "release-preflight"

// preflightBatch is how many Deployments one PreflightChange checks (a Get and a dry-run
// Update each, well within its one-minute start-to-close on a client budget of 5 QPS).
const preflightBatch = 50

// preflight checks the change against every target, every cluster at once, before any
// change: a container the change names that a Deployment lacks, a patch that does not apply,
// a changed template the apiserver rejects (a server-side dry run). It names every problem
// (the first 20, and how many more).
func (r *run) preflight(ctx workflow.Context) error {
	type batch struct {
		cluster string
		fut     workflow.Future
	}
	var batches []batch
	targets := r.st.Status.Targets
	for i := 0; i < len(targets); {
		j := i
		var names []string
		for j < len(targets) && len(names) < preflightBatch && targets[j].Cluster == targets[i].Cluster && targets[j].Namespace == targets[i].Namespace {
			names = append(names, targets[j].Name)
			j++
		}
		sctx := summarized(r.clusterOptions(ctx, targets[i].Cluster), fmt.Sprintf("pre-flight %s against %d Deployments in %s%s", r.changeString(), len(names), targets[i].Namespace, clusterSuffix(targets[i].Cluster)))
		fut := workflow.ExecuteActivity(sctx, a.PreflightChange, activities.PreflightInput{
			Namespace: targets[i].Namespace, Names: names, Images: r.spec.Change.Images, Patch: r.spec.Change.Patch,
		})
		batches = append(batches, batch{targets[i].Cluster, fut})
		i = j
	}
	var problems []string
	for _, b := range batches {
		var res activities.PreflightResult
		if err := b.fut.Get(ctx, &res); err != nil {
			return fmt.Errorf("pre-flight%s: %s", clusterSuffix(b.cluster), errMessage(err))
		}
		for _, p := range res.Problems {
			if b.cluster != "" {
				p = b.cluster + ":" + p
			}
			problems = append(problems, p)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	more := ""
	if len(problems) > 20 {
		more = fmt.Sprintf("; and %d more", len(problems)-20)
		problems = problems[:20]
	}
	return fmt.Errorf("pre-flight: the change does not apply to %s%s", strings.Join(problems, "; "), more)
}

func clusterSuffix(cluster string) string {
	if cluster == "" {
		return ""
	}
	return " in cluster " + cluster
}

// failed: the release failed (or was aborted).
func (r *run) failed() bool { return r.st.Status.FailureReason != "" }

// failWith records the first failure and stops the wave under way.
func (r *run) failWith(reason string) {
	if r.failed() {
		return
	}
	r.st.Status.FailureReason = reason
	if r.cancelWave != nil {
		r.cancelWave()
	}
}

// gate waits, before the current wave, for its approvals, for the end of any freeze, and for
// a pause to end; false when the release failed meanwhile.
func (r *run) gate(ctx workflow.Context) bool {
	wi := r.st.Current
	ws := &r.st.Status.Waves[wi]
	for !r.failed() {
		if len(ws.Approvals) < ws.ApprovalsNeeded {
			ws.State = WaveWaiting
			r.setPhase(ctx, PhaseWaiting, WaitingForApproval, fmt.Sprintf("wave %d (%s) waits for approval: %d of %d", wi+1, ws.Name, len(ws.Approvals), ws.ApprovalsNeeded))
			n := len(ws.Approvals)
			_ = workflow.Await(ctx, func() bool { return len(ws.Approvals) != n || r.failed() })
			continue
		}
		if until, reason, frozen := r.frozen(ctx); frozen {
			ws.State = WaveWaiting
			r.st.Status.FrozenUntil, r.st.Status.FreezeReason = &until, reason
			r.setPhase(ctx, PhaseWaiting, WaitingForFreeze, fmt.Sprintf("wave %d (%s) waits for the freeze window to end at %s: %s", wi+1, ws.Name, until.UTC().Format(time.RFC3339), reason))
			awaitSummarized(ctx, until.Sub(workflow.Now(ctx)), fmt.Sprintf("freeze window before wave %d (%s) until %s", wi+1, ws.Name, until.UTC().Format(time.RFC3339)), r.failed)
			r.st.Status.FrozenUntil, r.st.Status.FreezeReason = nil, ""
			continue
		}
		if held, err := r.awaitFleetThaw(ctx, fmt.Sprintf("wave %d (%s)", wi+1, ws.Name)); err != nil {
			r.holdUnreadableFreeze(ctx, fmt.Sprintf("wave %d (%s)", wi+1, ws.Name), err)
			continue
		} else if held {
			continue
		}
		if r.st.Status.Paused {
			ws.State = WaveWaiting
			r.setPhase(ctx, PhaseWaiting, WaitingForResume, fmt.Sprintf("wave %d (%s) waits for resume (paused: %s)", wi+1, ws.Name, r.st.Status.PauseReason))
			_ = workflow.Await(ctx, func() bool { return !r.st.Status.Paused || r.failed() })
			continue
		}
		return true
	}
	return false
}

// changeFreezeWallClock: a freeze window ends at the wall-clock time its start plus its
// duration names, and a start the clocks skip begins when they jump (calendar.go); before it,
// the duration was elapsed time and a skipped start had no window. docs/versioning.md.
const changeFreezeWallClock = "freeze-wall-clock"

// changeFreezeSkippedStartLength: a freeze window whose start the clocks skip keeps its whole
// duration from the instant they jump (calendar.go, activeAt); before it, it ended at its own
// start's wall-clock time plus the duration, so 30 minutes from a skipped 02:30 froze nothing.
// docs/versioning.md.
const changeFreezeSkippedStartLength = "freeze-skipped-start-length"

// wallClockWindows: the release's freeze windows use wall-clock arithmetic, unless its run
// began before the change freeze-wall-clock. Asked only for a release with windows, so the
// others' histories carry no marker.
func (r *run) wallClockWindows(ctx workflow.Context) bool {
	if len(r.spec.Freeze) == 0 {
		return true
	}
	return workflow.GetVersion(ctx, changeFreezeWallClock, workflow.DefaultVersion, 1) >= 1
}

// frozen is whether the release's windows freeze now, and until when and why, under the rules
// its run began with. The change freeze-skipped-start-length is asked at its branch point
// only: when the newest rules answer otherwise than freeze-wall-clock's (a window whose start
// the clocks skipped covers now under one and not the other, or ends elsewhere), so a run
// that never meets such a window records no marker.
func (r *run) frozen(ctx workflow.Context) (time.Time, string, bool) {
	now := workflow.Now(ctx)
	if !r.wallClockWindows(ctx) {
		return frozenAt(r.spec.Freeze, now, rulesAbsolute)
	}
	until, reason, frozen := frozenAt(r.spec.Freeze, now, rulesSkippedKeepsLength)
	oldUntil, oldReason, oldFrozen := frozenAt(r.spec.Freeze, now, rulesWallClock)
	if (frozen != oldFrozen || !until.Equal(oldUntil) || reason != oldReason) &&
		workflow.GetVersion(ctx, changeFreezeSkippedStartLength, workflow.DefaultVersion, 1) < 1 {
		return oldUntil, oldReason, oldFrozen
	}
	return until, reason, frozen
}

// freezeUnreadableRetry is how long a release holds before it asks again for a fleet freeze
// it could not read.
const freezeUnreadableRetry = time.Minute

// holdUnreadableFreeze: the fleet freeze could not be read (FleetFreezeState failed for its
// whole retry budget, 10 minutes): what ("wave 2 (eu)") holds for freezeUnreadableRetry, the
// reason in the status, and the caller asks again. A freeze that cannot be read is not known
// to be over, and a freeze never fails a release. Runs begun before the change
// release-freeze-unreadable-holds fail, as they did; the change is asked only here.
func (r *run) holdUnreadableFreeze(ctx workflow.Context, what string, err error) {
	if workflow.GetVersion(ctx, changeFreezeUnreadableHolds, workflow.DefaultVersion, 1) < 1 {
		r.failWith("fleet freeze: " + errMessage(err))
		return
	}
	if ws := &r.st.Status.Waves[r.st.Current]; ws.State != WaveRolling {
		ws.State = WaveWaiting
	}
	reason := "the fleet freeze could not be read: " + errMessage(err)
	r.st.Status.FreezeReason = reason
	r.setPhase(ctx, PhaseWaiting, WaitingForFleetFreeze, fmt.Sprintf("%s holds: %s; asking again in %s", what, reason, freezeUnreadableRetry))
	awaitSummarized(ctx, freezeUnreadableRetry, fmt.Sprintf("%s: ask again for the fleet freeze in %s", what, freezeUnreadableRetry), r.failed)
	r.st.Status.FreezeReason = ""
}

// awaitFleetThaw checks the fleet freeze and, while it holds, waits for its end (AwaitThaw
// heartbeats; an abort cancels it), the status saying that what ("wave 2 (eu)") waits. true
// when it waited.
func (r *run) awaitFleetThaw(ctx workflow.Context, what string) (bool, error) {
	var fa *Activities
	var f FleetFreeze
	if err := workflow.ExecuteActivity(summarized(workflow.WithActivityOptions(ctx, freezeCheckOptions), "is the fleet frozen? before "+what), fa.FleetFreezeState).Get(ctx, &f); err != nil {
		return false, err
	}
	if !f.Frozen {
		return false, nil
	}
	wi := r.st.Current
	if ws := &r.st.Status.Waves[wi]; ws.State != WaveRolling {
		ws.State = WaveWaiting
	}
	until := f.Until
	r.st.Status.FrozenUntil, r.st.Status.FreezeReason = &until, f.Reason
	r.setPhase(ctx, PhaseWaiting, WaitingForFleetFreeze, fmt.Sprintf("%s waits for the fleet freeze to end (until %s): %s", what, until.UTC().Format(time.RFC3339), f.Reason))
	actx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	fut := workflow.ExecuteActivity(summarized(workflow.WithActivityOptions(actx, thawOptions), fmt.Sprintf("wait for the fleet freeze to end (until %s): %s", until.UTC().Format(time.RFC3339), what)), fa.AwaitThaw)
	_ = workflow.Await(ctx, func() bool { return fut.IsReady() || r.failed() })
	cancel()
	r.st.Status.FrozenUntil, r.st.Status.FreezeReason = nil, ""
	if !r.failed() {
		if err := fut.Get(ctx, nil); err != nil {
			return true, err
		}
	}
	return true, nil
}

// runWave changes the current wave's targets, measures its analysis and bakes; false when
// the release failed.
func (r *run) runWave(ctx workflow.Context) bool {
	wi := r.st.Current
	w := &r.spec.Waves[wi]
	ws := &r.st.Status.Waves[wi]
	ws.State = WaveRolling
	r.setPhase(ctx, PhaseRolling, WaitingForRollouts, fmt.Sprintf("wave %d (%s): rolling out", wi+1, ws.Name))

	wctx, cancel := workflow.WithCancel(ctx)
	r.cancelWave = cancel
	defer func() { cancel(); r.cancelWave = nil }()
	var items []int
	for i, t := range r.st.Status.Targets {
		if t.Wave == w.Name && t.State != TargetDone {
			items = append(items, i)
		}
	}
	hold := func() bool { return r.st.Status.Paused }
	var clear func() bool
	if workflow.GetVersion(ctx, changeFreezeEachChange, workflow.DefaultVersion, 1) >= 1 {
		clear = func() bool { return r.changeAllowed(ctx) }
	}
	r.each(ctx, wctx, w.maxConcurrent(), items, hold, r.failed, clear, r.rollTarget)
	if r.failed() {
		ws.State = WaveFailed
		return false
	}

	if w.Analysis != nil {
		ws.State = WaveAnalyzing
		r.setPhase(ctx, PhaseAnalyzing, WaitingForAnalysis, fmt.Sprintf("wave %d (%s): %s", wi+1, ws.Name, w.Analysis.String()))
		if !r.analyze(ctx, wi) {
			ws.State = WaveFailed
			return false
		}
	}
	if bake := time.Duration(w.Bake); bake > 0 {
		ws.State = WaveBaking
		until := workflow.Now(ctx).Add(bake)
		ws.BakeUntil = &until
		r.skipBake = false
		r.setPhase(ctx, PhaseBaking, WaitingForBake, fmt.Sprintf("wave %d (%s): baking until %s", wi+1, ws.Name, until.UTC().Format(time.RFC3339)))
		_, _ = workflow.AwaitWithOptions(ctx, workflow.AwaitOptions{Timeout: bake, TimerOptions: workflow.TimerOptions{Summary: fmt.Sprintf("bake wave %d (%s) %s", wi+1, ws.Name, bake)}},
			func() bool { return r.skipBake || r.failed() })
		if r.failed() {
			ws.State = WaveFailed
			return false
		}
		if r.skipBake {
			now := workflow.Now(ctx)
			ws.BakeUntil = &now
		}
	}
	ws.State = WaveDone
	r.upsertMemo(ctx)
	return true
}

// each runs fn on items, at most n at once, in order, starting none while hold() or halt();
// it returns once every started one ended and no more will start (all started, or halt()).
// Before each item but the first (which the caller's gate just let through), clear, when set,
// may wait (a freeze) and say false: then hold and halt are asked again. Goroutines run on
// gctx, which the caller may cancel.
func (r *run) each(ctx, gctx workflow.Context, n int, items []int, hold, halt, clear func() bool, fn func(workflow.Context, int)) {
	running, next := 0, 0
	for {
		for running < n && next < len(items) && !hold() && !halt() {
			if next > 0 && clear != nil && !clear() {
				continue
			}
			i := items[next]
			next++
			running++
			workflow.Go(gctx, func(c workflow.Context) {
				defer func() { running-- }()
				fn(c, i)
			})
		}
		if running == 0 && (next == len(items) || halt()) {
			return
		}
		cur, held, halted := running, hold(), halt()
		_ = workflow.Await(ctx, func() bool { return running < cur || hold() != held || halt() != halted })
	}
}

// changeAllowed is asked before each Deployment change of a wave after its first: while one of
// the release's freeze windows or the fleet freeze holds, it waits for its end (the status
// says so; an abort or failure ends the wait) and returns false, so the caller asks again
// (pause, failure, the freeze once more). A fleet freeze set during a wave so stops its next
// change within the FleetFreezeState round trip. Rollouts already under way go on (a stepped
// one holds itself at its next step: awaitRollout).
func (r *run) changeAllowed(ctx workflow.Context) bool {
	wi := r.st.Current
	ws := &r.st.Status.Waves[wi]
	started, total := 0, 0
	for _, t := range r.st.Status.Targets {
		if t.Wave == ws.Name {
			total++
			if t.State != TargetPending {
				started++
			}
		}
	}
	what := fmt.Sprintf("wave %d (%s), %d of %d Deployments started,", wi+1, ws.Name, started, total)
	if until, reason, frozen := r.frozen(ctx); frozen {
		r.st.Status.FrozenUntil, r.st.Status.FreezeReason = &until, reason
		r.setPhase(ctx, PhaseWaiting, WaitingForFreeze, fmt.Sprintf("%s waits for the freeze window to end at %s: %s", what, until.UTC().Format(time.RFC3339), reason))
		awaitSummarized(ctx, until.Sub(workflow.Now(ctx)), fmt.Sprintf("freeze window in wave %d (%s) until %s", wi+1, ws.Name, until.UTC().Format(time.RFC3339)), r.failed)
		r.st.Status.FrozenUntil, r.st.Status.FreezeReason = nil, ""
		r.rollingStatus(ctx)
		return false
	}
	held, err := r.awaitFleetThaw(ctx, what)
	if err != nil {
		r.holdUnreadableFreeze(ctx, what, err)
		r.rollingStatus(ctx)
		return false
	}
	if held {
		r.rollingStatus(ctx)
		return false
	}
	return true
}

// rollingStatus is the status of a wave rolling out: held by the fleet freeze while one of
// its rollouts is (awaitRollout), else rolling.
func (r *run) rollingStatus(ctx workflow.Context) {
	if r.failed() {
		return
	}
	wi := r.st.Current
	ws := &r.st.Status.Waves[wi]
	if r.held > 0 {
		r.setPhase(ctx, PhaseWaiting, WaitingForFleetFreeze, fmt.Sprintf("wave %d (%s): %d rollouts held by the fleet freeze, their rolloutTimeout stopped: %s", wi+1, ws.Name, r.held, r.heldMsg))
		return
	}
	r.setPhase(ctx, PhaseRolling, WaitingForRollouts, fmt.Sprintf("wave %d (%s): rolling out", wi+1, ws.Name))
}

// awaitRollout waits for target i's rollout. In runs with changeAwaitHeld, time the rollout is
// held by the fleet freeze (a stepped rollout at a step, k8s.HeldByFleetFreeze) does not count
// against rolloutTimeout: AwaitRolloutDone returns when the hold starts, the release shows it
// and waits for its end without a deadline (heartbeating), then waits on with what is left.
// 30m rolloutTimeout, held after 10m for 2h: the last wait has 20m.
func (r *run) awaitRollout(ctx workflow.Context, i int, in activities.AwaitDoneInput) (activities.AwaitDoneResult, error) {
	t := &r.st.Status.Targets[i]
	var done activities.AwaitDoneResult
	if workflow.GetVersion(ctx, changeAwaitHeld, workflow.DefaultVersion, 1) < 1 {
		err := workflow.ExecuteActivity(summarized(r.awaitOptions(ctx, t.Cluster), r.awaitSummary(i, in)), a.AwaitRolloutDone, in).Get(ctx, &done)
		return done, err
	}
	in.ReportHold = true
	defer func() {
		if in.Held {
			r.held--
		}
	}()
	left := r.spec.rolloutTimeout()
	for {
		opts := workflow.ActivityOptions{
			TaskQueue:           taskQueueFor(t.Cluster),
			StartToCloseTimeout: max(left, time.Second),
			HeartbeatTimeout:    30 * time.Second,
			RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 15 * time.Second},
		}
		opts.ScheduleToCloseTimeout = opts.StartToCloseTimeout + r.spec.clusterTimeout()
		if in.Held {
			opts.StartToCloseTimeout, opts.ScheduleToCloseTimeout = thawOptions.StartToCloseTimeout, 0
		}
		start := workflow.Now(ctx)
		done = activities.AwaitDoneResult{}
		opts.Summary = r.awaitSummary(i, in)
		err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, opts), a.AwaitRolloutDone, in).Get(ctx, &done)
		if !in.Held {
			left -= workflow.Now(ctx).Sub(start)
		}
		if err != nil || done.Complete || done.Failed || done.Held == in.Held {
			return done, err
		}
		in.Held = done.Held
		if in.Held {
			r.held++
			r.heldMsg = done.HoldMessage
			t.Reason = "held by the fleet freeze (rolloutTimeout stopped): " + done.HoldMessage
		} else {
			r.held--
			t.Reason = ""
		}
		r.rollingStatus(ctx)
	}
}

// awaitSummary names the rollout AwaitRolloutDone waits for, with the Deployment's workflow
// run when the release linked it ("wait for the rollout of shop/web (generation 6):
// deployment/shop/web run 0193…").
func (r *run) awaitSummary(i int, in activities.AwaitDoneInput) string {
	t := r.st.Status.Targets[i]
	s := fmt.Sprintf("wait for the rollout of %s (generation %d)", targetString(t.Cluster, t.Namespace, t.Name), in.Generation)
	if in.Held {
		s = "wait for the fleet freeze to release the rollout of " + targetString(t.Cluster, t.Namespace, t.Name)
	}
	if t.RunID != "" {
		s += ": " + t.Workflow + " run " + t.RunID
	}
	return s
}

// mayHaveLanded: an ApplyTemplateChange error after which the write may have happened: not one
// of the errors it returns before writing (or for a write the apiserver refused).
func mayHaveLanded(err error) bool {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		switch appErr.Type() {
		case activities.ErrInvalid, activities.ErrStale, activities.ErrNotFound:
			return false
		}
	}
	return true
}

// readBack decides on a change whose result was lost: ApplyTemplateChange with ReadBack reads
// the Deployment, and a change that landed (and that it did not have before the release read
// it) counts as a change, rolled back with the rest. When reading back fails too, whether it
// landed is unknown (restorePoint.Unknown).
func (r *run) readBack(ctx workflow.Context, i int, in activities.ApplyInput) {
	t := &r.st.Status.Targets[i]
	p := &r.st.Points[i]
	in.ReadBack = true
	var res activities.ApplyResult
	if err := workflow.ExecuteActivity(summarized(r.clusterOptions(ctx, t.Cluster), "read back "+targetString(t.Cluster, t.Namespace, t.Name)+": did the change land?"), a.ApplyTemplateChange, in).Get(ctx, &res); err != nil {
		p.Unknown = true
		t.Reason += "; read back: " + errMessage(err) + ": whether the change landed is unknown"
		return
	}
	switch {
	case !res.HasChange:
		t.Reason += "; read back: the change did not land"
	case p.ReadHash != "" && p.ReadHash == res.TemplateHash:
		t.Reason += "; read back: it had the change before the release"
	default:
		p.Changed, p.Before, p.Hash, p.BeforeHash = true, &res.Template, res.TemplateHash, res.BeforeHash
		t.RevisionBefore = res.Revision
		t.Reason += "; read back: the change landed, so it is rolled back with the rest"
	}
}

// rollTarget changes one Deployment and waits for its rollout.
func (r *run) rollTarget(ctx workflow.Context, i int) {
	t := &r.st.Status.Targets[i]
	p := &r.st.Points[i]
	t.State = TargetUpdating
	// The write's outcome must be known even if the release is aborted meanwhile: a changed
	// target is rolled back.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	var res activities.ApplyResult
	in := activities.ApplyInput{
		Namespace: t.Namespace, Name: t.Name, Images: r.spec.Change.Images, Patch: r.spec.Change.Patch,
		Annotations: map[string]string{
			AnnotationRelease:         r.spec.Name,
			k8s.ChangeCauseAnnotation: fmt.Sprintf("release %s, wave %s", r.spec.Name, t.Wave),
		},
		ExpectUID: p.UID,
	}
	err := workflow.ExecuteActivity(summarized(r.clusterOptions(dctx, t.Cluster), fmt.Sprintf("apply %s to %s (wave %s)", r.changeString(), targetString(t.Cluster, t.Namespace, t.Name), t.Wave)), a.ApplyTemplateChange, in).Get(dctx, &res)
	if err != nil {
		t.State, t.Reason = TargetFailed, "change: "+errMessage(err)
		if mayHaveLanded(err) && workflow.GetVersion(ctx, changeReadBackLostChange, workflow.DefaultVersion, 1) >= 1 {
			r.readBack(dctx, i, in)
		}
		r.failWith(fmt.Sprintf("wave %s: %s: %s", t.Wave, targetString(t.Cluster, t.Namespace, t.Name), t.Reason))
		return
	}
	if p.ReadHash != "" && p.ReadHash == res.TemplateHash {
		// It had the change before the release read it: nothing to roll out or roll back.
		t.State, t.Reason = TargetDone, "already had the change"
		r.upsertMemo(ctx)
		return
	}
	p.Changed, p.Before, p.Hash, p.BeforeHash = true, &res.Template, res.TemplateHash, res.BeforeHash
	t.RevisionBefore = res.Revision
	r.linkRollout(dctx, i)
	r.event(dctx, i, corev1.EventTypeNormal, "ReleaseChanged", fmt.Sprintf("Release %s (wave %s) changed the pod template: %s", r.spec.Name, t.Wave, r.changeString()))

	done, err := r.awaitRollout(ctx, i, activities.AwaitDoneInput{
		Namespace: t.Namespace, Name: t.Name, Generation: res.Generation, TemplateHash: res.TemplateHash,
	})
	switch {
	case ctx.Err() != nil:
		// The release failed elsewhere: this rollout is no longer waited for.
		t.Reason = "not waited for: the release failed"
		return
	case err != nil:
		t.State, t.Reason = TargetFailed, "rollout: "+errMessage(err)
	case done.Failed || !done.Complete:
		t.State, t.Reason = TargetFailed, "rollout failed: "+done.Reason
	default:
		t.State, t.Reason = TargetDone, ""
		r.upsertMemo(ctx)
		return
	}
	r.event(dctx, i, corev1.EventTypeWarning, "ReleaseFailed", fmt.Sprintf("Release %s (wave %s) failed here: %s", r.spec.Name, t.Wave, t.Reason))
	r.failWith(fmt.Sprintf("wave %s: %s: %s", t.Wave, targetString(t.Cluster, t.Namespace, t.Name), t.Reason))
}

func (r *run) changeString() string {
	if len(r.spec.Change.Images) == 0 {
		return "patch " + string(r.spec.Change.Patch)
	}
	var parts []string
	for _, c := range sortedKeys(r.spec.Change.Images) {
		parts = append(parts, c+"="+r.spec.Change.Images[c])
	}
	return "images " + strings.Join(parts, ", ")
}

// analyze measures the wave's analysis on the cluster of its first target. true when it
// passed; a failed analysis fails the release; an inconclusive one pauses it (resume goes on,
// abort fails it).
func (r *run) analyze(ctx workflow.Context, wi int) bool {
	spec, _ := k8s.CheckAnalysis(*r.spec.Waves[wi].Analysis)
	ws := &r.st.Status.Waves[wi]
	var first *TargetStatus
	for i := range r.st.Status.Targets {
		if r.st.Status.Targets[i].Wave == ws.Name {
			first = &r.st.Status.Targets[i]
			break
		}
	}
	mctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              taskQueueFor(first.Cluster),
		StartToCloseTimeout:    45 * time.Second,
		ScheduleToCloseTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 15 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrNoPrometheus},
		},
	})
	taken, failures := 0, 0
	verdict, msg := "", ""
	for taken < spec.Count && verdict == "" {
		if taken > 0 {
			if awaitSummarized(ctx, time.Duration(spec.Interval), fmt.Sprintf("wave %d (%s) analysis: next measurement in %s", wi+1, ws.Name, time.Duration(spec.Interval)), r.failed); r.failed() {
				return false
			}
		}
		var m activities.Measurement
		err := workflow.ExecuteActivity(summarized(mctx, fmt.Sprintf("wave %d (%s) analysis: measurement %d of %d on %s", wi+1, ws.Name, taken+1, spec.Count, targetString(first.Cluster, first.Namespace, first.Name))), a.MeasureAnalysis, activities.MeasureInput{
			Deployment: activities.DeploymentRef{Namespace: first.Namespace, Name: first.Name},
			Step:       wi + 1, Measurement: taken + 1, Query: spec.Query, Min: spec.Min, Max: spec.Max, Web: spec.Web,
		}).Get(ctx, &m)
		if r.failed() {
			return false
		}
		if err != nil {
			verdict, msg = "Inconclusive", fmt.Sprintf("measurement %d could not be taken: %s", taken+1, errMessage(err))
			break
		}
		taken++
		switch m.Verdict {
		case activities.VerdictFailed:
			failures++
		case activities.VerdictNoData:
			if spec.OnNoData != k8s.OnNoDataFail {
				verdict, msg = "Inconclusive", m.Message+" (onNoData: pause)"
				continue
			}
			failures++
		}
		if failures > spec.FailureLimit {
			verdict, msg = "Failed", fmt.Sprintf("%d of %d measurements failed (failureLimit %d); last: %s", failures, taken, spec.FailureLimit, m.Message)
		}
	}
	if verdict == "" {
		verdict, msg = "Successful", fmt.Sprintf("%d measurements, %d failed (failureLimit %d)", taken, failures, spec.FailureLimit)
	}
	ws.Analysis = verdict + ": " + msg
	switch verdict {
	case "Successful":
		return true
	case "Failed":
		r.failWith(fmt.Sprintf("wave %s: analysis failed: %s", ws.Name, msg))
		return false
	}
	r.st.Status.Paused, r.st.Status.PauseReason = true, "analysis inconclusive: "+msg
	r.setPhase(ctx, PhaseWaiting, WaitingForResume, fmt.Sprintf("wave %d (%s): analysis inconclusive, paused until resumed or aborted: %s", wi+1, ws.Name, msg))
	_ = workflow.Await(ctx, func() bool { return !r.st.Status.Paused || r.failed() })
	return !r.failed()
}

// finish ends a failed release: with onFailure halt it stops; otherwise it restores every
// target the release changed, the last wave first.
func (r *run) finish(ctx workflow.Context) (Result, error) {
	st := &r.st.Status
	reason := st.FailureReason
	if r.st.Current < len(st.Waves) && st.Waves[r.st.Current].State != WavePending {
		st.Waves[r.st.Current].State = WaveFailed
	}
	if r.spec.onFailure() == OnFailureHalt {
		r.setPhase(ctx, PhaseHalted, "", "halted (onFailure: halt): "+reason)
		for i, p := range r.st.Points {
			if p.Changed {
				r.event(ctx, i, corev1.EventTypeWarning, "ReleaseHalted", fmt.Sprintf("Release %s halted (onFailure: halt), this Deployment keeps its change: %s", r.spec.Name, reason))
			}
		}
		return Result{Phase: PhaseHalted, Reason: reason}, nil
	}
	changed, unknown := false, false
	for _, p := range r.st.Points {
		changed, unknown = changed || p.Changed, unknown || p.Unknown
	}
	if !changed && !unknown {
		r.setPhase(ctx, PhaseFailed, "", "failed before any change: "+reason)
		return Result{Phase: PhaseFailed, Reason: reason}, nil
	}
	keep := false
	if changed {
		keep = workflow.GetVersion(ctx, changeRollbackKeepsLaterChanges, workflow.DefaultVersion, 1) >= 1
		r.setPhase(ctx, PhaseRollingBack, "", "rolling back: "+reason)
	}
	noHold := func() bool { return false }
	for wi := min(r.st.Current, len(r.spec.Waves)-1); wi >= 0; wi-- {
		var items []int
		for i := len(st.Targets) - 1; i >= 0; i-- {
			if st.Targets[i].Wave == r.spec.Waves[wi].Name && r.st.Points[i].Changed {
				items = append(items, i)
			}
		}
		if len(items) == 0 {
			continue
		}
		r.setPhase(ctx, PhaseRollingBack, "", fmt.Sprintf("rolling back wave %d (%s): %s", wi+1, st.Waves[wi].Name, reason))
		r.each(ctx, ctx, r.spec.Waves[wi].maxConcurrent(), items, noHold, noHold, nil, func(c workflow.Context, i int) { r.rollBack(c, i, reason, keep) })
		st.Waves[wi].State = WaveRolledBack
	}
	var failed, skipped, unsure []string
	for i, t := range st.Targets {
		name := targetString(t.Cluster, t.Namespace, t.Name)
		switch {
		case t.State == TargetRollbackFailed:
			failed = append(failed, name)
		case t.State == TargetRollbackSkipped:
			skipped = append(skipped, name+" ("+t.Reason+")")
		case r.st.Points[i].Unknown:
			unsure = append(unsure, name)
		}
	}
	if len(failed)+len(skipped)+len(unsure) > 0 {
		msg := reason
		if len(failed) > 0 {
			msg += fmt.Sprintf("; the rollback of %s failed", strings.Join(failed, ", "))
		}
		if len(skipped) > 0 {
			msg += fmt.Sprintf("; not rolled back, changed since the release: %s", strings.Join(skipped, "; "))
		}
		if len(unsure) > 0 {
			msg += fmt.Sprintf("; %s may have the change (its result was lost and reading it back failed): check it", strings.Join(unsure, ", "))
		}
		r.setPhase(ctx, PhaseHalted, "", msg)
		return Result{Phase: PhaseHalted, Reason: msg}, nil
	}
	r.setPhase(ctx, PhaseRolledBack, "", "rolled back: "+reason)
	return Result{Phase: PhaseRolledBack, Reason: reason}, nil
}

// rollBack restores one target's template from before the release and waits for its rollout.
// With keep (changeRollbackKeepsLaterChanges), only while its template is still the one the
// release wrote (p.Hash): one changed since (a hotfix) is left as it is, RollbackSkipped.
func (r *run) rollBack(ctx workflow.Context, i int, reason string, keep bool) {
	t := &r.st.Status.Targets[i]
	p := &r.st.Points[i]
	t.State = TargetRollingBack
	in := activities.RestoreInput{
		Namespace: t.Namespace, Name: t.Name, ExpectUID: p.UID,
		Annotations: map[string]string{AnnotationRolledBack: r.spec.Name + ": " + reason},
	}
	if p.BeforeHash != "" {
		// The Deployment's workflow does not hold a rollout to this template in the fleet
		// freeze (k8s.ReleaseRestoredHashAnnotation).
		in.Annotations[k8s.ReleaseRestoredHashAnnotation] = p.BeforeHash
	}
	if p.Before != nil {
		in.Template = *p.Before
	} else {
		// Handed over without its template (compact): the old ReplicaSet has it.
		in.FromHash = p.BeforeHash
	}
	if keep {
		// The release's template is named by its hash, which the state keeps (compact drops
		// only Before): RestoreTemplate compares the live one with it, and describes a drift
		// from the release's ReplicaSet.
		in.ExpectTemplateHash = p.Hash
	}
	var res activities.RestoreResult
	err := workflow.ExecuteActivity(summarized(r.clusterOptions(ctx, t.Cluster), fmt.Sprintf("roll back %s to revision %d's template (%s)", targetString(t.Cluster, t.Namespace, t.Name), t.RevisionBefore, reason)), a.RestoreTemplate, in).Get(ctx, &res)
	if err != nil {
		t.State, t.Reason = TargetRollbackFailed, "restore: "+errMessage(err)
		return
	}
	if res.Skipped {
		t.State, t.Reason = TargetRollbackSkipped, "changed since the release wrote it: "+res.Drift
		r.event(ctx, i, corev1.EventTypeWarning, "ReleaseRollbackSkipped", fmt.Sprintf("Release %s did not roll this Deployment back (%s): its template changed since the release wrote it: %s", r.spec.Name, reason, res.Drift))
		return
	}
	var done activities.AwaitDoneResult
	if res.Generation > 0 {
		err = workflow.ExecuteActivity(summarized(r.awaitOptions(ctx, t.Cluster), "wait for the rollback's rollout of "+targetString(t.Cluster, t.Namespace, t.Name)), a.AwaitRolloutDone, activities.AwaitDoneInput{
			Namespace: t.Namespace, Name: t.Name, Generation: res.Generation, TemplateHash: res.TemplateHash,
		}).Get(ctx, &done)
		switch {
		case err != nil:
			t.State, t.Reason = TargetRollbackFailed, "rollback's rollout: "+errMessage(err)
			return
		case done.Failed || !done.Complete:
			t.State, t.Reason = TargetRollbackFailed, "rollback's rollout failed: "+done.Reason
			return
		}
	}
	t.State, t.Reason = TargetRolledBack, reason
	r.event(ctx, i, corev1.EventTypeWarning, "ReleaseRolledBack", fmt.Sprintf("Release %s rolled back to revision %d's template: %s", r.spec.Name, t.RevisionBefore, reason))
}

// event records a Kubernetes event on a target Deployment (best effort).
func (r *run) event(ctx workflow.Context, i int, typ, reason, msg string) {
	t := r.st.Status.Targets[i]
	ectx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              taskQueueFor(t.Cluster),
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: time.Minute,
		Summary:                fmt.Sprintf("record %s on %s", reason, targetString(t.Cluster, t.Namespace, t.Name)),
	})
	_ = workflow.ExecuteActivity(ectx, a.RecordEvent, activities.RecordEventInput{
		Deployment: activities.DeploymentRef{Namespace: t.Namespace, Name: t.Name, UID: r.st.Points[i].UID},
		Events:     []k8s.Event{{Type: typ, Reason: reason, Message: msg}},
	}).Get(ctx, nil)
}

// setPhase sets the phase, what it waits for and the message, and upserts the memo.
func (r *run) setPhase(ctx workflow.Context, phase, waitingFor, msg string) {
	st := &r.st.Status
	st.Phase, st.WaitingFor, st.Message = phase, waitingFor, msg
	st.Wave = min(r.st.Current+1, len(st.Waves))
	if phase == PhaseSucceeded {
		st.Wave = len(st.Waves)
	}
	r.upsertMemo(ctx)
	workflow.SetCurrentDetails(ctx, r.details())
	workflow.GetLogger(ctx).Info("Release", "release", r.spec.Name, "phase", phase, "waitingFor", waitingFor, "message", msg)
}

// upsertMemo shows the release in the Temporal UI: phase, wave, what it waits for, the
// targets' counts and the failure, when one of them changed.
func (r *run) upsertMemo(ctx workflow.Context) {
	st := &r.st.Status
	counts := map[string]int{}
	for _, t := range st.Targets {
		counts[t.State]++
	}
	var parts []string
	for _, s := range []string{TargetPending, TargetUpdating, TargetDone, TargetFailed, TargetRollingBack, TargetRolledBack, TargetRollbackFailed, TargetRollbackSkipped} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	memo := map[string]any{
		"phase":      st.Phase,
		"wave":       fmt.Sprintf("%d/%d", st.Wave, len(st.Waves)),
		"waitingFor": st.WaitingFor,
		"message":    st.Message,
		"targets":    strings.Join(parts, ", "),
		"failure":    st.FailureReason,
	}
	key := strings.Join([]string{st.Phase, memo["wave"].(string), st.WaitingFor, st.Message, memo["targets"].(string), st.FailureReason}, "\x00")
	if key == r.memo {
		return
	}
	r.memo = key
	if err := workflow.UpsertMemo(ctx, memo); err != nil {
		workflow.GetLogger(ctx).Warn("Upsert memo", "error", err)
	}
}

// view is the status query's answer: a copy.
func (r *run) view() Status {
	s := r.st.Status
	s.Waves = append([]WaveStatus(nil), s.Waves...)
	s.Targets = append([]TargetStatus(nil), s.Targets...)
	change := r.spec.Change
	if r.policy == nil {
		s.Change, s.ChangeDigest = &change, legacyChangeDigest(change)
		return s
	}
	s.Change, s.ChangeDigest = &change, ChangeDigest(change)
	spec, policy := r.spec, r.policy.Policy
	s.Spec, s.Policy, s.PolicyDigest, s.PolicySource = &spec, &policy, policy.Digest(), r.policy.Source
	if r.st.Resolved {
		for wi := range s.Waves {
			s.Waves[wi].Digest = r.waveDigest(wi)
		}
	}
	return s
}

func (r *run) over() error {
	switch p := r.st.Status.Phase; {
	case p == PhaseSucceeded || p == PhaseRolledBack || p == PhaseHalted || p == PhaseRollingBack || p == PhaseFailed:
		return fmt.Errorf("the release is %s", p)
	case r.failed():
		return fmt.Errorf("the release failed: %s", r.st.Status.FailureReason)
	}
	return nil
}

// register sets the status query and the updates.
func (r *run) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) { return r.view(), nil }); err != nil {
		return fmt.Errorf("register query %s: %w", QueryStatus, err)
	}
	type handler struct {
		name     string
		validate func(ctx workflow.Context, raw json.RawMessage) error
		apply    func(ctx workflow.Context, raw json.RawMessage)
	}
	for _, h := range []handler{
		{UpdateApprove, func(ctx workflow.Context, raw json.RawMessage) error {
			var req ApproveRequest
			if err := contract.ParseUpdate(raw, &req); err != nil {
				return err
			}
			_, err := r.canApprove(req, workflow.Now(ctx))
			return err
		}, func(ctx workflow.Context, raw json.RawMessage) {
			var req ApproveRequest
			_ = contract.ParseUpdate(raw, &req)
			// The validator accepted it in this workflow task: the same check gives the
			// same approval.
			ap, _ := r.canApprove(req, workflow.Now(ctx))
			ap.At = workflow.Now(ctx)
			ws := &r.st.Status.Waves[r.st.Current]
			ws.Approvals = append(ws.Approvals, ap)
			workflow.GetLogger(ctx).Info("Release wave approved", "release", r.spec.Name, "wave", ws.Name, "approver", ap.Approver, "principal", ap.Principal, "signed", ap.Signed)
		}},
		{UpdatePause, func(_ workflow.Context, raw json.RawMessage) error {
			var req ReasonRequest
			if err := contract.ParseUpdate(raw, &req); err != nil {
				return err
			}
			if err := r.over(); err != nil {
				return err
			}
			if r.st.Status.Paused {
				return fmt.Errorf("the release is already paused: %s", r.st.Status.PauseReason)
			}
			return nil
		}, func(ctx workflow.Context, raw json.RawMessage) {
			var req ReasonRequest
			_ = contract.ParseUpdate(raw, &req)
			if req.Reason == "" {
				req.Reason = "paused by an update"
			}
			r.st.Status.Paused, r.st.Status.PauseReason = true, req.Reason
		}},
		{UpdateResume, func(_ workflow.Context, raw json.RawMessage) error {
			var req struct{}
			if err := contract.ParseUpdate(raw, &req); err != nil {
				return err
			}
			if err := r.over(); err != nil {
				return err
			}
			if !r.st.Status.Paused {
				return fmt.Errorf("the release is not paused")
			}
			return nil
		}, func(workflow.Context, json.RawMessage) {
			r.st.Status.Paused, r.st.Status.PauseReason = false, ""
		}},
		{UpdateAbort, func(_ workflow.Context, raw json.RawMessage) error {
			var req ReasonRequest
			if err := contract.ParseUpdate(raw, &req); err != nil {
				return err
			}
			if strings.TrimSpace(req.Reason) == "" {
				return fmt.Errorf(`abort needs a reason: {"reason":"..."}`)
			}
			return r.over()
		}, func(ctx workflow.Context, raw json.RawMessage) {
			var req ReasonRequest
			_ = contract.ParseUpdate(raw, &req)
			r.failWith("aborted: " + strings.TrimSpace(req.Reason))
		}},
		{UpdateSkipBake, func(_ workflow.Context, raw json.RawMessage) error {
			var req struct{}
			if err := contract.ParseUpdate(raw, &req); err != nil {
				return err
			}
			if r.st.Status.Phase != PhaseBaking || r.failed() {
				return fmt.Errorf("no wave is baking (phase %s)", r.st.Status.Phase)
			}
			return nil
		}, func(workflow.Context, json.RawMessage) {
			r.skipBake = true
		}},
	} {
		validate, apply := h.validate, h.apply
		err := workflow.SetUpdateHandlerWithOptions(ctx, h.name,
			func(ctx workflow.Context, raw json.RawMessage) (Status, error) {
				apply(ctx, raw)
				r.upsertMemo(ctx)
				return r.view(), nil
			},
			workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, raw json.RawMessage) error { return validate(ctx, raw) }})
		if err != nil {
			return fmt.Errorf("register update %s: %w", h.name, err)
		}
	}
	return nil
}

// canApprove: an approver may approve the wave waiting for approval, once, under its
// normalized name (CheckApprover: "ａｌｉｃｅ" is alice, "аlice" with a Cyrillic а and
// "al\u200bice" are refused); not the release's author; only one approval.from admits; and, when the
// wave has signers, only with a signature of this approval by a key the list gives it. It
// returns the approval to record (without its time), or why not. Pure: it reads the request,
// the spec and the state.
// approvalWave is the wave an approve request is for: the current one, which must be waiting
// for approvals it does not have yet. Both checks (with and without the worker's policy) start
// here.
func (r *run) approvalWave(req ApproveRequest) (int, *WaveStatus, error) {
	if strings.TrimSpace(req.Approver) == "" {
		return 0, nil, fmt.Errorf(`approve needs the approver: {"approver":"<name>"}`)
	}
	wi := r.st.Current
	if wi >= len(r.st.Status.Waves) {
		return 0, nil, fmt.Errorf("every wave has started")
	}
	ws := &r.st.Status.Waves[wi]
	if req.Wave != "" && req.Wave != ws.Name && req.Wave != strconv.Itoa(wi+1) {
		return 0, nil, fmt.Errorf("wave %q is not the current wave (%d, %s)", req.Wave, wi+1, ws.Name)
	}
	switch {
	case ws.ApprovalsNeeded == 0:
		return 0, nil, fmt.Errorf("wave %d (%s) needs no approval", wi+1, ws.Name)
	case ws.State != WavePending && ws.State != WaveWaiting:
		return 0, nil, fmt.Errorf("wave %d (%s) has started", wi+1, ws.Name)
	case len(ws.Approvals) >= ws.ApprovalsNeeded:
		return 0, nil, fmt.Errorf("wave %d (%s) already has its %d approvals", wi+1, ws.Name, ws.ApprovalsNeeded)
	}
	return wi, ws, nil
}

func (r *run) canApprove(req ApproveRequest, now time.Time) (ApprovalAt, error) {
	if err := r.over(); err != nil {
		return ApprovalAt{}, err
	}
	if r.policy != nil {
		return r.canApproveWithPolicy(req, now)
	}
	approver := strings.TrimSpace(req.Approver)
	wi, ws, err := r.approvalWave(req)
	if err != nil {
		return ApprovalAt{}, err
	}
	normalize := legacyNormalizeApprover
	principal := normalize(approver)
	if r.checkNames {
		normalize = NormalizeApprover
		var err error
		if principal, err = CheckApprover(approver); err != nil {
			return ApprovalAt{}, err
		}
	}
	if principal == "" {
		return ApprovalAt{}, fmt.Errorf("approver %q is no name", approver)
	}
	ap := ApprovalAt{Approver: approver, Principal: principal}
	var gate Approval
	if w := &r.spec.Waves[wi]; w.Approval != nil {
		gate = *w.Approval
	}
	if gate.Signers != "" {
		signers, err := parseAllowedSigners(gate.Signers, normalize)
		if err != nil {
			return ApprovalAt{}, fmt.Errorf("wave %d (%s): approval.signers: %w", wi+1, ws.Name, err)
		}
		if strings.TrimSpace(req.Signature) == "" {
			return ApprovalAt{}, fmt.Errorf("wave %d (%s) takes signed approvals only (approval.signers): sign with `starter release approve --sign-key KEY`", wi+1, ws.Name)
		}
		msg := ApprovalMessage(r.spec.Name, ws.Name, legacyChangeDigest(r.spec.Change))
		if err := verifyApproval(req.Signature, msg, principal, signers); err != nil {
			return ApprovalAt{}, fmt.Errorf("%s's signed approval of wave %d (%s) rejected: %w", principal, wi+1, ws.Name, err)
		}
		ap.Signed = true
	}
	if r.spec.Author != "" && normalize(r.spec.Author) == principal {
		return ApprovalAt{}, fmt.Errorf("%s started the release (as %s): its author cannot approve it", principal, r.spec.Author)
	}
	if may := r.spec.mayApprove(gate.From, normalize); may != nil && !containsString(may, principal) {
		return ApprovalAt{}, fmt.Errorf("%s may not approve wave %d (%s): approval.from admits %s", principal, wi+1, ws.Name, strings.Join(may, ", "))
	}
	for _, a := range ws.Approvals {
		if normalize(a.Approver) == principal {
			return ApprovalAt{}, fmt.Errorf("%s already approved wave %d (%s) (as %s); it needs %d distinct approvers", principal, wi+1, ws.Name, a.Approver, ws.ApprovalsNeeded)
		}
	}
	return ap, nil
}

// errMessage is an activity error's cause, without the SDK's wrapping.
func errMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return "no answer in time (" + timeout.TimeoutType().String() + ")"
	}
	return err.Error()
}
