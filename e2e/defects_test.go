//go:build e2e

package e2e

// Scenarios from issue 13 ("Correctness defects found in review") that no test covered: each
// checks exact object state on the real stack.

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// waitAll polls cond for every name until each returns "" or the timeout passes, and returns
// the last reason of those that did not.
func waitAll(timeout time.Duration, names []string, cond func(name string) string) map[string]string {
	pending := map[string]string{}
	for _, n := range names {
		pending[n] = "not checked"
	}
	deadline := time.Now().Add(timeout)
	for {
		for n := range pending {
			if why := cond(n); why == "" {
				delete(pending, n)
			} else {
				pending[n] = why
			}
		}
		if len(pending) == 0 || time.Now().After(deadline) {
			return pending
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestSignalPayloadNotJSON sends signals whose payload the workflow cannot decode as JSON (issue
// 13, defect 2): raw bytes (binary/plain), a proto message (json/protobuf), a payload in an
// encoding no converter knows, and malformed JSON, each as a rollback signal to its own
// Deployment, and a proto message as a trigger signal to another. Each must be logged and
// ignored, as docs/operations.md promises: the status query reports an ignored rollback in
// IgnoredSignal, and the workflow keeps working: pause and resume signals take effect and a
// later image change rolls out completely.
func TestSignalPayloadNotJSON(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	raw := func(encoding string, data []byte) converter.RawValue {
		return converter.NewRawValue(&commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(encoding)}, Data: data})
	}
	cases := []struct {
		name, signal string
		value        any
	}{
		{"bytes", contract.SignalRollback, []byte{0xff, 0x00}},
		{"proto", contract.SignalRollback, &commonpb.WorkflowType{Name: "not-a-rollback"}},
		{"unknown-encoding", contract.SignalRollback, raw("binary/x-e2e-unknown", []byte{1, 2, 3})},
		{"bad-json", contract.SignalRollback, raw(converter.MetadataEncodingJSON, []byte(`{"revision":`))},
		{"trigger-proto", contract.SignalTrigger, &commonpb.WorkflowType{Name: "not-a-trigger"}},
	}
	names := make([]string, len(cases))
	for i, c := range cases {
		names[i] = c.name
		create(t, newDeployment(ns, c.name, 2, "nginx:1.25", rolling("1", "0")))
	}
	first := map[string]string{}
	for _, c := range cases {
		first[c.name] = expectedRSName(waitComplete(t, ns, c.name))
	}

	for _, c := range cases {
		if err := env.tc.SignalWorkflow(ctx, workflowID(ns, c.name), "", c.signal, c.value); err != nil {
			t.Fatalf("%s: send %s signal: %v", c.name, c.signal, err)
		}
	}
	failed := map[string]bool{}
	report := func(step string, pending map[string]string) {
		t.Helper()
		var keys []string
		for n := range pending {
			keys = append(keys, n)
		}
		sort.Strings(keys)
		for _, n := range keys {
			t.Errorf("%s: %s: %s", n, step, pending[n])
			failed[n] = true
		}
	}
	alive := func() []string {
		var out []string
		for _, n := range names {
			if !failed[n] {
				out = append(out, n)
			}
		}
		return out
	}
	var rollbacks []string
	for _, c := range cases {
		if c.signal == contract.SignalRollback {
			rollbacks = append(rollbacks, c.name)
		}
	}
	report("the ignored rollback signal is not reported by the status query", waitAll(20*time.Second, rollbacks, func(n string) string {
		if st := queryStatus(t, ns, n); !strings.Contains(st.IgnoredSignal, "rollback") {
			return fmt.Sprintf("ignoredSignal = %q, want it to explain the ignored rollback", st.IgnoredSignal)
		}
		return ""
	}))

	for _, n := range alive() {
		signal(t, ns, n, contract.SignalPause)
	}
	report("pause signal after the undecodable one did not take effect", waitAll(30*time.Second, alive(), func(n string) string {
		d := getDeployment(t, ns, n)
		if !d.Spec.Paused || condition(d, appsv1.DeploymentProgressing) != "Unknown/DeploymentPaused" {
			return fmt.Sprintf("paused=%t Progressing=%s", d.Spec.Paused, condition(d, appsv1.DeploymentProgressing))
		}
		return ""
	}))
	for _, n := range alive() {
		setImage(t, ns, n, "nginx:1.26")
	}
	time.Sleep(3 * time.Second)
	for _, n := range alive() {
		d := getDeployment(t, ns, n)
		var owned []appsv1.ReplicaSet
		for _, rs := range replicaSets(t, ns) {
			if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == d.UID {
				owned = append(owned, rs)
			}
		}
		if got, want := rsSummary(owned), first[n]+":r1:2"; got != want {
			t.Errorf("%s: while paused replicasets = %s, want %s", n, got, want)
			failed[n] = true
		}
	}
	for _, n := range alive() {
		signal(t, ns, n, contract.SignalResume)
	}
	report("after resume the image change did not roll out", waitAll(90*time.Second, alive(), func(n string) string {
		d := getDeployment(t, ns, n)
		if d.Spec.Paused {
			return "spec.paused still true"
		}
		return rolloutPending(d)
	}))
	for _, n := range alive() {
		d := getDeployment(t, ns, n)
		var owned []appsv1.ReplicaSet
		for _, rs := range replicaSets(t, ns) {
			if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == d.UID {
				owned = append(owned, rs)
			}
		}
		if got, want := rsSummary(owned), fmt.Sprintf("%s:r2:2 %s:r1:0", expectedRSName(d), first[n]); got != want {
			t.Errorf("%s: replicasets = %s, want %s", n, got, want)
		}
		if st := d.Status; st.Replicas != 2 || st.UpdatedReplicas != 2 || st.AvailableReplicas != 2 {
			t.Errorf("%s: status = %+v, want 2 replicas, all updated and available", n, st)
		}
	}
	for _, n := range names {
		desc, err := env.tc.DescribeWorkflowExecution(ctx, workflowID(ns, n), "")
		if err != nil {
			t.Fatal(err)
		}
		if st := desc.WorkflowExecutionInfo.Status; st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			t.Errorf("%s: workflow status = %s, want Running", n, st)
		}
	}
}

// TestDeleteAndRecreate deletes Deployments and at once creates them again under the same name,
// ten at a time (as `kubectl replace --force` or a helm reinstall does), twice, half with the
// same template and half with a new one (issue 13, defect 1). Every recreated Deployment must be
// rolled out: ReplicaSets owned by the new object, all replicas available, and no workflow run
// may end with OutcomeDeleted once the new Deployment exists.
func TestDeleteAndRecreate(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	const n = 10
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("app-%d", i)
		create(t, newDeployment(ns, names[i], 2, "nginx:1.25", rolling("1", "0")))
	}
	for _, name := range names {
		waitComplete(t, ns, name)
	}
	images := map[string]string{}
	for round := 1; round <= 2; round++ {
		recreated := map[string]time.Time{}
		uids := map[string]types.UID{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i, name := range names {
			image := "nginx:1.25"
			if i%2 == 1 {
				image = fmt.Sprintf("nginx:1.%d", 25+round)
			}
			images[name] = image
			wg.Go(func() {
				if err := env.kube.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					errs <- fmt.Errorf("delete %s: %w", name, err)
					return
				}
				d, err := env.kube.AppsV1().Deployments(ns).Create(ctx, newDeployment(ns, name, 2, image, rolling("1", "0")), metav1.CreateOptions{})
				if err != nil {
					errs <- fmt.Errorf("recreate %s: %w", name, err)
					return
				}
				mu.Lock()
				recreated[name], uids[name] = time.Now(), d.UID
				mu.Unlock()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		pending := waitAll(90*time.Second, names, func(name string) string {
			d := getDeployment(t, ns, name)
			if d.UID != uids[name] {
				return "uid changed again"
			}
			if why := rolloutPending(d); why != "" {
				return why
			}
			var owned []string
			for _, rs := range replicaSets(t, ns) {
				if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == d.UID && *rs.Spec.Replicas > 0 {
					owned = append(owned, fmt.Sprintf("%s:%d", rs.Name, *rs.Spec.Replicas))
				}
			}
			if want := expectedRSName(d) + ":2"; strings.Join(owned, " ") != want {
				return fmt.Sprintf("owned replicasets with replicas %v, want %s", owned, want)
			}
			if d.Spec.Template.Spec.Containers[0].Image != images[name] || d.Status.AvailableReplicas != 2 {
				return fmt.Sprintf("image %s available %d", d.Spec.Template.Spec.Containers[0].Image, d.Status.AvailableReplicas)
			}
			return ""
		})
		var keys []string
		for k := range pending {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.Errorf("round %d: recreated %s not rolled out: %s", round, k, pending[k])
		}
		// A run that ends Deleted while the new Deployment exists took it for deleted. Runs
		// that read before the recreate close within milliseconds of it; allow a second.
		for _, name := range names {
			for _, run := range closedRuns(t, workflowID(ns, name)) {
				if run.outcome == contract.OutcomeDeleted && run.closed.After(recreated[name].Add(time.Second)) {
					t.Errorf("round %d: %s: run %s ended %s at %s, %s after the Deployment was recreated",
						round, name, run.runID, run.outcome, run.closed.Format(time.RFC3339Nano), run.closed.Sub(recreated[name]).Round(time.Millisecond))
				}
			}
		}
		if t.Failed() {
			return
		}
	}
}

type closedRun struct {
	runID, outcome string
	closed         time.Time
}

// closedRuns lists the completed runs of a workflow ID and their outcomes.
func closedRuns(t *testing.T, id string) []closedRun {
	t.Helper()
	ctx := context.Background()
	resp, err := env.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = %q AND ExecutionStatus = 'Completed'", id),
	})
	if err != nil {
		t.Fatalf("list runs of %s: %v", id, err)
	}
	var out []closedRun
	for _, e := range resp.Executions {
		var res contract.Result
		if err := env.tc.GetWorkflow(ctx, id, e.Execution.RunId).Get(ctx, &res); err != nil {
			continue
		}
		out = append(out, closedRun{runID: e.Execution.RunId, outcome: res.Outcome, closed: e.CloseTime.AsTime()})
	}
	return out
}

// TestWatcherDowntime stops the watcher, deletes one Deployment and creates another while it is
// down, and starts it again (issue 13, defect 4): the new Deployment is rolled out, and the
// deleted one's workflow, which no event will ever wake, is closed within 2 minutes.
func TestWatcherDowntime(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	create(t, newDeployment(ns, "gone", 2, "nginx:1.25", rolling("1", "0")))
	waitComplete(t, ns, "gone")
	if desc, err := env.tc.DescribeWorkflowExecution(ctx, workflowID(ns, "gone"), ""); err != nil || desc.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("workflow of gone before the test: %v %v, want Running", desc, err)
	}

	env.stack.StopProcess("watcher")
	t.Cleanup(func() {
		if env.stack.Proc("watcher") == nil {
			if err := startWatcher(); err != nil {
				t.Error(err)
			}
		}
	})
	if err := env.kube.AppsV1().Deployments(ns).Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	create(t, newDeployment(ns, "fresh", 3, "nginx:1.25", rolling("1", "0")))
	eventually(t, 30*time.Second, func() string {
		for _, rs := range replicaSets(t, ns) {
			if strings.HasPrefix(rs.Name, "gone-") {
				return "replicasets of gone not garbage-collected yet: " + rs.Name
			}
		}
		return ""
	})
	time.Sleep(2 * time.Second)
	if rss := replicaSets(t, ns); len(rss) != 0 {
		t.Fatalf("with the watcher down, replicasets %s appeared: the test needs nothing to drive fresh", rsSummary(rss))
	}

	if err := startWatcher(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	d := waitComplete(t, ns, "fresh")
	if got, want := rsSummary(replicaSets(t, ns)), expectedRSName(d)+":r1:3"; got != want {
		t.Errorf("fresh: replicasets = %s, want %s", got, want)
	}
	t.Logf("fresh rolled out %s after the watcher restarted", time.Since(restarted).Round(time.Millisecond))

	eventually(t, 2*time.Minute, func() string {
		desc, err := env.tc.DescribeWorkflowExecution(ctx, workflowID(ns, "gone"), "")
		if err != nil {
			return err.Error()
		}
		if st := desc.WorkflowExecutionInfo.Status; st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return fmt.Sprintf("workflow %s still Running %s after the watcher restarted, its Deployment deleted while the watcher was down",
				workflowID(ns, "gone"), time.Since(restarted).Round(time.Second))
		}
		return ""
	})
	desc, err := env.tc.DescribeWorkflowExecution(ctx, workflowID(ns, "gone"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gone's workflow closed %s after the watcher restarted: %s", time.Since(restarted).Round(time.Second), desc.WorkflowExecutionInfo.Status)
	if st := desc.WorkflowExecutionInfo.Status; st == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		var res contract.Result
		if err := env.tc.GetWorkflow(ctx, workflowID(ns, "gone"), "").Get(ctx, &res); err != nil || res.Outcome != contract.OutcomeDeleted {
			t.Errorf("gone's workflow result %+v (%v), want outcome %s", res, err, contract.OutcomeDeleted)
		}
	}
}

// TestMinReadySeconds: with minReadySeconds 5, Ready pods are not available until they have
// been Ready 5 s: status.availableReplicas stays 0 meanwhile, the Available condition is False
// (MinimumReplicasUnavailable) and then True (MinimumReplicasAvailable), and availableReplicas
// ends equal to replicas. Like upstream's TestDeploymentAvailableCondition, with kwok's pods.
func TestMinReadySeconds(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	const minReady = 5 * time.Second
	// Note when each pod turns Ready, by the test's clock.
	var (
		mu        sync.Mutex
		readyAt   = map[string]time.Time{}
		firstSeen time.Time
	)
	pw, err := env.kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Stop()
	go func() {
		for ev := range pw.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && podReady(p) {
				mu.Lock()
				if _, ok := readyAt[p.Name]; !ok {
					readyAt[p.Name] = time.Now()
				}
				mu.Unlock()
			}
		}
	}()

	dep := newDeployment(ns, "web", 3, "nginx:1.25", rolling("1", "0"))
	dep.Spec.MinReadySeconds = int32(minReady / time.Second)
	create(t, dep)
	var (
		sawFalse     bool
		sawAvailable time.Time
		last         *appsv1.Deployment
	)
	eventually(t, 60*time.Second, func() string {
		d := getDeployment(t, ns, "web")
		last = d
		now := time.Now()
		mu.Lock()
		var earliest time.Time
		for _, at := range readyAt {
			if earliest.IsZero() || at.Before(earliest) {
				earliest = at
			}
		}
		if firstSeen.IsZero() && !earliest.IsZero() {
			firstSeen = earliest
		}
		mu.Unlock()
		switch c := k8s.GetCondition(d.Status, appsv1.DeploymentAvailable); {
		case c == nil:
		case c.Status == corev1.ConditionFalse:
			sawFalse = true
			if c.Reason != "MinimumReplicasUnavailable" {
				t.Errorf("Available False with reason %s, want MinimumReplicasUnavailable", c.Reason)
			}
		case c.Status == corev1.ConditionTrue && !sawFalse:
			t.Fatalf("Available True (%s) before it was ever False", c.Reason)
		}
		if d.Status.AvailableReplicas > 0 && sawAvailable.IsZero() {
			sawAvailable = now
			// Pod conditions carry whole seconds, so a pod can count as available up to 1 s
			// early: allow 1.5 s.
			if firstSeen.IsZero() || now.Sub(firstSeen) < minReady-1500*time.Millisecond {
				t.Errorf("availableReplicas %d at %s, only %s after the first pod turned Ready (minReadySeconds %s)",
					d.Status.AvailableReplicas, now.Format(time.StampMilli), now.Sub(firstSeen).Round(time.Millisecond), minReady)
			}
		}
		if d.Status.ReadyReplicas > 0 && d.Status.AvailableReplicas > d.Status.ReadyReplicas {
			t.Errorf("availableReplicas %d > readyReplicas %d", d.Status.AvailableReplicas, d.Status.ReadyReplicas)
		}
		if why := rolloutPending(d); why != "" {
			return why
		}
		return ""
	})
	d := last
	if !sawFalse {
		t.Errorf("never saw Available False")
	}
	if got := condition(d, appsv1.DeploymentAvailable); got != "True/MinimumReplicasAvailable" {
		t.Errorf("Available = %s, want True/MinimumReplicasAvailable", got)
	}
	if st := d.Status; st.Replicas != 3 || st.UpdatedReplicas != 3 || st.ReadyReplicas != 3 || st.AvailableReplicas != 3 || st.UnavailableReplicas != 0 {
		t.Errorf("status = %+v, want 3 replicas, all updated, ready and available", st)
	}
	if rss := replicaSets(t, ns); len(rss) != 1 || rss[0].Spec.MinReadySeconds != 5 {
		t.Errorf("replicasets %s, want one with minReadySeconds 5", rsSummary(rss))
	}
	t.Logf("first pod Ready at +0, first available at +%s", sawAvailable.Sub(firstSeen).Round(time.Millisecond))
}

// scaleTo writes spec.replicas through the /scale subresource, as the HPA does.
func scaleTo(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	ctx := context.Background()
	if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		s, err := env.kube.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = replicas
		_, err = env.kube.AppsV1().Deployments(ns).UpdateScale(ctx, name, s, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatalf("scale %s/%s to %d through /scale: %v", ns, name, replicas, err)
	}
}

// statusCounts renders the Deployment's status counts.
func statusCounts(st appsv1.DeploymentStatus) string {
	return fmt.Sprintf("replicas=%d updated=%d ready=%d available=%d unavailable=%d terminating=%d",
		st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas, st.UnavailableReplicas, ptr.Deref(st.TerminatingReplicas, -1))
}

// waitRS waits for the replicaset summary and the Deployment's status counts.
func waitRS(t *testing.T, ns, name, wantRS, wantStatus string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	eventually(t, 60*time.Second, func() string {
		if got := rsSummary(replicaSets(t, ns)); got != wantRS {
			return fmt.Sprintf("replicasets = %s, want %s", got, wantRS)
		}
		d = getDeployment(t, ns, name)
		if d.Status.ObservedGeneration < d.Generation {
			return fmt.Sprintf("observedGeneration %d < %d", d.Status.ObservedGeneration, d.Generation)
		}
		if got := statusCounts(d.Status); got != wantStatus {
			return fmt.Sprintf("status %s, want %s", got, wantStatus)
		}
		return ""
	})
	return d
}

// TestScaleSubresource writes spec.replicas through /scale, as the HPA does, while the
// Deployment is idle and in the middle of a rollout: the ReplicaSets end at the exact sizes
// (proportional mid-rollout) with the desired/max annotations, and the status counts match.
func TestScaleSubresource(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		ns := newNamespace(t)
		create(t, newDeployment(ns, "web", 4, "nginx:1.25", rolling("25%", "25%")))
		rs := expectedRSName(waitComplete(t, ns, "web"))
		for _, tt := range []struct{ replicas, max int32 }{{7, 9}, {2, 3}} {
			scaleTo(t, ns, "web", tt.replicas)
			n := tt.replicas
			d := waitRS(t, ns, "web", fmt.Sprintf("%s:r1:%d", rs, n), fmt.Sprintf("replicas=%d updated=%d ready=%d available=%d unavailable=0 terminating=0", n, n, n, n))
			if why := rolloutPending(d); why != "" {
				t.Errorf("after /scale to %d: %s", n, why)
			}
			got := replicaSets(t, ns)[0]
			if got.Annotations[k8s.DesiredReplicasAnnotation] != fmt.Sprint(n) || got.Annotations[k8s.MaxReplicasAnnotation] != fmt.Sprint(tt.max) {
				t.Errorf("after /scale to %d replicaset desired/max = %s/%s, want %d/%d", n, got.Annotations[k8s.DesiredReplicasAnnotation], got.Annotations[k8s.MaxReplicasAnnotation], n, tt.max)
			}
			s, err := env.kube.AppsV1().Deployments(ns).GetScale(context.Background(), "web", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if s.Spec.Replicas != n || s.Status.Replicas != n || s.Status.Selector != "app=web" {
				t.Errorf("scale = spec %d status %d selector %q, want %d, %d, app=web", s.Spec.Replicas, s.Status.Replicas, s.Status.Selector, n, n)
			}
		}
	})

	// 10 replicas, maxSurge 3, maxUnavailable 2, new image never Ready: new 5, old 8 (see
	// TestScaleMidRollout). /scale to 20: allowed 23; old round(8×23/13) = 14, new
	// round(5×23/13) = 9. /scale back to 10: allowed 13; old (largest first) round(14×13/23) = 8,
	// new round(9×13/23) = 5.
	t.Run("mid-rollout", func(t *testing.T) {
		ns := newNamespace(t)
		create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("3", "2")))
		oldRS := expectedRSName(waitComplete(t, ns, "web"))
		setImage(t, ns, "web", "nginx:404")
		var newRS string
		eventually(t, 30*time.Second, func() string {
			rss := replicaSets(t, ns)
			if len(rss) != 2 || *rss[0].Spec.Replicas != 5 || *rss[1].Spec.Replicas != 8 {
				return "want new 5, old 8: " + rsSummary(rss)
			}
			newRS = rss[0].Name
			return ""
		})
		obs := observe(t, ns, 23, 0)
		for _, tt := range []struct {
			replicas, oldN, newN, max int32
		}{{20, 14, 9, 23}, {10, 8, 5, 13}} {
			scaleTo(t, ns, "web", tt.replicas)
			total := tt.oldN + tt.newN
			waitRS(t, ns, "web", fmt.Sprintf("%s:r2:%d %s:r1:%d", newRS, tt.newN, oldRS, tt.oldN),
				fmt.Sprintf("replicas=%d updated=%d ready=%d available=%d unavailable=%d terminating=0", total, tt.newN, tt.oldN, tt.oldN, total-tt.oldN))
			for _, rs := range replicaSets(t, ns) {
				if rs.Annotations[k8s.DesiredReplicasAnnotation] != fmt.Sprint(tt.replicas) || rs.Annotations[k8s.MaxReplicasAnnotation] != fmt.Sprint(tt.max) {
					t.Errorf("after /scale to %d replicaset %s desired/max = %s/%s, want %d/%d", tt.replicas, rs.Name, rs.Annotations[k8s.DesiredReplicasAnnotation], rs.Annotations[k8s.MaxReplicasAnnotation], tt.replicas, tt.max)
				}
			}
		}
		obs.stop()
	})
}

// TestConflictsDuringRollout runs a rollout while a second client keeps patching labels and
// annotations on the ReplicaSets, so our ReplicaSet writes meet 409 Conflicts (issue 13, defect
// 3): the rollout completes, maxSurge/maxUnavailable are never breached, and the ReplicaSets
// end exact, the other client's labels and annotations kept.
func TestConflictsDuringRollout(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("1", "0")))
	d := waitComplete(t, ns, "web")
	firstRS := expectedRSName(d)

	stop := make(chan struct{})
	var patches, wg = atomic.Int64{}, sync.WaitGroup{}
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			list, err := env.kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, rs := range list.Items {
				patch := fmt.Sprintf(`{"metadata":{"labels":{"e2e-churn":"%d"},"annotations":{"e2e.example.com/churn":"%d"}}}`, i, i)
				if _, err := env.kube.AppsV1().ReplicaSets(ns).Patch(ctx, rs.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err == nil {
					patches.Add(1)
				}
			}
			time.Sleep(churnEvery)
		}
	})
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	obs := observe(t, ns, 11, 10)
	start := time.Now()
	setImage(t, ns, "web", "nginx:1.26")
	d = waitComplete(t, ns, "web")
	close(stop)
	wg.Wait()
	obs.stop()
	conflicts := 0
	if logs, err := os.ReadFile(env.stack.Proc("worker").LogPath); err == nil {
		for _, line := range strings.Split(string(logs), "\n") {
			if strings.Contains(line, ns+"/") && strings.Contains(line, "the object has been modified") {
				conflicts++
			}
			if strings.Contains(line, ns) && strings.Contains(line, "backoff") {
				t.Logf("worker: %.300s", line)
			}
		}
	}
	t.Logf("rollout took %s under %d concurrent ReplicaSet patches; the worker logged %d conflicts", time.Since(start).Round(time.Millisecond), patches.Load(), conflicts)

	// Let a last sync settle after the churn stops, then check the exact end state.
	newRS := expectedRSName(d)
	want := fmt.Sprintf("%s:r2:10 %s:r1:0", newRS, firstRS)
	eventually(t, 30*time.Second, func() string {
		if got := rsSummary(replicaSets(t, ns)); got != want {
			return fmt.Sprintf("replicasets = %s, want %s", got, want)
		}
		return ""
	})
	for _, rs := range replicaSets(t, ns) {
		if rs.Labels["e2e-churn"] == "" || rs.Annotations["e2e.example.com/churn"] == "" {
			t.Errorf("replicaset %s lost the other client's label/annotation: labels %v annotations %v", rs.Name, rs.Labels, rs.Annotations)
		}
		if rs.Annotations[k8s.DesiredReplicasAnnotation] != "10" || rs.Annotations[k8s.MaxReplicasAnnotation] != "11" {
			t.Errorf("replicaset %s desired/max = %s/%s, want 10/11", rs.Name, rs.Annotations[k8s.DesiredReplicasAnnotation], rs.Annotations[k8s.MaxReplicasAnnotation])
		}
	}
	if st := d.Status; statusCounts(st) != "replicas=10 updated=10 ready=10 available=10 unavailable=0 terminating=0" {
		t.Errorf("status %s", statusCounts(st))
	}
	if got := d.Annotations[k8s.RevisionAnnotation]; got != "2" {
		t.Errorf("revision = %s, want 2", got)
	}
	if patches.Load() == 0 {
		t.Errorf("the second client made no patch: nothing conflicted")
	}
}

// churnEvery spaces TestConflictsDuringRollout's rounds of ReplicaSet patches. Every patch
// also wakes kube-controller-manager's ReplicaSet controller (QPS 20 here): at 20 ms, late in the
// full suite on 2 cores, that controller fell so far behind that pods took 37-86 s to come up
// between two of our moves (seen in the workflow history) and the rollout passed the 3-minute
// bound whatever the Deployment controller did. 100 ms still lands patches between our read and
// our write. E2E_CHURN overrides it (5ms makes most of our writes conflict).
var churnEvery = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("E2E_CHURN")); err == nil {
		return d
	}
	return 100 * time.Millisecond
}()
