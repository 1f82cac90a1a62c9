// Package workflows holds the Deployment workflow: deterministic code that observes through
// activities, decides with the pure engine in package k8s, and acts through activities.
//
// What other processes and users rely on (task queues, workflow IDs, the input, status and
// payloads, signal, update and query names, search attributes) is package contract, which this
// package uses by its own names: nothing here mirrors it.
package workflows
