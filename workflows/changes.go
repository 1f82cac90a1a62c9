package workflows

import "github.com/temporal-rollout/rollout/k8s"

// The change IDs of the rollout workflow (workflow.GetVersion), all in one place. Each guards one
// change to the commands the workflow issues; a run recorded before it has no marker and replays
// on the old branch. docs/versioning.md tells each change's story and its proof in full; this
// file is the list the code and the test (changes_test.go) hold to: every GetVersion in
// workflows/ and every on(...) question of k8s.DecideTraffic names an ID of the table, and each
// entry names recorded histories (testdata/histories) that replay across its branch point.
//
// The four IDs of the traffic decision live in k8s (k8s.ChangeTraffic*), which cannot import
// this package; the workflow asks them through trafficChange, and the table lists them here.
// The release workflow's IDs are release/'s (docs/versioning.md, "The release workflow").
const (
	changeStaleRetryAdmitted      = "stale-retry-admitted"
	changeBusyWriteDeferred       = "busy-write-deferred"
	changePlainTriggerReadsLive   = "plain-trigger-reads-live"
	changeFinishBeforeNext        = "finish-before-next"
	changeBlueGreen               = "blue-green"
	changeBlueGreenScale          = "blue-green-scale"
	changeBlueGreenPromotedStable = "blue-green-promoted-stable"
	changeBlueGreenAbortDelay     = "blue-green-abort-delay"
	changeBlueGreenUnchanged      = "blue-green-unchanged"
	changeBlueGreenNotify         = "blue-green-notify"
	changeFleetFreezeHold         = "fleet-freeze-hold"
	changeStableOnCluster         = "stable-on-cluster"
	changeTrafficStepPods         = "traffic-step-waits-pods"
	changeTrafficErrorReturns     = "traffic-error-returns"
	changeTrafficRelease          = "traffic-release"
	changeTrafficStepWeight       = "traffic-step-weight"
	changeTrafficStableServes     = "traffic-stable-serves"
	changeTrafficUnchanged        = "traffic-unchanged"
	changeHeldAtRest              = "held-at-rest"
	changeOneUpsertPerTask        = "one-upsert-per-task"
	changeInlineCanaryMoves       = "inline-canary-moves"
	changeReleaseRollbackUnfrozen = "fleet-freeze-skips-release-rollback"
	changeSparseAwaitHeartbeats   = "sparse-await-heartbeats"
	changeInlineAnnotatedMoves    = "inline-annotated-moves"
	changeRestCheckedLocally      = "rest-checked-locally"
	changeBlueGreenPromotedLive   = "blue-green-promoted-live"
	changeInlineTrafficMoves      = "inline-traffic-moves"
)

// A change is one change ID of the table.
type change struct {
	ID string
	// Branch is where the workflow asks, and what the new branch does that the old did not.
	Branch string
	// Old are recorded histories without the marker that replay across the branch point: where
	// the corpus reaches it, their replay asks the ID and takes the old branch (version -1 in
	// testdata/golden/replay); where no recorded history reaches it, histories of the same
	// feature that replay through the code around it without asking.
	Old []string
	// New are recorded histories that hold the marker, if any.
	New []string
}

// changes is the table, in the order the changes came.
func changes() []change {
	return []change{
		{
			ID:     changeStaleRetryAdmitted,
			Branch: "failed: from the second stale decision in a row, the retry waits for the client budget in an AwaitChange activity (AwaitInput.Retry) instead of syncing again in the same workflow task",
			Old:    []string{"deployment-e2e-teststepskubectl-4041-web-36f1d594"},
			New:    []string{"deployment-e2e-testconflictingwriterretries-2654-web-cda60d1c"},
		},
		{
			ID:     changeBlueGreen,
			Branch: "blueGreenOn: a Deployment with the blue-green annotation rolls out blue-green; before, the annotation was ignored",
			Old:    []string{"deployment-e2e-testbluegreenbaseline-2252-web-c1ab4c12", "deployment-e2e-testbluegreenbaseline-2252-web-d5df7c59"},
			New:    []string{"deployment-e2e-testbluegreen-promote-and-scale-down-delay-2442-web-abd00001"},
		},
		{
			ID:     k8s.ChangeTrafficHandover,
			Branch: "k8s.DecideTraffic: the canary takes all traffic before the stable's last pods go",
			Old:    []string{"deployment-e2e-testtrafficdataplane-7596-web-626876d4"},
			New:    []string{"deployment-e2e-testtrafficdataplane-4637-web-876e68cf"},
		},
		{
			ID:     k8s.ChangeTrafficStablePodsUp,
			Branch: "k8s.DecideTraffic: the canary's weight is its share of the pods up, the stable's going pods included",
			Old:    []string{"deployment-e2e-testtrafficdataplane-7596-web-626876d4", "deployment-e2e-testtrafficdataplane-8202-web-45ff34ce"},
			New:    []string{"deployment-e2e-testtrafficdataplane-4637-web-876e68cf"},
		},
		{
			ID:     changeFleetFreezeHold,
			Branch: "freezeHold, promoteFrozen: at a step's end, a blue-green automatic promotion and before a promote, the FleetFreeze local activity, and a hold on a timer while frozen",
			Old:    []string{"deployment-e2e-teststepsweights-4329-web-8d9406cd", "deployment-e2e-testbluegreen-analyses-0479-web-33226bfe"},
			New:    []string{"deployment-e2e-teststepsheldbyfleetfreeze-3040-web-b9351a3f", "deployment-e2e-testbluegreenheldbyfleetfreeze-2839-web-11a0b502"},
		},
		{
			ID:     changeBusyWriteDeferred,
			Branch: "failed: a write refused on a saturated client budget (Busy) ends the workflow task and the sync waits in AwaitChange (Retry), instead of backing off as a failed sync",
			Old:    []string{"deployment-e2e-testconflictingwriterretries-2654-web-e0b9e279"},
			New:    []string{"deployment-e2e-testtrafficsoak-2804-web-4a2c9fc1"},
		},
		{
			ID:     changePlainTriggerReadsLive,
			Branch: "addSignals: a trigger naming no version makes the next sync read the Deployment live (an Observe) instead of deciding on the snapshot a wait returned",
			Old:    []string{"deployment-b-e2e-testtwoclusters-8539-web-969ac68a"},
			New:    []string{"deployment-e2e-testadoptorphanreleaseandcascade-5349-web-2ae59bcd"},
		},
		{
			ID:     changeFinishBeforeNext,
			Branch: "nextChangeOnly: a rollout that converges while the next change is already signalled ends its run (recorded, notified, continued as new with the change carried)",
			Old:    []string{"deployment-e2e-testrollingupdate-quarter-7415-web-165a1ba5", "deployment-e2e-testpause-temporal-3004-web-20d58c38"},
		},
		{
			ID:     changeBlueGreenScale,
			Branch: "blueGreenRequest: a change of replicas mid-rollout scales the stable ReplicaSet to replicas and the new one to its blue-green size; an earlier preview goes to 0 once the new one serves",
			Old:    []string{"deployment-e2e-testbluegreen-promote-and-scale-down-delay-5909-web-7a3bcf18", "deployment-e2e-testbluegreen-abort-before-promotion-2041-web-30da17d0"},
			New:    []string{"deployment-e2e-testbluegreen-replicas-changed-mid-rollout-1832-web-aad6e233"},
		},
		{
			ID:     changeBlueGreenNotify,
			Branch: "notifyEvent: a blue-green rollout with the notify annotation sends its phases (stepReached, paused)",
			Old:    []string{"deployment-e2e-testbluegreen-promote-and-scale-down-delay-5909-web-7a3bcf18"},
			New:    []string{"deployment-e2e-testbluegreen-promote-and-scale-down-delay-2442-web-abd00001"},
		},
		{
			ID:     changeBlueGreenAbortDelay,
			Branch: "startAbort: a blue-green abort keeps the aborted ReplicaSet's pods for abortScaleDownDelaySeconds on a durable timer",
			Old:    []string{"deployment-e2e-testbluegreen-abort-before-promotion-2041-web-30da17d0"},
			New:    []string{"deployment-e2e-testbluegreen-abort-before-promotion-5346-web-f605cf5f"},
		},
		{
			ID:     k8s.ChangeTrafficAbort,
			Branch: "k8s.DecideTraffic: an abort keeps the canary Service on the aborted pods and moves the weight back in step with the stable pods",
			Old:    []string{"deployment-e2e-testtrafficrouting-8229-web-fc18955e"},
			New:    []string{"deployment-e2e-testtrafficrouting-7267-web-c40dff87"},
		},
		{
			ID:     k8s.ChangeTrafficFollowsPods,
			Branch: "k8s.DecideTraffic: a side with no available pod gets no weight (FollowPods)",
			Old:    []string{"deployment-e2e-testtrafficdataplane-7596-web-39fbe494"},
			New:    []string{"deployment-e2e-testtrafficdataplane-4637-web-7ddf8348"},
		},
		{
			ID:     changeTrafficStepWeight,
			Branch: "stepReached: a setWeight step with traffic routing passes once the route carries its weight",
			Old:    []string{"deployment-e2e-testtrafficrouting-8229-web-fc18955e"},
		},
		{
			ID:     changeTrafficStepPods,
			Branch: "enterTraffic, syncRoute: setCanaryScale and setHeaderRoute steps wait for the canary's pods; a header route goes only to a canary with available pods",
			Old:    []string{"deployment-e2e-testtrafficrouting-8229-web-fc18955e"},
			New:    []string{"deployment-e2e-testtrafficrouting-7267-web-c40dff87"},
		},
		{
			ID:     changeTrafficRelease,
			Branch: "syncRoute: a Deployment whose traffic annotation is gone gets its Services' selectors back (the ReleaseTraffic local activity)",
			Old:    []string{"deployment-e2e-testtrafficrouting-8229-web-fc18955e", "deployment-e2e-testtrafficrouting-7267-web-c40dff87"},
		},
		{
			ID:     changeBlueGreenPromotedStable,
			Branch: "blueGreenRequest: a new template after the active Service switched to the promoted one starts from the promoted template",
			Old:    []string{"deployment-e2e-testbluegreen-a-new-template-before-promotion-3968-web-e1603f70", "deployment-e2e-testbluegreen-promote-and-scale-down-delay-2442-web-abd00001"},
		},
		{
			ID:     changeTrafficUnchanged,
			Branch: "syncRoute: a sync whose route and Services are already as wanted runs no SyncTraffic",
			Old:    []string{"deployment-e2e-testtrafficdataplane-7596-web-39fbe494"},
			New:    []string{"deployment-e2e-testtrafficdataplane-4637-web-7ddf8348"},
		},
		{
			ID:     changeBlueGreenUnchanged,
			Branch: "syncServices: a sync whose Services already select what it would switch them to runs no SyncBlueGreen",
			Old:    []string{"deployment-e2e-testbluegreen-abort-before-promotion-2041-web-30da17d0"},
		},
		{
			ID:     changeTrafficStableServes,
			Branch: "syncRoute: the stable Service never moves to a template with no available pod while the pods it selects serve",
			Old:    []string{"deployment-e2e-testtrafficdataplane-7596-web-626876d4"},
		},
		{
			ID:     changeStableOnCluster,
			Branch: "canaryRequest: a stable template read from the Deployment's annotation or off the ReplicaSets, newer than the run's, is taken",
			Old:    []string{"deployment-e2e-teststepsweights-4329-web-8d9406cd", "deployment-e2e-testtrafficrouting-8229-web-fc18955e"},
		},
		{
			ID:     changeTrafficErrorReturns,
			Branch: "syncRoute: during an abort or a rollback a traffic error releases both Services (ReleaseTraffic) and the plan goes on",
			Old:    []string{"deployment-e2e-testtrafficrouting-8229-web-fc18955e"},
		},
		{
			ID:     changeHeldAtRest,
			Branch: "startAwait: a held rollout's wait may end Rest (AwaitInput.Rest) once the cluster shows it held with its pods settled, and the workflow then waits with no activity until a signal, an update or its timers",
			Old:    []string{"deployment-e2e-teststepsweights-4329-web-8d9406cd"},
			New:    []string{"deployment-e2e-testheldatrest-3408-web-eab4a9ab"},
		},
		{
			ID:     changeOneUpsertPerTask,
			Branch: "upsertStepState: the step state's memo and RolloutWaitingFor are marked and written once, before the workflow task ends (flushStepState), not at every step event",
			Old:    []string{"deployment-e2e-teststepsweights-4329-web-8d9406cd"},
			New:    []string{"deployment-e2e-testheldatrest-3453-web-e4c63c6c"},
		},
		{
			ID:     changeInlineCanaryMoves,
			Branch: "startAwait: a stepped rollout with no traffic routing and not blue-green lets its wait make the scale moves within a step (AwaitInput.InlineCanary)",
			Old:    []string{"deployment-e2e-teststepsweights-4329-web-8d9406cd"},
			New:    []string{"deployment-e2e-teststepsweights-3044-web-259ef786"},
		},
		{
			ID:     changeReleaseRollbackUnfrozen,
			Branch: "freezeHold: a rollout to the template a release's rollback restored is not held by the fleet freeze; asked only when frozen and the rollout is such a rollback",
			Old:    []string{"deployment-e2e-teststepsheldbyfleetfreeze-3040-web-b9351a3f"},
		},
		{
			ID:     changeSparseAwaitHeartbeats,
			Branch: "startAwait, startRetryAwait: the AwaitChange activity is scheduled with a 5-minute heartbeat timeout instead of 20 s, and the wait beats every 3¾ minutes instead of every 16 s; takeOver (addSignals): a trigger naming no version while that activity waits gives it up and syncs (a starting worker's, watcher.TakeOver), where before it was ignored",
			Old:    []string{"deployment-e2e-teststepsweights-3044-web-259ef786"},
			New:    []string{"deployment-e2e-testworkercrash-4534-web-400e7db6"},
		},
		{
			ID:     changeInlineAnnotatedMoves,
			Branch: "startAwait: a rollout with no canary request on a Deployment with steps annotations (its steps passed, going to 100%; or back to the stable template) lets its wait make the scale moves, as a plain rollout's does (AwaitInput.InlineAnnotated)",
			Old:    []string{"deployment-e2e-teststepsweights-3044-web-259ef786"},
			New:    []string{"deployment-e2e-teststepsweights-6079-web-f9cf183c"},
		},
		{
			ID:     changeRestCheckedLocally,
			Branch: "restChecked (startAwait): a held rollout looks whether it is at rest with AwaitChange as a local activity (AwaitInput.RestCheck) before it starts the AwaitChange activity, and waits with no activity when it is",
			Old:    []string{"deployment-e2e-teststepsweights-3044-web-259ef786"},
			New:    []string{"deployment-e2e-teststepsweights-6079-web-f9cf183c", "deployment-e2e-testheldatrest-0043-web-2537955c"},
		},
		{
			ID:     changeBlueGreenPromotedLive,
			Branch: "activeServes (blueGreenRequest): a new template after a promotion whose switch the run's memory does not hold reads the active Service live (a SyncBlueGreen that switches nothing), and starts from the promoted template when it serves production",
			Old:    []string{"deployment-e2e-testbluegreen-a-new-template-before-promotion-3968-web-e1603f70", "deployment-e2e-testbluegreen-promote-and-scale-down-delay-2442-web-abd00001"},
		},
		{
			ID:     changeInlineTrafficMoves,
			Branch: "startAwait: a routed rollout under way (not held, not blue-green, no rollback pending) lets its wait move the route through the gate (SyncTraffic) and make the scale moves within its step or back to the stable template (AwaitInput.InlineTraffic); applyInlineTraffic (sync) records the route the wait left",
			Old:    []string{"deployment-e2e-testtrafficrouting-7267-web-c40dff87"},
			New:    []string{"deployment-e2e-testtrafficrouting-4349-web-966d4a04", "deployment-e2e-testtrafficstablepodsup-3024-web-6446dd39", "deployment-e2e-testtrafficabortfencesthewait-2095-web-afa5f7d6"},
		},
	}
}
