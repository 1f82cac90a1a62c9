// Package k8s holds the Kubernetes side of the orchestrator: client construction and the pure
// rollout engine.
//
// The engine reproduces the decisions of the upstream Deployment controller
// (k8s.io/kubernetes/pkg/controller/deployment, Kubernetes 1.36) as functions without I/O: they
// take a Deployment and its ReplicaSets and return the writes to make. Workflows call them to
// decide; activities only carry the writes out.
package k8s
