// Package k8s is the pure rollout engine: functions with no I/O and no context, which take
// Deployment and ReplicaSet values and return decisions. The workflow, AwaitChange and the
// watcher all decide with it; clients and the informer cache live in package kube, and the
// writes are carried out by package activities.
//
// k8s.Decide (decide.go) is one sync of the upstream Deployment controller
// (k8s.io/kubernetes/pkg/controller/deployment, Kubernetes 1.36) over a Snapshot (snapshot.go:
// which ReplicaSets and pods a sync sees), split along upstream's files: sync.go (scaling,
// the new ReplicaSet, cleanup), rolling.go, recreate.go, rollback.go, progress.go (status and
// conditions), with upstream's arithmetic in util.go, conditions.go and hash.go (the
// pod-template-hash). A RollingUpdate sync is chained: it makes every scaling move its
// observation allows, as upstream's next syncs, woken by its own writes, would.
//
// On top of upstream's decisions:
//   - steps.go, analysis.go, notify.go: the stepped-rollout annotations (steps, analysis
//     providers, notifications), parsed and validated, and each step's share of pods
//     (StepShares) that k8s.Canary caps a sync with;
//   - traffic.go: Gateway API traffic routing, the route weights a step may set and the
//     invariant that no backend gets more traffic than its share of available pods;
//   - managed.go: managed mode, a Deployment parked beside the built-in controller
//     (DecideManaged);
//   - version.go: the object-version freshness token a sync waits for.
//   - need.go: SyncNeed, whether a change the cache saw needs a sync, a status refresh
//     or nothing: the one question the watcher and the worker's wait (AwaitChange) ask.
package k8s
