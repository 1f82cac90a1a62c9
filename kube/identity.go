// Package kube is everything of ours that talks to the Kubernetes API server: client
// construction, our writer identity, and the informer cache that the worker and the watcher
// read the cluster through. The pure rollout engine (package k8s) does no I/O.
package kube

// FieldManager is who we are on the API server: the field manager of every write we make
// (managedFields) and the user agent of our clients (apiserver metrics and audit logs). The
// watcher tells our own writes from everyone else's by it, so test and benchmark harnesses
// write under a name of their own (NewClientsetAs).
const FieldManager = "temporal-deployment-controller"

// UserAgent is the user agent of our clients; it is FieldManager.
const UserAgent = FieldManager
