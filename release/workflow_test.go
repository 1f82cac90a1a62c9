package release

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// fakeFleet is the clusters the release sees: per "cluster/namespace/name", a template
// (its image), a revision and a generation. Its activities log what they do, with the
// workflow clock.
type fakeFleet struct {
	mu   sync.Mutex
	env  *testsuite.TestWorkflowEnvironment
	deps map[string]*fakeDep
	log  []string
	// failRollout: rollouts of these Deployments (by name) to the given image fail.
	failRollout map[string]string
	start       time.Time
	frozen      []FleetFreeze // FleetFreezeState answers these in turn, then "not frozen"
	measures    []activities.Measurement
	// queues records the task queue each activity ran on, by activity name.
	queues map[string]map[string]bool
	// lostResult: changes of these Deployments (by name) land, but every answer is an error
	// (the result lost); readBackFails: reading them back fails too.
	lostResult    map[string]bool
	readBackFails bool
	// realistic: ApplyTemplateChange answers with realisticTemplate, not template.
	realistic bool
	// fromHash counts the restores from a ReplicaSet's hash (RestoreInput.FromHash).
	fromHash int
	// policy is what ReleasePolicy answers (nil: unsigned, no rules).
	policy *Policy
	// freezeErrs: FleetFreezeState fails (non-retryable) this many times first.
	freezeErrs int
}

// template is the pod template the fleet answers for an image.
func (f *fakeFleet) template(image string) corev1.PodTemplateSpec {
	if f.realistic {
		return realisticTemplate(image)
	}
	return template(image)
}

type fakeDep struct {
	// container is the name of its one container ("app" unless set).
	container  string
	image      string
	revision   int64
	generation int64
	annots     map[string]string
	// before is the image before the last change (what a ReadBack names).
	before string
}

func newFleet(env *testsuite.TestWorkflowEnvironment, names ...string) *fakeFleet {
	f := &fakeFleet{env: env, deps: map[string]*fakeDep{}, failRollout: map[string]string{}, start: env.Now(), queues: map[string]map[string]bool{}, lostResult: map[string]bool{}}
	for _, n := range names {
		f.deps[n] = &fakeDep{image: "nginx:1.26", revision: 3, generation: 5, annots: map[string]string{}}
	}
	for name, fn := range map[string]any{
		"ReadTargets": f.readTargets, "PreflightChange": f.preflight, "ApplyTemplateChange": f.apply, "AwaitRolloutDone": f.awaitDone,
		"RestoreTemplate": f.restore, "RecordEvent": f.recordEvent, "MeasureAnalysis": f.measure,
	} {
		env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	var fa *Activities
	env.RegisterActivity(fa)
	env.OnActivity(fa.FleetFreezeState, mock.Anything).Return(func(context.Context) (FleetFreeze, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.freezeErrs > 0 {
			f.freezeErrs--
			return FleetFreeze{}, temporal.NewNonRetryableApplicationError("query freeze/fleet: connection refused", "Unavailable", nil)
		}
		if len(f.frozen) > 0 {
			ff := f.frozen[0]
			f.frozen = f.frozen[1:]
			return ff, nil
		}
		return FleetFreeze{}, nil
	})
	env.OnActivity(fa.ReleasePolicy, mock.Anything).Return(func(context.Context) (PolicyResult, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.policy == nil {
			return PolicyResult{Policy: Policy{Unsigned: true}, Source: "test: none"}, nil
		}
		return PolicyResult{Policy: *f.policy, Source: "test"}, nil
	})
	env.OnActivity(fa.LinkRollout, mock.Anything, mock.Anything).Return(func(_ context.Context, in LinkInput) (LinkResult, error) {
		return LinkResult{WorkflowID: contract.WorkflowIDIn(in.Cluster, in.DeploymentNS, in.DeploymentName), RunID: "run-" + in.DeploymentName}, nil
	})
	env.OnActivity(fa.AwaitThaw, mock.Anything).Return(func(context.Context) error {
		f.logf("thawed")
		return nil
	}).After(time.Hour)
	return f
}

func (f *fakeFleet) logf(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, fmt.Sprintf("%s %s", f.env.Now().Sub(f.start).Round(time.Second), fmt.Sprintf(format, a...)))
}

func (f *fakeFleet) key(ctx context.Context, ns, name string) string {
	q := activity.GetInfo(ctx).TaskQueue
	cluster := strings.TrimPrefix(strings.TrimPrefix(q, contract.DefaultTaskQueue), ".")
	f.mu.Lock()
	if f.queues[activity.GetInfo(ctx).ActivityType.Name] == nil {
		f.queues[activity.GetInfo(ctx).ActivityType.Name] = map[string]bool{}
	}
	f.queues[activity.GetInfo(ctx).ActivityType.Name][q] = true
	f.mu.Unlock()
	return cluster + "/" + ns + "/" + name
}

func (f *fakeFleet) readTargets(ctx context.Context, in activities.ReadTargetsInput) (activities.ReadTargetsResult, error) {
	var res activities.ReadTargetsResult
	prefix := f.key(ctx, in.Namespace, "")
	if strings.HasPrefix(prefix, "nowhere/") {
		// No worker serves this cluster: the activity is never answered.
		return res, errors.New("no worker")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range in.Names {
		d, ok := f.deps[prefix+n]
		if !ok {
			res.Missing = append(res.Missing, n)
			continue
		}
		res.Targets = append(res.Targets, activities.Target{Name: n, UID: types.UID("uid-" + n), TemplateHash: "h-" + d.image})
	}
	if in.Selector != "" {
		for k, d := range f.deps {
			if strings.HasPrefix(k, prefix) {
				res.Targets = append(res.Targets, activities.Target{Name: strings.TrimPrefix(k, prefix), UID: "uid", TemplateHash: "h-" + d.image})
			}
		}
	}
	return res, nil
}

// preflight answers as PreflightChange: a container the change names that the Deployment
// does not have is a problem.
func (f *fakeFleet) preflight(ctx context.Context, in activities.PreflightInput) (activities.PreflightResult, error) {
	var res activities.PreflightResult
	for _, n := range in.Names {
		k := f.key(ctx, in.Namespace, n)
		f.logf("preflight %s", k)
		f.mu.Lock()
		d := f.deps[k]
		f.mu.Unlock()
		for c := range in.Images {
			if have := cmp.Or(d.container, "app"); c != have {
				res.Problems = append(res.Problems, fmt.Sprintf("%s/%s: no container named %q", in.Namespace, n, c))
			}
		}
	}
	return res, nil
}

func template(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}
}

func (f *fakeFleet) apply(ctx context.Context, in activities.ApplyInput) (activities.ApplyResult, error) {
	k := f.key(ctx, in.Namespace, in.Name)
	if in.ReadBack {
		f.logf("read back %s", k)
		f.mu.Lock()
		defer f.mu.Unlock()
		d := f.deps[k]
		if f.readBackFails {
			return activities.ApplyResult{}, errors.New("apiserver unreachable")
		}
		if d.image != in.Images["app"] {
			return activities.ApplyResult{Revision: d.revision, Template: f.template(d.image), TemplateHash: "h-" + d.image, BeforeHash: "h-" + d.image, Generation: d.generation}, nil
		}
		return activities.ApplyResult{Revision: d.revision - 1, Template: f.template(d.before), TemplateHash: "h-" + d.image, BeforeHash: "h-" + d.before, Generation: d.generation, HasChange: true}, nil
	}
	f.logf("apply %s %s", k, in.Images["app"])
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.deps[k]
	res := activities.ApplyResult{Revision: d.revision, Template: f.template(d.image), TemplateHash: "h-" + in.Images["app"], BeforeHash: "h-" + d.image, HasChange: true}
	if d.image != in.Images["app"] {
		d.before = d.image
		d.image, d.revision, d.generation = in.Images["app"], d.revision+1, d.generation+1
		res.Changed = true
	}
	for k, v := range in.Annotations {
		d.annots[k] = v
	}
	res.Generation = d.generation
	if f.lostResult[in.Name] {
		return activities.ApplyResult{}, errors.New("connection to the apiserver lost")
	}
	return res, nil
}

func (f *fakeFleet) awaitDone(ctx context.Context, in activities.AwaitDoneInput) (activities.AwaitDoneResult, error) {
	k := f.key(ctx, in.Namespace, in.Name)
	f.mu.Lock()
	d := f.deps[k]
	bad := f.failRollout[in.Name] != "" && f.failRollout[in.Name] == d.image
	f.mu.Unlock()
	if bad {
		f.logf("failed %s", k)
		return activities.AwaitDoneResult{Failed: true, Reason: "ProgressDeadlineExceeded"}, nil
	}
	f.logf("done %s", k)
	return activities.AwaitDoneResult{Complete: true}, nil
}

func (f *fakeFleet) restore(ctx context.Context, in activities.RestoreInput) (activities.RestoreResult, error) {
	k := f.key(ctx, in.Namespace, in.Name)
	var image string
	if in.FromHash != "" {
		// The ReplicaSet of the template with this hash ("h-<image>").
		image = strings.TrimPrefix(in.FromHash, "h-")
		f.mu.Lock()
		f.fromHash++
		f.mu.Unlock()
	} else {
		image = in.Template.Spec.Containers[0].Image
	}
	f.mu.Lock()
	d := f.deps[k]
	if h := in.ExpectTemplateHash; h != "" && h != "h-"+d.image && d.image != image {
		f.mu.Unlock()
		f.logf("restore skipped %s %s", k, d.image)
		return activities.RestoreResult{Generation: d.generation, TemplateHash: "h-" + image, Skipped: true,
			Drift: fmt.Sprintf("container app: image %s → %s", strings.TrimPrefix(h, "h-"), d.image)}, nil
	}
	f.mu.Unlock()
	f.logf("restore %s %s", k, image)
	f.mu.Lock()
	defer f.mu.Unlock()
	d.image, d.generation = image, d.generation+1
	for k, v := range in.Annotations {
		d.annots[k] = v
	}
	return activities.RestoreResult{Generation: d.generation, TemplateHash: "h-" + image, Changed: true}, nil
}

func (f *fakeFleet) recordEvent(ctx context.Context, in activities.RecordEventInput) error {
	f.key(ctx, in.Deployment.Namespace, in.Deployment.Name)
	for _, e := range in.Events {
		f.logf("event %s %s", in.Deployment.Name, e.Reason)
	}
	return nil
}

func (f *fakeFleet) measure(ctx context.Context, in activities.MeasureInput) (activities.Measurement, error) {
	f.logf("measure %d", in.Measurement)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.measures) == 0 {
		return activities.Measurement{Verdict: activities.VerdictSuccessful}, nil
	}
	m := f.measures[0]
	f.measures = f.measures[1:]
	return m, nil
}

// lines returns the log lines that start with one of the prefixes (after the time).
func (f *fakeFleet) lines(prefixes ...string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, l := range f.log {
		_, rest, _ := strings.Cut(l, " ")
		for _, p := range prefixes {
			if strings.HasPrefix(rest, p) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

func twoWaves(t *testing.T, mutate func(*Spec)) Spec {
	t.Helper()
	s, err := Parse([]byte(`
name: web-1-27
change: {images: {app: "nginx:1.27"}}
targets:
  - {name: one, namespace: shop, names: [a]}
  - {name: two, cluster: eu, namespace: shop, names: [b, c]}
waves:
  - {name: first, targets: [one], bake: 10m}
  - {name: second, targets: [two], maxConcurrent: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	// starter release apply sets it (--identity).
	s.Author = "deployer@ci"
	if mutate != nil {
		mutate(&s)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	return s
}

func newEnv(t *testing.T, spec Spec) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(ReleaseWorkflow)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: WorkflowID(spec.Name), TaskQueue: TaskQueue})
	// The SDK's deadlock detector fires when a workflow goroutine has not yielded for 1 s of
	// wall time: on a machine whose cores run other test binaries (make test runs packages in
	// parallel), the 1,000-target release's larger steps were starved past it
	// (TestThousandTargetsContinueAsNewAndRollBack, 2026-11-29). A real deadlock still ends
	// the test, at 10 s or at its timeout.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: 10 * time.Second})
	return env
}

type updateResult struct {
	rejected error
	err      error
	status   Status
	done     bool
}

// update sends an update at d and records its outcome.
func update(env *testsuite.TestWorkflowEnvironment, d time.Duration, name string, payload any) *updateResult {
	got := &updateResult{}
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(name, fmt.Sprintf("%s-%s", name, d), &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { got.rejected = err },
			OnComplete: func(v any, err error) {
				got.done, got.err = true, err
				if st, ok := v.(Status); ok {
					got.status = st
				}
			},
		}, payload)
	}, d)
	return got
}

func query(t *testing.T, env *testsuite.TestWorkflowEnvironment) Status {
	t.Helper()
	v, err := env.QueryWorkflow(QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	var st Status
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func result(t *testing.T, env *testsuite.TestWorkflowEnvironment) Result {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("workflow error: %v", err)
	}
	var r Result
	if err := env.GetWorkflowResult(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

// equalSet compares lines in any order: activities that run at once log in any order (each
// line carries the workflow time, which orders the waves).
func equalSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := append([]string(nil), got...), append([]string(nil), want...)
	sort.Strings(g)
	sort.Strings(w)
	equalLines(t, what, g, w)
}

func equalLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\ngot:\n  %s\nwant:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestWavesInOrderWithBake: wave 1 (one Deployment), a 10-minute bake, then wave 2's two
// Deployments at once, in cluster eu.
func TestWavesInOrderWithBake(t *testing.T) {
	spec := twoWaves(t, nil)
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	var baking Status
	env.RegisterDelayedCallback(func() { baking = query(t, env) }, 5*time.Minute)
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseSucceeded {
		t.Fatalf("result = %+v, want Succeeded", r)
	}
	equalSet(t, "log", f.lines("apply", "done", "restore"), []string{
		"0s apply /shop/a nginx:1.27",
		"0s done /shop/a",
		"10m0s apply eu/shop/b nginx:1.27",
		"10m0s apply eu/shop/c nginx:1.27",
		"10m0s done eu/shop/b",
		"10m0s done eu/shop/c",
	})
	if baking.Phase != PhaseBaking || baking.Wave != 1 || baking.WaitingFor != WaitingForBake || baking.Waves[0].State != WaveBaking {
		t.Errorf("status at 5m = phase %s wave %d waiting %s wave state %s, want Baking 1 Bake Baking", baking.Phase, baking.Wave, baking.WaitingFor, baking.Waves[0].State)
	}
	st := query(t, env)
	var states []string
	for _, tg := range st.Targets {
		states = append(states, fmt.Sprintf("%s:%s/%s %s %s r%d", tg.Cluster, tg.Namespace, tg.Name, tg.Wave, tg.State, tg.RevisionBefore))
	}
	equalLines(t, "targets", states, []string{":shop/a first Done r3", "eu:shop/b second Done r3", "eu:shop/c second Done r3"})
	var links []string
	for _, tg := range st.Targets {
		links = append(links, tg.Workflow+" "+tg.RunID)
	}
	equalLines(t, "linked runs (LinkRollout)", links, []string{"deployment/shop/a run-a", "deployment/eu/shop/b run-b", "deployment/eu/shop/c run-c"})
	if got := f.deps["eu/shop/b"].annots[AnnotationRelease]; got != "web-1-27" {
		t.Errorf("annotation %s = %q, want web-1-27", AnnotationRelease, got)
	}
	if q := f.queues["ApplyTemplateChange"]; !q["deployment-controller.eu"] || !q["deployment-controller"] {
		t.Errorf("apply ran on task queues %v, want deployment-controller and deployment-controller.eu", q)
	}
}

// TestFailureInWave2RollsBackInReverse: c's rollout fails in wave 2; b and c (wave 2), then a
// (wave 1), go back to their templates from before the release.
func TestFailureInWave2RollsBackInReverse(t *testing.T) {
	spec := twoWaves(t, func(s *Spec) { s.Waves[1].MaxConcurrent = 1 })
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	f.failRollout["c"] = "nginx:1.27"
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	r := result(t, env)
	if r.Phase != PhaseRolledBack || !strings.Contains(r.Reason, "wave second: eu:shop/c: rollout failed: ProgressDeadlineExceeded") {
		t.Fatalf("result = %+v, want RolledBack naming c's failure", r)
	}
	equalLines(t, "log", f.lines("apply", "done", "failed", "restore"), []string{
		"0s apply /shop/a nginx:1.27",
		"0s done /shop/a",
		"10m0s apply eu/shop/b nginx:1.27",
		"10m0s done eu/shop/b",
		"10m0s apply eu/shop/c nginx:1.27",
		"10m0s failed eu/shop/c",
		"10m0s restore eu/shop/c nginx:1.26",
		"10m0s done eu/shop/c",
		"10m0s restore eu/shop/b nginx:1.26",
		"10m0s done eu/shop/b",
		"10m0s restore /shop/a nginx:1.26",
		"10m0s done /shop/a",
	})
	for k, d := range f.deps {
		if d.image != "nginx:1.26" {
			t.Errorf("%s image %s, want nginx:1.26", k, d.image)
		}
		if !strings.HasPrefix(d.annots[AnnotationRolledBack], "web-1-27: wave second") {
			t.Errorf("%s annotation %s = %q", k, AnnotationRolledBack, d.annots[AnnotationRolledBack])
		}
		// The restored template's hash: its Deployment's workflow does not hold the rollback
		// in the fleet freeze (issue 46 item 7).
		if got := d.annots[k8s.ReleaseRestoredHashAnnotation]; got != "h-nginx:1.26" {
			t.Errorf("%s annotation %s = %q, want h-nginx:1.26", k, k8s.ReleaseRestoredHashAnnotation, got)
		}
	}
	st := query(t, env)
	for _, tg := range st.Targets {
		if tg.State != TargetRolledBack {
			t.Errorf("%s state %s, want RolledBack", tg.Name, tg.State)
		}
	}
	if st.Waves[0].State != WaveRolledBack || st.Waves[1].State != WaveRolledBack || st.FailureReason == "" {
		t.Errorf("waves %+v failure %q", st.Waves, st.FailureReason)
	}
	if got := len(f.lines("event c ReleaseFailed")); got != 1 {
		t.Errorf("%d ReleaseFailed events on c, want 1", got)
	}
	if got := len(f.lines("event a ReleaseRolledBack", "event b ReleaseRolledBack", "event c ReleaseRolledBack")); got != 3 {
		t.Errorf("%d ReleaseRolledBack events, want 3", got)
	}
}

// TestOnFailureHalt: the same failure only stops.
func TestOnFailureHalt(t *testing.T) {
	spec := twoWaves(t, func(s *Spec) { s.OnFailure = OnFailureHalt; s.Waves[1].MaxConcurrent = 1 })
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	f.failRollout["b"] = "nginx:1.27"
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseHalted {
		t.Fatalf("result = %+v, want Halted", r)
	}
	if got := f.lines("restore"); len(got) != 0 {
		t.Errorf("restores %v, want none", got)
	}
	if got := f.lines("apply eu/shop/c"); len(got) != 0 {
		t.Errorf("c was changed after b failed: %v", got)
	}
	equalSet(t, "halt events", f.lines("event a ReleaseHalted", "event b ReleaseHalted", "event c ReleaseHalted"), []string{
		"10m0s event a ReleaseHalted", "10m0s event b ReleaseHalted",
	})
	st := query(t, env)
	if st.Targets[1].State != TargetFailed || st.Targets[2].State != TargetPending || st.Phase != PhaseHalted {
		t.Errorf("status %+v", st)
	}
}

// TestApprovalByTwo: wave 1 needs two distinct approvers; the same one twice is rejected.
func TestApprovalByTwo(t *testing.T) {
	spec := twoWaves(t, func(s *Spec) { s.Waves[0].Approval = &Approval{Approvers: 2} })
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	var waiting Status
	env.RegisterDelayedCallback(func() { waiting = query(t, env) }, 30*time.Second)
	noApprover := update(env, time.Minute, UpdateApprove, map[string]string{})
	alice := update(env, 2*time.Minute, UpdateApprove, ApproveRequest{Approver: "alice"})
	again := update(env, 3*time.Minute, UpdateApprove, ApproveRequest{Approver: "alice"})
	wrongWave := update(env, 3*time.Minute+time.Second, UpdateApprove, ApproveRequest{Approver: "carol", Wave: "second"})
	bob := update(env, 4*time.Minute, UpdateApprove, ApproveRequest{Approver: "bob", Wave: "1"})
	late := update(env, 5*time.Minute, UpdateApprove, ApproveRequest{Approver: "dave"})
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseSucceeded {
		t.Fatalf("result = %+v", r)
	}
	if waiting.WaitingFor != WaitingForApproval || waiting.Phase != PhaseWaiting {
		t.Errorf("at 30s: %s/%s, want Waiting/Approval", waiting.Phase, waiting.WaitingFor)
	}
	for _, tt := range []struct {
		name string
		got  *updateResult
		want string
	}{
		{"no approver", noApprover, "approve needs the approver"},
		{"alice again", again, "alice already approved wave 1 (first)"},
		{"wrong wave", wrongWave, `wave "second" is not the current wave (1, first)`},
		{"late", late, "wave 1 (first) has started"},
	} {
		if tt.got.rejected == nil || !strings.Contains(tt.got.rejected.Error(), tt.want) {
			t.Errorf("%s: rejected = %v, want %q", tt.name, tt.got.rejected, tt.want)
		}
	}
	if alice.rejected != nil || bob.rejected != nil || !bob.done {
		t.Fatalf("alice %+v bob %+v", alice, bob)
	}
	if a := bob.status.Waves[0].Approvals; len(a) != 2 || a[0].Approver != "alice" || a[1].Approver != "bob" {
		t.Errorf("approvals %+v, want alice then bob", a)
	}
	if got := f.lines("apply /shop/a"); len(got) != 1 || !strings.HasPrefix(got[0], "4m0s ") {
		t.Errorf("wave 1 applied %v, want once at 4m0s", got)
	}
}

// TestAbortRollsBack: an abort during wave 1's bake: the reason is recorded, a is rolled back
// and wave 2 never starts. Malformed abort payloads are rejected.
func TestAbortRollsBack(t *testing.T) {
	spec := twoWaves(t, nil)
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	noReason := update(env, time.Minute, UpdateAbort, ReasonRequest{})
	malformed := update(env, time.Minute+time.Second, UpdateAbort, "not an object")
	unknown := update(env, time.Minute+2*time.Second, UpdateAbort, map[string]string{"why": "x"})
	abort := update(env, 2*time.Minute, UpdateAbort, ReasonRequest{Reason: "error budget burnt"})
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	r := result(t, env)
	if r.Phase != PhaseRolledBack || r.Reason != "aborted: error budget burnt" {
		t.Fatalf("result = %+v", r)
	}
	for name, u := range map[string]*updateResult{"no reason": noReason, "malformed": malformed, "unknown field": unknown} {
		if u.rejected == nil {
			t.Errorf("%s: not rejected", name)
		}
	}
	if !strings.Contains(malformed.rejected.Error(), "payload") || !strings.Contains(unknown.rejected.Error(), `unknown field "why"`) {
		t.Errorf("malformed: %v; unknown: %v", malformed.rejected, unknown.rejected)
	}
	if abort.rejected != nil {
		t.Fatalf("abort rejected: %v", abort.rejected)
	}
	equalLines(t, "log", f.lines("apply", "restore"), []string{
		"0s apply /shop/a nginx:1.27",
		"2m0s restore /shop/a nginx:1.26",
	})
	if got := f.deps["eu/shop/b"].image; got != "nginx:1.26" {
		t.Errorf("b image %s, want untouched", got)
	}
	st := query(t, env)
	if st.FailureReason != "aborted: error budget burnt" || st.Targets[0].State != TargetRolledBack || st.Targets[1].State != TargetPending {
		t.Errorf("status %+v", st)
	}
}

// TestPauseResumeSkipBake: pause during the bake holds wave 2 past the bake's end; skipBake
// is rejected outside a bake; resume lets wave 2 start.
func TestPauseResumeSkipBake(t *testing.T) {
	spec := twoWaves(t, func(s *Spec) { s.Waves[1].Bake = k8s.Duration(time.Hour) })
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	pause := update(env, time.Minute, UpdatePause, ReasonRequest{Reason: "incident 42"})
	pauseAgain := update(env, 2*time.Minute, UpdatePause, nil)
	var held Status
	env.RegisterDelayedCallback(func() { held = query(t, env) }, 15*time.Minute)
	skipEarly := update(env, 20*time.Minute, UpdateSkipBake, nil)
	resume := update(env, 30*time.Minute, UpdateResume, nil)
	resumeAgain := update(env, 31*time.Minute, UpdateResume, nil)
	skip := update(env, 32*time.Minute, UpdateSkipBake, nil)
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseSucceeded {
		t.Fatalf("result = %+v", r)
	}
	if pause.rejected != nil || resume.rejected != nil || skip.rejected != nil {
		t.Fatalf("pause %v resume %v skip %v", pause.rejected, resume.rejected, skip.rejected)
	}
	for name, u := range map[string]*updateResult{"pause again": pauseAgain, "skipBake while paused": skipEarly, "resume again": resumeAgain} {
		if u.rejected == nil {
			t.Errorf("%s: not rejected", name)
		}
	}
	if held.WaitingFor != WaitingForResume || !held.Paused || held.PauseReason != "incident 42" {
		t.Errorf("at 15m: %+v, want waiting for resume", held)
	}
	equalSet(t, "log", f.lines("apply", "done"), []string{
		"0s apply /shop/a nginx:1.27",
		"0s done /shop/a",
		"30m0s apply eu/shop/b nginx:1.27",
		"30m0s apply eu/shop/c nginx:1.27",
		"30m0s done eu/shop/b",
		"30m0s done eu/shop/c",
	})
	// The second wave's hour-long bake ended at 32m by skipBake.
	st := query(t, env)
	if st.Waves[1].BakeUntil == nil || st.Waves[1].BakeUntil.Sub(f.start) != 32*time.Minute {
		t.Errorf("wave 2 bake until %v, want start+32m", st.Waves[1].BakeUntil)
	}
}

// TestFreezeWindowHoldsThenReleases: a release started at 23:00 inside a nightly freeze
// window (22:00 for 8h, UTC) waits for its end at 06:00, then runs.
func TestFreezeWindowHoldsThenReleases(t *testing.T) {
	spec := twoWaves(t, func(s *Spec) {
		s.Freeze = []FreezeWindow{{Cron: "0 22 * * *", Duration: k8s.Duration(8 * time.Hour), TimeZone: "UTC", Reason: "nightly freeze"}}
	})
	env := newEnv(t, spec)
	env.SetStartTime(time.Date(2026, 11, 26, 23, 0, 0, 0, time.UTC))
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	var frozen Status
	env.RegisterDelayedCallback(func() { frozen = query(t, env) }, time.Hour)
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseSucceeded {
		t.Fatalf("result = %+v", r)
	}
	if frozen.WaitingFor != WaitingForFreeze || frozen.FreezeReason != "nightly freeze" || frozen.FrozenUntil == nil ||
		!frozen.FrozenUntil.Equal(time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)) {
		t.Errorf("after 1h: waiting %s reason %q until %v, want Freeze until 06:00", frozen.WaitingFor, frozen.FreezeReason, frozen.FrozenUntil)
	}
	// Started 23:00, the window ends at 06:00: 7h.
	equalSet(t, "log", f.lines("apply"), []string{
		"7h0m0s apply /shop/a nginx:1.27",
		"7h10m0s apply eu/shop/b nginx:1.27",
		"7h10m0s apply eu/shop/c nginx:1.27",
	})
}

// TestFreezeWindowAcrossSummerTime: the weekend window (Friday 16:00 Berlin + 64h) that
// began on 2026-10-23 at 16:00 CEST ends on Monday at 08:00 CET, 07:00 UTC, after the clocks
// went back: a release started at 06:30 UTC waits 30 minutes (before, the window had ended at
// 06:00 UTC and the release started at once). The run records the freeze-wall-clock marker.
func TestFreezeWindowAcrossSummerTime(t *testing.T) {
	spec := twoWaves(t, func(s *Spec) {
		s.Freeze = []FreezeWindow{{RRule: "FREQ=WEEKLY;BYDAY=FR;BYHOUR=16;BYMINUTE=0", Duration: k8s.Duration(64 * time.Hour), TimeZone: "Europe/Berlin", Reason: "weekend"}}
	})
	env := newEnv(t, spec)
	env.SetStartTime(time.Date(2026, 10, 26, 6, 30, 0, 0, time.UTC))
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	var versions []string
	env.OnGetVersion(changeFreezeWallClock, workflow.DefaultVersion, 1).Run(func(mock.Arguments) {
		versions = append(versions, changeFreezeWallClock)
	}).Return(workflow.Version(1))
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseSucceeded {
		t.Fatalf("result = %+v", r)
	}
	equalSet(t, "log", f.lines("apply"), []string{
		"30m0s apply /shop/a nginx:1.27",
		"40m0s apply eu/shop/b nginx:1.27",
		"40m0s apply eu/shop/c nginx:1.27",
	})
	if len(versions) == 0 {
		t.Errorf("GetVersion(%s) was not asked", changeFreezeWallClock)
	}
}

// TestFreezeWindowSkippedStartKeepsLength: `30 2 * * *` for 30m in Berlin; on 2026-03-29
// 02:30 does not exist (02:00 CET jumps to 03:00 CEST, 01:00 UTC), so the window is 03:00 to
// 03:30 CEST. A release started at 03:10 CEST (01:10 UTC) waits 20 minutes. A run that began
// before freeze-skipped-start-length (its GetVersion answers DefaultVersion) keeps the old
// answer, no window that day, and starts at once.
func TestFreezeWindowSkippedStartKeepsLength(t *testing.T) {
	tests := []struct {
		name string
		give workflow.Version
		want []string
	}{
		{"new run", 1, []string{"20m0s apply /shop/a nginx:1.27", "30m0s apply eu/shop/b nginx:1.27", "30m0s apply eu/shop/c nginx:1.27"}},
		{"run from before the change", workflow.DefaultVersion, []string{"0s apply /shop/a nginx:1.27", "10m0s apply eu/shop/b nginx:1.27", "10m0s apply eu/shop/c nginx:1.27"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := twoWaves(t, func(s *Spec) {
				s.Freeze = []FreezeWindow{{Cron: "30 2 * * *", Duration: k8s.Duration(30 * time.Minute), TimeZone: "Europe/Berlin", Reason: "nightly"}}
			})
			env := newEnv(t, spec)
			env.SetStartTime(time.Date(2026, 3, 29, 1, 10, 0, 0, time.UTC))
			f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
			asked := 0
			env.OnGetVersion(changeFreezeSkippedStartLength, workflow.DefaultVersion, 1).Run(func(mock.Arguments) {
				asked++
			}).Return(tt.give)
			env.ExecuteWorkflow(ReleaseWorkflow, spec)
			if r := result(t, env); r.Phase != PhaseSucceeded {
				t.Fatalf("result = %+v", r)
			}
			equalSet(t, "log", f.lines("apply"), tt.want)
			if asked == 0 {
				t.Errorf("GetVersion(%s) was not asked", changeFreezeSkippedStartLength)
			}
		})
	}
}

// TestPreflightFailsBeforeAnyChange: wave 2's c has no container "app": the release fails
// before it changes anything (before, wave 1 rolled out and baked, then c's change failed and
// a was rolled back). Every target is checked, wave 2's in cluster eu on its task queue.
func TestPreflightFailsBeforeAnyChange(t *testing.T) {
	spec := twoWaves(t, nil)
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	f.deps["eu/shop/c"].container = "web"
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	r := result(t, env)
	if r.Phase != PhaseFailed || r.Reason != `pre-flight: the change does not apply to eu:shop/c: no container named "app"` {
		t.Fatalf("result = %+v, want Failed naming c", r)
	}
	if got := f.lines("apply", "restore"); len(got) != 0 {
		t.Errorf("changes %v, want none", got)
	}
	equalSet(t, "checked", f.lines("preflight"), []string{"0s preflight /shop/a", "0s preflight eu/shop/b", "0s preflight eu/shop/c"})
	if q := f.queues["PreflightChange"]; !q["deployment-controller.eu"] || !q["deployment-controller"] {
		t.Errorf("pre-flight ran on task queues %v, want deployment-controller and deployment-controller.eu", q)
	}
}

// TestFleetFreezeHolds: the fleet is frozen when wave 2 would start; it waits for the thaw.
func TestFleetFreezeHolds(t *testing.T) {
	spec := twoWaves(t, nil)
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	// Wave 1's check: not frozen; wave 2's: frozen; after the thaw: not frozen.
	f.frozen = []FleetFreeze{{}, {Frozen: true, Until: f.start.Add(5 * time.Hour), Reason: "black friday", By: "ops"}}
	var held Status
	env.RegisterDelayedCallback(func() { held = query(t, env) }, 30*time.Minute)
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseSucceeded {
		t.Fatalf("result = %+v", r)
	}
	if held.WaitingFor != WaitingForFleetFreeze || held.FreezeReason != "black friday" {
		t.Errorf("at 30m: waiting %s reason %q, want FleetFreeze black friday", held.WaitingFor, held.FreezeReason)
	}
	// AwaitThaw (mocked) returns after an hour.
	equalSet(t, "log", f.lines("apply", "thawed"), []string{
		"0s apply /shop/a nginx:1.27",
		"1h10m0s thawed",
		"1h10m0s apply eu/shop/b nginx:1.27",
		"1h10m0s apply eu/shop/c nginx:1.27",
	})
}

// TestAnalysisFails: wave 1's analysis fails its second measurement (failureLimit 0): the
// release rolls a back and never starts wave 2.
func TestAnalysisFails(t *testing.T) {
	spec := twoWaves(t, func(s *Spec) {
		max := 0.05
		s.Waves[0].Analysis = &k8s.AnalysisStep{Query: "errors", Max: &max, Count: 3, Interval: k8s.Duration(time.Minute)}
	})
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	f.measures = []activities.Measurement{{Verdict: activities.VerdictSuccessful}, {Verdict: activities.VerdictFailed, Message: "0.2 > 0.05"}}
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	r := result(t, env)
	if r.Phase != PhaseRolledBack || !strings.Contains(r.Reason, "analysis failed: 1 of 2 measurements failed (failureLimit 0); last: 0.2 > 0.05") {
		t.Fatalf("result = %+v", r)
	}
	equalLines(t, "log", f.lines("apply", "measure", "restore"), []string{
		"0s apply /shop/a nginx:1.27",
		"0s measure 1",
		"1m0s measure 2",
		"1m0s restore /shop/a nginx:1.26",
	})
}

// TestResolveFailsBeforeAnyChange: a named Deployment that does not exist fails the release
// before anything moves.
func TestResolveFailsBeforeAnyChange(t *testing.T) {
	spec := twoWaves(t, nil)
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b")
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	r := result(t, env)
	if r.Phase != PhaseFailed || r.Reason != "read target group two in cluster eu: no deployment c in namespace shop" {
		t.Fatalf("result = %+v", r)
	}
	if got := f.lines("apply", "restore"); len(got) != 0 {
		t.Errorf("changes %v, want none", got)
	}
}

// TestInvalidSpecFails: the workflow validates its input too (plain Temporal CLI starts).
func TestInvalidSpecFails(t *testing.T) {
	spec := twoWaves(t, nil)
	spec.Waves[1].Targets = []string{"one"}
	env := newEnv(t, spec)
	newFleet(env)
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	err := env.GetWorkflowError()
	if err == nil || !strings.Contains(err.Error(), `target group "one" is also in wave 0 (first)`) || !strings.Contains(err.Error(), "the group is in no wave") {
		t.Fatalf("error = %v, want the validation's problems", err)
	}
}

// TestResumedRunContinues: a run continued as new after wave 1 starts at wave 2.
func TestResumedRunContinues(t *testing.T) {
	spec := twoWaves(t, nil)
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	before := template("nginx:1.26")
	spec.Resume = &State{
		Current: 1, Resolved: true, Runs: 1,
		Status: Status{Name: spec.Name, Phase: PhaseBaking, Wave: 1,
			Waves: []WaveStatus{{Name: "first", State: WaveDone}, {Name: "second", State: WavePending}},
			Targets: []TargetStatus{
				{Namespace: "shop", Name: "a", Wave: "first", State: TargetDone, RevisionBefore: 3},
				{Cluster: "eu", Namespace: "shop", Name: "b", Wave: "second", State: TargetPending},
				{Cluster: "eu", Namespace: "shop", Name: "c", Wave: "second", State: TargetPending},
			}},
		Points: []restorePoint{{Changed: true, Before: &before}, {}, {}},
	}
	f.failRollout["b"] = "nginx:1.27"
	env.SetContinuedExecutionRunID("run-1")
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseRolledBack {
		t.Fatalf("result = %+v", r)
	}
	equalSet(t, "log", f.lines("apply", "restore"), []string{
		"0s apply eu/shop/b nginx:1.27",
		"0s apply eu/shop/c nginx:1.27",
		"0s restore eu/shop/c nginx:1.26",
		"0s restore eu/shop/b nginx:1.26",
		"0s restore /shop/a nginx:1.26",
	})
	// Wave 1 after wave 2.
	if r := f.lines("restore"); len(r) != 3 || r[2] != "0s restore /shop/a nginx:1.26" {
		t.Errorf("restores %v, want /shop/a last", r)
	}
}

// TestAlreadyChangedIsNotRolledBack: b had the change before the release read it; when c
// fails, a and c are rolled back, b is left as it was.
func TestAlreadyChangedIsNotRolledBack(t *testing.T) {
	spec := twoWaves(t, func(s *Spec) { s.Waves[1].MaxConcurrent = 1 })
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	f.deps["eu/shop/b"].image = "nginx:1.27"
	f.failRollout["c"] = "nginx:1.27"
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseRolledBack {
		t.Fatalf("result = %+v", r)
	}
	equalLines(t, "restores", f.lines("restore"), []string{
		"10m0s restore eu/shop/c nginx:1.26",
		"10m0s restore /shop/a nginx:1.26",
	})
	st := query(t, env)
	if b := st.Targets[1]; b.State != TargetDone || b.Reason != "already had the change" {
		t.Errorf("b: %+v, want Done, already had the change", b)
	}
}

// TestUnknownClusterFails: a cluster whose activities are never answered fails the release
// within clusterTimeout (retries stop once the next one would start past it), before any
// change.
func TestUnknownClusterFails(t *testing.T) {
	spec := twoWaves(t, func(s *Spec) {
		s.Targets[1].Cluster = "nowhere"
		s.ClusterTimeout = k8s.Duration(2 * time.Minute)
	})
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a")
	start := env.Now()
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	r := result(t, env)
	if r.Phase != PhaseFailed || !strings.HasPrefix(r.Reason, "read target group two in cluster nowhere: ") {
		t.Fatalf("result = %+v, want Failed reading group two", r)
	}
	if took := env.Now().Sub(start); took < time.Minute || took > 2*time.Minute {
		t.Errorf("failed after %s, want within the 2m clusterTimeout, after a minute of retries", took)
	}
	if got := f.lines("apply"); len(got) != 0 {
		t.Errorf("changes %v, want none", got)
	}
}

// TestContinuesAsNewBetweenWaves: past 5,000 events the run continues as new after wave 1,
// handing its state over (wave 1 done, a's restore point by hash); the next run, given that
// input, runs wave 2 only.
func TestContinuesAsNewBetweenWaves(t *testing.T) {
	spec := twoWaves(t, nil)
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	env.SetCurrentHistoryLength(continueAfterEvents + 1)
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	err := env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("error = %v, want continue-as-new", err)
	}
	var next Spec
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	// a's template from before is named by its ReplicaSet's hash, not carried.
	if next.Resume == nil || next.Resume.Current != 1 || next.Resume.Runs != 1 || !next.Resume.Points[0].Changed ||
		next.Resume.Points[0].Before != nil || next.Resume.Points[0].BeforeHash != "h-nginx:1.26" || next.Resume.Status.Waves[0].State != WaveDone {
		t.Fatalf("handed over %+v", next.Resume)
	}
	equalLines(t, "first run", f.lines("apply"), []string{"0s apply /shop/a nginx:1.27"})
}

// resumedAtWave1 is the state a run would hand over after wave 1 of twoWaves with wave 2
// needing two approvers, both approvals filled in by hand.
func resumedAtWave1(spec Spec) *State {
	before := template("nginx:1.26")
	return &State{
		Current: 1, Resolved: true, Runs: 1,
		Status: Status{Name: spec.Name, Phase: PhaseBaking, Wave: 1,
			Waves: []WaveStatus{{Name: "first", State: WaveDone}, {Name: "second", State: WavePending, ApprovalsNeeded: 2,
				Approvals: []ApprovalAt{{Approver: "mallory"}, {Approver: "trudy"}}}},
			Targets: []TargetStatus{
				{Namespace: "shop", Name: "a", Wave: "first", State: TargetDone, RevisionBefore: 3},
				{Cluster: "eu", Namespace: "shop", Name: "b", Wave: "second", State: TargetPending},
				{Cluster: "eu", Namespace: "shop", Name: "c", Wave: "second", State: TargetPending},
			}},
		Points: []restorePoint{{Changed: true, Before: &before}, {}, {}},
	}
}

// TestResumeRefusedOnAStart: a start (not a continue-as-new) that passes resumed state, here
// with wave 2's two approvals filled in, fails as invalid before anything runs; the same with
// empty waves, which used to panic (index out of range) on every workflow task.
func TestResumeRefusedOnAStart(t *testing.T) {
	const want = "invalid release: resume is the state a run hands over by continue-as-new, and this run was not continued as new; start a release without resume"
	tests := []struct {
		name string
		give func(*State)
	}{
		{"approvals filled in", func(*State) {}},
		{"empty waves", func(st *State) { st.Status.Waves = nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := twoWaves(t, func(s *Spec) { s.Waves[1].Approval = &Approval{Approvers: 2} })
			env := newEnv(t, spec)
			f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
			spec.Resume = resumedAtWave1(spec)
			tt.give(spec.Resume)
			env.ExecuteWorkflow(ReleaseWorkflow, spec)
			if !env.IsWorkflowCompleted() {
				t.Fatal("the workflow did not complete")
			}
			var appErr *temporal.ApplicationError
			if err := env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Message() != want || appErr.Type() != ErrInvalid || !appErr.NonRetryable() {
				t.Fatalf("error = %v, want non-retryable %s: %s", err, ErrInvalid, want)
			}
			if got := f.lines("apply", "restore"); len(got) != 0 {
				t.Errorf("changes %v, want none", got)
			}
		})
	}
}

// TestResumedStateMalformed: a continued run whose state does not fit the release fails as
// invalid, naming what is wrong, and never panics.
func TestResumedStateMalformed(t *testing.T) {
	tests := []struct {
		name string
		give func(*State)
		want string
	}{
		{"empty waves", func(st *State) { st.Status.Waves = nil }, "0 waves, the release has 2"},
		{"current past the waves", func(st *State) { st.Current = 2 }, "current wave 2 is not one of the release's 2 (0-based)"},
		{"negative current", func(st *State) { st.Current = -1 }, "current wave -1 is not one of the release's 2 (0-based)"},
		{"points missing", func(st *State) { st.Points = st.Points[:1] }, "1 restore points for 3 targets"},
		{"changed without a template", func(st *State) { st.Points[0].Before, st.Points[0].BeforeHash = nil, "" }, "target 0 (shop/a) is changed but has no template to restore"},
		{"a wave without targets", func(st *State) { st.Status.Targets, st.Points = st.Status.Targets[:1], st.Points[:1] }, `wave "second" has no targets`},
		{"another release's", func(st *State) { st.Status.Name = "other" }, `it is release "other"'s, not "web-1-27"'s`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := twoWaves(t, nil)
			env := newEnv(t, spec)
			f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
			spec.Resume = resumedAtWave1(spec)
			tt.give(spec.Resume)
			env.SetContinuedExecutionRunID("run-1")
			env.ExecuteWorkflow(ReleaseWorkflow, spec)
			if !env.IsWorkflowCompleted() {
				t.Fatal("the workflow did not complete")
			}
			want := "invalid release: resumed state: " + tt.want
			var appErr *temporal.ApplicationError
			if err := env.GetWorkflowError(); !errors.As(err, &appErr) || appErr.Message() != want || appErr.Type() != ErrInvalid || !appErr.NonRetryable() {
				t.Fatalf("error = %v, want non-retryable %s: %s", err, ErrInvalid, want)
			}
			if got := f.lines("apply", "restore"); len(got) != 0 {
				t.Errorf("changes %v, want none", got)
			}
		})
	}
}

// TestApproverNamesNormalized: alice@laptop and Alice@bastion are one approver (alice); a
// wave needing two waits for bob.
func TestApproverNamesNormalized(t *testing.T) {
	spec := twoWaves(t, func(s *Spec) { s.Waves[0].Approval = &Approval{Approvers: 2} })
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	alice := update(env, time.Minute, UpdateApprove, ApproveRequest{Approver: "alice@laptop"})
	again := update(env, 2*time.Minute, UpdateApprove, ApproveRequest{Approver: "Alice@bastion"})
	bob := update(env, 3*time.Minute, UpdateApprove, ApproveRequest{Approver: "bob"})
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseSucceeded {
		t.Fatalf("result = %+v", r)
	}
	if alice.rejected != nil || bob.rejected != nil {
		t.Fatalf("alice rejected %v, bob rejected %v", alice.rejected, bob.rejected)
	}
	if want := "alice already approved wave 1 (first) (as alice@laptop); it needs 2 distinct approvers"; again.rejected == nil || again.rejected.Error() != want {
		t.Errorf("Alice@bastion: rejected = %v, want %q", again.rejected, want)
	}
	got := bob.status.Waves[0].Approvals
	if len(got) != 2 || got[0].Approver != "alice@laptop" || got[0].Principal != "alice" || got[1].Principal != "bob" || got[0].Signed {
		t.Errorf("approvals %+v, want alice@laptop (alice), bob, unsigned", got)
	}
	equalLines(t, "wave 1", f.lines("apply /shop/a"), []string{"3m0s apply /shop/a nginx:1.27"})
}

// TestLookAlikeApproverNames: a wave needing two approvers; alice approves, then tries
// again as "ａｌｉｃｅ" (fullwidth: NFKC makes it alice), "\u0430lice" (a Cyrillic а: mixed
// scripts) and "al\u200bice" (a zero-width space): each is refused, and the wave waits for
// bob. A run begun before release-approver-names (GetVersion answers DefaultVersion) judges
// names as it did: the fullwidth alice counts as a second approver.
func TestLookAlikeApproverNames(t *testing.T) {
	tests := []struct {
		name        string
		give        workflow.Version
		wantRejects []string // of fullwidth, cyrillic, zero-width; "": accepted
		wantApply   string
	}{
		{"new run", 1, []string{
			"alice already approved wave 1 (first) (as alice@laptop); it needs 2 distinct approvers",
			`approver "\u0430lice" mixes scripts (Cyrillic, Latin): a name is written in one (a look-alike letter from another script makes it another name)`,
			`approver "al\u200bice" holds U+200B, an invisible or format character: spell the name without it`,
		}, "5m0s apply /shop/a nginx:1.27"},
		{"run from before the change", workflow.DefaultVersion, []string{"", "wave 1 (first) has started", "wave 1 (first) has started"}, "2m0s apply /shop/a nginx:1.27"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := twoWaves(t, func(s *Spec) { s.Waves[0].Approval = &Approval{Approvers: 2} })
			env := newEnv(t, spec)
			f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
			// Without the worker's policy, whose runs judge names by CheckApprover always.
			env.OnGetVersion(changeWorkerPolicy, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			asked := 0
			env.OnGetVersion(changeApproverNames, workflow.DefaultVersion, 1).Run(func(mock.Arguments) {
				asked++
			}).Return(tt.give)
			alice := update(env, time.Minute, UpdateApprove, ApproveRequest{Approver: "alice@laptop"})
			lookAlikes := []*updateResult{
				update(env, 2*time.Minute, UpdateApprove, ApproveRequest{Approver: "ａｌｉｃｅ"}),
				update(env, 3*time.Minute, UpdateApprove, ApproveRequest{Approver: "\u0430lice"}),
				update(env, 4*time.Minute, UpdateApprove, ApproveRequest{Approver: "al\u200bice"}),
			}
			update(env, 5*time.Minute, UpdateApprove, ApproveRequest{Approver: "bob"})
			env.ExecuteWorkflow(ReleaseWorkflow, spec)
			if r := result(t, env); r.Phase != PhaseSucceeded {
				t.Fatalf("result = %+v", r)
			}
			if alice.rejected != nil {
				t.Fatalf("alice rejected: %v", alice.rejected)
			}
			for i, u := range lookAlikes {
				got := ""
				if u.rejected != nil {
					got = u.rejected.Error()
				}
				if got != tt.wantRejects[i] {
					t.Errorf("look-alike %d: rejected %q, want %q", i, got, tt.wantRejects[i])
				}
			}
			equalLines(t, "wave 1", f.lines("apply /shop/a"), []string{tt.wantApply})
			if asked != 1 {
				t.Errorf("GetVersion(%s) asked %d times, want 1", changeApproverNames, asked)
			}
		})
	}
}

// TestLookAlikeAuthorCannotApprove: the author alice@laptop approving as "ＡＬＩＣＥ" (fullwidth)
// is the author.
func TestLookAlikeAuthorCannotApprove(t *testing.T) {
	spec := twoWaves(t, func(s *Spec) { s.Waves[0].Approval = &Approval{}; s.Author = "alice@laptop" })
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	self := update(env, time.Minute, UpdateApprove, ApproveRequest{Approver: "ＡＬＩＣＥ"})
	update(env, 2*time.Minute, UpdateApprove, ApproveRequest{Approver: "bob"})
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseSucceeded {
		t.Fatalf("result = %+v", r)
	}
	if want := "alice started the release (as alice@laptop, unsigned): its author cannot approve it"; self.rejected == nil || self.rejected.Error() != want {
		t.Errorf("author: rejected = %v, want %q", self.rejected, want)
	}
	equalLines(t, "wave 1", f.lines("apply /shop/a"), []string{"2m0s apply /shop/a nginx:1.27"})
}

// TestAuthorCannotApprove: the release's author (apply's --identity) cannot approve it, under
// any spelling of the name.
func TestAuthorCannotApprove(t *testing.T) {
	spec := twoWaves(t, func(s *Spec) { s.Waves[0].Approval = &Approval{}; s.Author = "alice@laptop" })
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	self := update(env, time.Minute, UpdateApprove, ApproveRequest{Approver: "ALICE@bastion"})
	bob := update(env, 2*time.Minute, UpdateApprove, ApproveRequest{Approver: "bob@bastion"})
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseSucceeded {
		t.Fatalf("result = %+v", r)
	}
	if want := "alice started the release (as alice@laptop, unsigned): its author cannot approve it"; self.rejected == nil || self.rejected.Error() != want {
		t.Errorf("author: rejected = %v, want %q", self.rejected, want)
	}
	if bob.rejected != nil {
		t.Fatalf("bob rejected: %v", bob.rejected)
	}
	equalLines(t, "wave 1", f.lines("apply /shop/a"), []string{"2m0s apply /shop/a nginx:1.27"})
}

// TestApprovalFrom: approval.from names a group of the release and a person; others are
// rejected.
func TestApprovalFrom(t *testing.T) {
	spec := twoWaves(t, func(s *Spec) {
		s.Groups = map[string][]string{"sre": {"alice@example.com", "Bob"}}
		s.Waves[0].Approval = &Approval{Approvers: 2, From: []string{"sre", "carol"}}
	})
	env := newEnv(t, spec)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	mallory := update(env, time.Minute, UpdateApprove, ApproveRequest{Approver: "mallory@laptop"})
	carol := update(env, 2*time.Minute, UpdateApprove, ApproveRequest{Approver: "Carol@bastion"})
	bob := update(env, 3*time.Minute, UpdateApprove, ApproveRequest{Approver: "bob@laptop"})
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseSucceeded {
		t.Fatalf("result = %+v", r)
	}
	if want := "mallory may not approve wave 1 (first): approval.from (and the worker's policy) admit alice, bob, carol"; mallory.rejected == nil || mallory.rejected.Error() != want {
		t.Errorf("mallory: rejected = %v, want %q", mallory.rejected, want)
	}
	if carol.rejected != nil || bob.rejected != nil {
		t.Fatalf("carol rejected %v, bob rejected %v", carol.rejected, bob.rejected)
	}
	equalLines(t, "wave 1", f.lines("apply /shop/a"), []string{"3m0s apply /shop/a nginx:1.27"})
}

// testSigner is an ed25519 SSH key from a fixed seed.
func testSigner(t *testing.T, seed byte) ssh.Signer {
	t.Helper()
	s, err := ssh.NewSignerFromKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sign(t *testing.T, s ssh.Signer, spec Spec, wave string) string {
	t.Helper()
	sig, err := SignApproval(s, ApprovalMessage(spec.Name, wave, legacyChangeDigest(spec.Change)))
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// TestSignedApprovals: in a run begun before release-worker-policy, both waves take signed approvals from alice and bob (an allowed-signers
// list). Unsigned, signed with a key not listed (mallory's), signed with bob's key as alice,
// and alice's signature of wave 1 sent again for wave 2 are rejected with their reasons;
// alice's signature for wave 1 and bob's for wave 2 are accepted and recorded as signed.
func TestSignedApprovals(t *testing.T) {
	alice, bob, mallory := testSigner(t, 1), testSigner(t, 2), testSigner(t, 3)
	signers := "# who may approve\n" +
		"alice@example.com " + string(ssh.MarshalAuthorizedKey(alice.PublicKey())) +
		`bob namespaces="git,temporal-rollout-approval" ` + string(ssh.MarshalAuthorizedKey(bob.PublicKey()))
	spec := twoWaves(t, func(s *Spec) {
		s.Waves[0].Approval = &Approval{Signers: signers}
		s.Waves[1].Approval = &Approval{Signers: signers}
	})
	env := newEnv(t, spec)
	// A run begun before the worker's policy: the release file's signers are trusted.
	env.OnGetVersion(changeWorkerPolicy, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	f := newFleet(env, "/shop/a", "eu/shop/b", "eu/shop/c")
	aliceWave1 := sign(t, alice, spec, "first")
	unsigned := update(env, time.Minute, UpdateApprove, ApproveRequest{Approver: "alice@laptop"})
	forged := update(env, 2*time.Minute, UpdateApprove, ApproveRequest{Approver: "alice@laptop", Signature: sign(t, mallory, spec, "first")})
	bobAsAlice := update(env, 3*time.Minute, UpdateApprove, ApproveRequest{Approver: "alice", Signature: sign(t, bob, spec, "first")})
	valid := update(env, 4*time.Minute, UpdateApprove, ApproveRequest{Approver: "alice@laptop", Signature: aliceWave1})
	// Wave 1 ran at 4m and baked 10m: wave 2 waits from 14m.
	replayed := update(env, 20*time.Minute, UpdateApprove, ApproveRequest{Approver: "alice@laptop", Signature: aliceWave1})
	bobWave2 := update(env, 21*time.Minute, UpdateApprove, ApproveRequest{Approver: "bob@bastion", Wave: "second", Signature: sign(t, bob, spec, "second")})
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	if r := result(t, env); r.Phase != PhaseSucceeded {
		t.Fatalf("result = %+v", r)
	}
	digest := legacyChangeDigest(spec.Change)
	fp := func(s ssh.Signer) string { return ssh.FingerprintSHA256(s.PublicKey()) }
	tests := []struct {
		name string
		got  *updateResult
		want string
	}{
		{"unsigned", unsigned, "wave 1 (first) takes signed approvals only (approval.signers): sign with `starter release approve --sign-key KEY`"},
		{"forged", forged, "alice's signed approval of wave 1 (first) rejected: forged: signed with key " + fp(mallory) + ", which approval.signers does not list for alice"},
		{"bob as alice", bobAsAlice, "alice's signed approval of wave 1 (first) rejected: forged: signed with key " + fp(bob) + ", which approval.signers does not list for alice"},
		{"replayed", replayed, "alice's signed approval of wave 2 (second) rejected: alice's key " + fp(alice) + " did not sign this approval (temporal-rollout approval, release web-1-27, wave second, change " + digest + "): the signature is for another release, wave or change (replayed), or damaged"},
	}
	for _, tt := range tests {
		if tt.got.rejected == nil || tt.got.rejected.Error() != tt.want {
			t.Errorf("%s: rejected = %v\nwant %s", tt.name, tt.got.rejected, tt.want)
		}
	}
	if valid.rejected != nil || bobWave2.rejected != nil {
		t.Fatalf("valid rejected %v; bob's wave 2 rejected %v", valid.rejected, bobWave2.rejected)
	}
	st := query(t, env)
	if a := st.Waves[0].Approvals; len(a) != 1 || a[0].Principal != "alice" || !a[0].Signed {
		t.Errorf("wave 1 approvals %+v, want alice, signed", a)
	}
	if a := st.Waves[1].Approvals; len(a) != 1 || a[0].Principal != "bob" || !a[0].Signed {
		t.Errorf("wave 2 approvals %+v, want bob, signed", a)
	}
	equalSet(t, "applies", f.lines("apply"), []string{
		"4m0s apply /shop/a nginx:1.27",
		"21m0s apply eu/shop/b nginx:1.27",
		"21m0s apply eu/shop/c nginx:1.27",
	})
}
