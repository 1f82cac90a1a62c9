package main

import (
	"fmt"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/temporal-rollout/rollout/release"
)

// startReleases runs the release and fleet freeze workflows (--releases) on their own task
// queue, beside the cluster's Deployment workflows. The clusters' activities they call run on
// each cluster's task queue; their own (the fleet freeze's state) here.
func startReleases(tc client.Client, policyFile string) (stop func(), err error) {
	acts := &release.Activities{Client: tc}
	if policyFile != "" {
		p, err := readPolicy(policyFile)
		if err != nil {
			return nil, err
		}
		acts.Policy, acts.PolicySource = &p, "file "+policyFile
	}
	w := worker.New(tc, release.TaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(release.ReleaseWorkflow, workflow.RegisterOptions{Name: release.WorkflowType})
	w.RegisterWorkflowWithOptions(release.FleetFreezeWorkflow, workflow.RegisterOptions{Name: release.FleetFreezeType})
	w.RegisterActivity(acts)
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start worker on task queue %s: %w", release.TaskQueue, err)
	}
	return w.Stop, nil
}

// readPolicy reads the releases' approval policy file (--release-policy): a release reads it
// when it starts (the ReleasePolicy activity) and keeps it, so a changed file applies to
// releases started after the worker restarts.
func readPolicy(path string) (release.Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return release.Policy{}, fmt.Errorf("read --release-policy: %w", err)
	}
	p, err := release.ParsePolicy(b)
	if err != nil {
		return release.Policy{}, fmt.Errorf("--release-policy %s: %w", path, err)
	}
	return p, nil
}
