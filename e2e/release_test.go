//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/temporal-rollout/rollout/k8s"
	"github.com/temporal-rollout/rollout/release"
)

// releaseTimeout bounds one release in these tests.
const releaseTimeout = 6 * time.Minute

// applyRelease writes the release file and starts it with `starter release apply -f`.
func applyRelease(t *testing.T, spec string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "release.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := starterCmd(t, "release", "apply", "-f", path)
	if err != nil {
		t.Fatalf("starter release apply: %v\n%s", err, out)
	}
	parsed, _ := release.Parse([]byte(spec))
	// With E2E_RECORD_HISTORIES, for release/replay_test.go.
	recordHistoriesOf(t, release.WorkflowID(parsed.Name))
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := temporalCLIErr("workflow", "show", "--workflow-id", release.WorkflowID(parsed.Name))
			t.Logf("history of %s:\n%s", release.WorkflowID(parsed.Name), out)
		}
	})
	return out
}

// releaseResult waits for the release's workflow to end and returns its result.
func releaseResult(t *testing.T, name string) release.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	var r release.Result
	if err := env.tc.GetWorkflow(ctx, release.WorkflowID(name), "").Get(ctx, &r); err != nil {
		st, _ := queryRelease(name)
		t.Fatalf("release %s: %v; status %+v", name, err, st)
	}
	return r
}

func queryRelease(name string) (release.Status, error) {
	var st release.Status
	v, err := env.tc.QueryWorkflow(context.Background(), release.WorkflowID(name), "", release.QueryStatus)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

// waitRelease waits until the release's status satisfies cond ("" when it does).
func waitRelease(t *testing.T, name string, cond func(release.Status) string) release.Status {
	t.Helper()
	var st release.Status
	eventually(t, releaseTimeout, func() string {
		var err error
		if st, err = queryRelease(name); err != nil {
			return err.Error()
		}
		return cond(st)
	})
	return st
}

func waitingFor(what string) func(release.Status) string {
	return func(st release.Status) string {
		if st.WaitingFor != what {
			return fmt.Sprintf("phase %s waiting for %q (%s), want %q", st.Phase, st.WaitingFor, st.Message, what)
		}
		return ""
	}
}

// rsState is one ReplicaSet as the rollback check compares it.
type rsState struct {
	UID      types.UID
	Hash     string
	Replicas int32
}

// replicaSetsOf is the Deployment's ReplicaSets, by name.
func replicaSetsOf(t *testing.T, kc kubernetes.Interface, d *appsv1.Deployment) map[string]rsState {
	t.Helper()
	list, err := kc.AppsV1().ReplicaSets(d.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list replicasets: %v", err)
	}
	out := map[string]rsState{}
	for _, rs := range list.Items {
		if metav1.IsControlledBy(&rs, d) {
			out[rs.Name] = rsState{UID: rs.UID, Hash: rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey], Replicas: *rs.Spec.Replicas}
		}
	}
	return out
}

// imagesOf is the Deployment's ReplicaSets as "image=replicas", sorted.
func imagesOf(t *testing.T, kc kubernetes.Interface, d *appsv1.Deployment) string {
	t.Helper()
	list, err := kc.AppsV1().ReplicaSets(d.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list replicasets: %v", err)
	}
	var out []string
	for _, rs := range list.Items {
		if metav1.IsControlledBy(&rs, d) {
			out = append(out, fmt.Sprintf("%s=%d", rs.Spec.Template.Spec.Containers[0].Image, *rs.Spec.Replicas))
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// currentReplicaSet is the Deployment's ReplicaSet of its current template.
func currentReplicaSet(t *testing.T, kc kubernetes.Interface, d *appsv1.Deployment) *appsv1.ReplicaSet {
	t.Helper()
	rs, err := kc.AppsV1().ReplicaSets(d.Namespace).Get(context.Background(), k8s.ReplicaSetName(d.Name, k8s.PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the current replicaset of %s: %v", d.Name, err)
	}
	return rs
}

func withLabels(l map[string]string) deployOpt {
	return func(d *appsv1.Deployment) {
		for k, v := range l {
			d.Labels = mergeMap(d.Labels, k, v)
		}
	}
}

func mergeMap(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// TestReleaseWavesInOrderWithBake: wave 1 (web-a) rolls out, bakes 15s, then wave 2 (the two
// Deployments labelled tier=rest, both at once) rolls out. Each ends on the new image with the
// release annotation and a ReleaseChanged event; the status lists every target Done; the
// ReleaseName search attribute finds the run and its memo says Succeeded.
func TestReleaseWavesInOrderWithBake(t *testing.T) {
	if env.builtin {
		t.Skip("needs our worker")
	}
	ns := newNamespace(t)
	create(t, newDeployment(ns, "web-a", 2, "nginx:1.25", rolling("1", "0")))
	create(t, newDeployment(ns, "web-b", 2, "nginx:1.25", rolling("1", "0"), withLabels(map[string]string{"tier": "rest"})))
	create(t, newDeployment(ns, "web-c", 2, "nginx:1.25", rolling("1", "0"), withLabels(map[string]string{"tier": "rest"})))
	for _, n := range []string{"web-a", "web-b", "web-c"} {
		waitComplete(t, ns, n)
	}
	name := "waves-" + ns[len(ns)-4:]
	out := applyRelease(t, fmt.Sprintf(`
name: %s
change: {images: {app: "nginx:1.26"}}
targets:
  - {name: first, namespace: %s, names: [web-a]}
  - {name: rest, namespace: %s, selector: "tier=rest"}
waves:
  - {name: canary, targets: [first], bake: 15s}
  - {name: rest, targets: [rest], maxConcurrent: 2}
`, name, ns, ns))
	if !strings.Contains(out, "started release/"+name) {
		t.Errorf("apply printed %q", out)
	}
	baking := waitRelease(t, name, waitingFor(release.WaitingForBake))
	if baking.Wave != 1 || baking.Targets[0].State != release.TargetDone || baking.Targets[1].State != release.TargetPending {
		t.Errorf("while baking: wave %d, targets %+v", baking.Wave, baking.Targets)
	}
	if r := releaseResult(t, name); r.Phase != release.PhaseSucceeded {
		t.Fatalf("result %+v, want Succeeded", r)
	}

	created := map[string]time.Time{}
	for _, n := range []string{"web-a", "web-b", "web-c"} {
		d := waitComplete(t, ns, n)
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.26" {
			t.Errorf("%s image %s, want nginx:1.26", n, img)
		}
		if got := d.Annotations[release.AnnotationRelease]; got != name {
			t.Errorf("%s annotation %s = %q, want %q", n, release.AnnotationRelease, got, name)
		}
		if rev := d.Annotations[k8s.RevisionAnnotation]; rev != "2" {
			t.Errorf("%s revision %s, want 2", n, rev)
		}
		waitEvent(t, ns, n, "ReleaseChanged: Release "+name+" (wave ")
		created[n] = currentReplicaSet(t, env.kube, d).CreationTimestamp.Time
	}
	// Wave 2 started after wave 1 completed and baked 15s (creation stamps are whole seconds).
	for _, n := range []string{"web-b", "web-c"} {
		if gap := created[n].Sub(created["web-a"]); gap < 15*time.Second {
			t.Errorf("%s's new ReplicaSet was created %s after web-a's, want at least the 15s bake", n, gap)
		}
	}
	st, err := queryRelease(name)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tg := range st.Targets {
		got = append(got, fmt.Sprintf("%s %s %s r%d", tg.Name, tg.Wave, tg.State, tg.RevisionBefore))
	}
	if want := []string{"web-a canary Done r1", "web-b rest Done r1", "web-c rest Done r1"}; strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("targets %v, want %v", got, want)
	}
	if st.Phase != release.PhaseSucceeded || st.Waves[0].State != release.WaveDone || st.Waves[1].State != release.WaveDone || st.Waves[0].BakeUntil == nil {
		t.Errorf("status %+v", st)
	}
	out, err = starterCmd(t, "release", "status", name)
	if err != nil {
		t.Fatalf("starter release status: %v\n%s", err, out)
	}
	for _, want := range []string{`Phase:\s+Succeeded\n`, `Wave:\s+2 of 2\n`, `\n1 canary\s+Done\s`, `\n` + ns + `/web-c\s+rest\s+Done\s+1\s`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("starter release status does not match %q:\n%s", want, out)
		}
	}
	// The search attribute and the memo.
	eventually(t, 30*time.Second, func() string {
		return listed(t, fmt.Sprintf(`ReleaseName = "%s"`, name), release.WorkflowID(name))
	})
	desc, err := env.tc.DescribeWorkflowExecution(context.Background(), release.WorkflowID(name), "")
	if err != nil {
		t.Fatal(err)
	}
	var phase string
	if p := desc.WorkflowExecutionInfo.GetMemo().GetFields()["phase"]; p == nil || json.Unmarshal(p.Data, &phase) != nil || phase != release.PhaseSucceeded {
		t.Errorf("memo phase %q, want Succeeded (memo %v)", phase, desc.WorkflowExecutionInfo.GetMemo())
	}
}

// TestReleaseFailureRollsBack: wave 2's Deployment cannot place its new pods (its nodeSelector
// names a label the nodes lose after its first rollout), so its rollout misses its 10s
// progress deadline. The release rolls back wave 2 and then wave 1: each Deployment's current
// ReplicaSet is again the one from before the release (same name, UID and pod-template-hash),
// at its replicas, and the release's new ReplicaSets are at 0. The reason is on the release
// and on each Deployment (annotation, event).
func TestReleaseFailureRollsBack(t *testing.T) {
	if env.builtin {
		t.Skip("needs our worker")
	}
	ctx := context.Background()
	ns := newNamespace(t)
	label := "release-e2e-" + ns[len(ns)-4:]
	setNodeLabel(t, env.kube, label, "yes")
	t.Cleanup(func() { setNodeLabel(t, env.kube, label, "") })

	create(t, newDeployment(ns, "web-a", 3, "nginx:1.25", rolling("1", "0"), progressDeadline(10)))
	create(t, newDeployment(ns, "web-b", 3, "nginx:1.25", rolling("1", "0"), progressDeadline(10), func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.NodeSelector = map[string]string{label: "yes"}
	}))
	before := map[string]map[string]rsState{}
	current := map[string]string{}
	for _, n := range []string{"web-a", "web-b"} {
		d := waitComplete(t, ns, n)
		before[n] = replicaSetsOf(t, env.kube, d)
		current[n] = currentReplicaSet(t, env.kube, d).Name
	}
	setNodeLabel(t, env.kube, label, "")

	name := "fail-" + ns[len(ns)-4:]
	applyRelease(t, fmt.Sprintf(`
name: %s
change: {images: {app: "nginx:1.26"}}
targets:
  - {name: a, namespace: %s, names: [web-a]}
  - {name: b, namespace: %s, names: [web-b]}
waves:
  - {name: one, targets: [a]}
  - {name: two, targets: [b]}
`, name, ns, ns))
	r := releaseResult(t, name)
	if r.Phase != release.PhaseRolledBack || !strings.Contains(r.Reason, "wave two: "+ns+"/web-b: rollout failed: ProgressDeadlineExceeded") {
		t.Fatalf("result %+v, want RolledBack for web-b's progress deadline", r)
	}
	for _, n := range []string{"web-a", "web-b"} {
		d := waitComplete(t, ns, n)
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.25" {
			t.Errorf("%s image %s, want nginx:1.25 back", n, img)
		}
		cur := currentReplicaSet(t, env.kube, d)
		after := replicaSetsOf(t, env.kube, d)
		old := before[n][current[n]]
		if cur.Name != current[n] || cur.UID != old.UID || after[cur.Name].Hash != old.Hash || *cur.Spec.Replicas != 3 {
			t.Errorf("%s: current replicaset %s (%s, %d replicas), want %s (%s) at 3", n, cur.Name, cur.UID, *cur.Spec.Replicas, current[n], old.UID)
		}
		if len(after) != 2 {
			t.Errorf("%s: replicasets %v, want the old one and the release's", n, after)
		}
		for rsName, s := range after {
			if rsName != current[n] && s.Replicas != 0 {
				t.Errorf("%s: the release's replicaset %s at %d replicas, want 0", n, rsName, s.Replicas)
			}
		}
		if d.Annotations[release.AnnotationRelease] != name || !strings.HasPrefix(d.Annotations[release.AnnotationRolledBack], name+": wave two") {
			t.Errorf("%s annotations: %s=%q %s=%q", n, release.AnnotationRelease, d.Annotations[release.AnnotationRelease], release.AnnotationRolledBack, d.Annotations[release.AnnotationRolledBack])
		}
		waitEvent(t, ns, n, "ReleaseRolledBack: Release "+name+" rolled back to revision 1's template: wave two")
	}
	waitEvent(t, ns, "web-b", "ReleaseFailed: Release "+name+" (wave two) failed here: rollout failed: ProgressDeadlineExceeded")
	st, err := queryRelease(name)
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != release.PhaseRolledBack || st.Targets[0].State != release.TargetRolledBack || st.Targets[1].State != release.TargetRolledBack ||
		st.Waves[0].State != release.WaveRolledBack || st.Waves[1].State != release.WaveRolledBack {
		t.Errorf("status %+v", st)
	}
	// Wave 2 was rolled back before wave 1: the restores' order in the history.
	var restored []string
	iter := env.tc.GetWorkflowHistory(ctx, release.WorkflowID(name), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "RestoreTemplate" {
			var in struct{ Name string }
			_ = json.Unmarshal(a.GetInput().GetPayloads()[0].GetData(), &in)
			restored = append(restored, in.Name)
		}
	}
	if strings.Join(restored, ",") != "web-b,web-a" {
		t.Errorf("restores %v, want web-b then web-a", restored)
	}
}

// setNodeLabel sets (or, with v empty, removes) a label on every node of a cluster.
func setNodeLabel(t *testing.T, kc kubernetes.Interface, key, v string) {
	t.Helper()
	nodes, err := kc.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list nodes: %v", err)
	}
	value := "null"
	if v != "" {
		value = `"` + v + `"`
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, key, value))
	for _, n := range nodes.Items {
		if _, err := kc.CoreV1().Nodes().Patch(context.Background(), n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("label node %s: %v", n.Name, err)
		}
	}
}

// TestReleaseApprovalByTwo: wave 1 needs two approvers. alice approves with `starter release
// approve --identity alice`; her second approval, sent with the plain Temporal CLI, is
// rejected, as is a malformed one; bob approves with `starter release approve --identity bob`.
// Both identities are in the history (the updates' accepted requests' meta.identity) and in
// the status, and the wave started only after bob's.
//
// The Temporal CLI v1.5.1 does not put its --identity into its requests (its client keeps the
// SDK's pid@host), so an approval sent with it carries its approver in the payload only.
func TestReleaseApprovalByTwo(t *testing.T) {
	if env.builtin {
		t.Skip("needs our worker")
	}
	ctx := context.Background()
	ns := newNamespace(t)
	create(t, newDeployment(ns, "web", 2, "nginx:1.25", rolling("1", "0")))
	waitComplete(t, ns, "web")
	name := "approve-" + ns[len(ns)-4:]
	id := release.WorkflowID(name)
	applyRelease(t, fmt.Sprintf(`
name: %s
change: {images: {app: "nginx:1.26"}}
targets: [{name: web, namespace: %s, names: [web]}]
waves: [{name: prod, targets: [web], approval: {approvers: 2}}]
`, name, ns))
	waitRelease(t, name, waitingFor(release.WaitingForApproval))
	if out, err := starterCmd(t, "release", "approve", name, "--identity", "alice"); err != nil {
		t.Fatalf("starter release approve --identity alice: %v\n%s", err, out)
	}
	// The same person under another spelling (names compare normalized: lower case, the part
	// before '@') is not a second approver.
	out, err := temporalCLIErr("workflow", "update", "execute", "--workflow-id", id, "--name", "approve", "--input", `{"approver":"Alice@bastion"}`, "--identity", "Alice@bastion")
	if err == nil || !strings.Contains(out, "already approved wave 1 (prod)") || !strings.Contains(out, "it needs 2 distinct approvers") {
		t.Errorf("alice's second approval: %v\n%s", err, out)
	}
	out, err = temporalCLIErr("workflow", "update", "execute", "--workflow-id", id, "--name", "approve", "--input", `{"approver":"carol","wave":"prod","extra":1}`, "--identity", "carol")
	if err == nil || !strings.Contains(out, "unknown field") || !strings.Contains(out, "extra") {
		t.Errorf("a malformed approval: %v\n%s", err, out)
	}
	if out, err := starterCmd(t, "release", "approve", name, "--wave", "other", "--identity", "bob"); err == nil || !strings.Contains(out, `wave \"other\" is not the current wave`) && !strings.Contains(out, `wave "other" is not the current wave`) {
		t.Errorf("an approval of another wave: %v\n%s", err, out)
	}
	time.Sleep(2 * time.Second)
	if d := getDeployment(t, ns, "web"); d.Spec.Template.Spec.Containers[0].Image != "nginx:1.25" {
		t.Fatalf("the wave started with one approval: image %s", d.Spec.Template.Spec.Containers[0].Image)
	}
	if out, err := starterCmd(t, "release", "approve", name, "--wave", "prod", "--identity", "bob"); err != nil {
		t.Fatalf("starter release approve: %v\n%s", err, out)
	}
	if r := releaseResult(t, name); r.Phase != release.PhaseSucceeded {
		t.Fatalf("result %+v", r)
	}
	waitComplete(t, ns, "web")

	var identities, approvers []string
	iter := env.tc.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetWorkflowExecutionUpdateAcceptedEventAttributes(); a != nil && a.GetAcceptedRequest().GetInput().GetName() == release.UpdateApprove {
			identities = append(identities, a.GetAcceptedRequest().GetMeta().GetIdentity())
			var req release.ApproveRequest
			_ = json.Unmarshal(a.GetAcceptedRequest().GetInput().GetArgs().GetPayloads()[0].GetData(), &req)
			approvers = append(approvers, req.Approver)
		}
	}
	if strings.Join(identities, ",") != "alice,bob" || strings.Join(approvers, ",") != "alice,bob" {
		t.Errorf("accepted approvals in the history: identities %v, approvers %v; want alice, bob", identities, approvers)
	}
	st, err := queryRelease(name)
	if err != nil {
		t.Fatal(err)
	}
	if a := st.Waves[0].Approvals; len(a) != 2 || a[0].Approver != "alice" || a[1].Approver != "bob" {
		t.Errorf("status approvals %+v", a)
	}
}

// TestReleaseInvalidFile: `starter release apply` names every problem of a bad file, exits 2
// and starts nothing; the same release started with the plain Temporal CLI fails at once with
// the same problems.
func TestReleaseInvalidFile(t *testing.T) {
	if env.builtin {
		t.Skip("needs our worker")
	}
	ns := newNamespace(t)
	name := "invalid-" + ns[len(ns)-4:]
	bad := fmt.Sprintf(`{"name":%q,"change":{"images":{"app":""}},
"targets":[{"name":"a","namespace":%q,"names":["web"]},{"name":"b","namespace":%q}],
"waves":[{"name":"w","targets":["a"],"bake":"-5s"},{"name":"x","targets":[]}],
"freeze":[{"cron":"0 25 * * *","duration":"1h","timeZone":"Nowhere/City"}]}`, name, ns, ns)
	path := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	problems := []string{
		`change.images[app]: image "" is empty`,
		"targets[1] (b): neither names nor selector is set",
		"targets (b): the group is in no wave",
		"waves[0] (w): bake -5s is negative",
		"waves[1] (x): no targets; an empty wave changes nothing",
		`freeze[0]: cron "0 25 * * *": hour: "25" is outside 0-23; timeZone "Nowhere/City"`,
	}
	out, err := starterCmd(t, "release", "apply", "-f", path)
	var exit interface{ ExitCode() int }
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(out, "invalid release, 6 problems:") {
		t.Errorf("starter release apply: %v, want exit 2 naming 6 problems\n%s", err, out)
	}
	for _, p := range problems {
		if !strings.Contains(out, "  - "+p) {
			t.Errorf("apply does not name %q:\n%s", p, out)
		}
	}
	_, err = env.tc.DescribeWorkflowExecution(context.Background(), release.WorkflowID(name), "")
	var notFound *serviceerror.NotFound
	if !errors.As(err, &notFound) {
		t.Errorf("describe %s after a rejected apply: %v, want NotFound", release.WorkflowID(name), err)
	}
	// The plain Temporal CLI starts it anyway: the workflow fails at once, naming them.
	recordHistoriesOf(t, release.WorkflowID(name))
	temporalCLI(t, "workflow", "start", "--task-queue", release.TaskQueue, "--type", release.WorkflowType,
		"--workflow-id", release.WorkflowID(name), "--input", bad)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = env.tc.GetWorkflow(ctx, release.WorkflowID(name), "").Get(ctx, nil)
	if err == nil {
		t.Fatal("the invalid release's workflow succeeded")
	}
	for _, p := range problems {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("the workflow's failure does not name %q: %v", p, err)
		}
	}
	if d, err := env.kube.AppsV1().Deployments(ns).List(context.Background(), metav1.ListOptions{}); err != nil || len(d.Items) != 0 {
		t.Errorf("deployments in %s: %v %v", ns, d, err)
	}
}

// TestReleaseFreezes: a fleet freeze holds a release before its first wave until `starter
// thaw`; then a release-level freeze window that covers its start holds it until the window
// ends (about 20s later).
func TestReleaseFreezes(t *testing.T) {
	if env.builtin {
		t.Skip("needs our worker")
	}
	ns := newNamespace(t)
	create(t, newDeployment(ns, "web", 2, "nginx:1.25", rolling("1", "0")))
	waitComplete(t, ns, "web")

	// Fleet freeze.
	out, err := starterCmd(t, "freeze", "--until", "30m", "--reason", "e2e freeze "+ns, "--identity", "ops")
	if err != nil {
		t.Fatalf("starter freeze: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = starterCmd(t, "thaw") })
	var ff release.FleetFreeze
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &ff); err != nil || !ff.Frozen || ff.By != "ops" || ff.Reason != "e2e freeze "+ns {
		t.Fatalf("freeze printed %s (%v)", out, err)
	}
	name := "freeze-" + ns[len(ns)-4:]
	applyRelease(t, fmt.Sprintf(`
name: %s
change: {images: {app: "nginx:1.26"}}
targets: [{name: web, namespace: %s, names: [web]}]
waves: [{name: one, targets: [web]}]
`, name, ns))
	st := waitRelease(t, name, waitingFor(release.WaitingForFleetFreeze))
	if st.FreezeReason != "e2e freeze "+ns || st.FrozenUntil == nil {
		t.Errorf("held: reason %q until %v", st.FreezeReason, st.FrozenUntil)
	}
	time.Sleep(3 * time.Second)
	if img := getDeployment(t, ns, "web").Spec.Template.Spec.Containers[0].Image; img != "nginx:1.25" {
		t.Fatalf("changed during the fleet freeze: %s", img)
	}
	desc, err := env.tc.DescribeWorkflowExecution(context.Background(), release.FleetFreezeID, "")
	if err != nil {
		t.Fatal(err)
	}
	var frozen bool
	if f := desc.WorkflowExecutionInfo.GetMemo().GetFields()["frozen"]; f == nil || json.Unmarshal(f.Data, &frozen) != nil || !frozen {
		t.Errorf("freeze/fleet memo frozen = %v", desc.WorkflowExecutionInfo.GetMemo())
	}
	thawed := time.Now()
	if out, err := starterCmd(t, "thaw", "--identity", "ops"); err != nil {
		t.Fatalf("starter thaw: %v\n%s", err, out)
	}
	if out, err := starterCmd(t, "thaw"); err == nil || !strings.Contains(out, "the fleet is not frozen") {
		t.Errorf("a second thaw: %v\n%s", err, out)
	}
	// freeze/fleet runs on (visibility lists no history length for it): recorded as it is now.
	if dir := os.Getenv("E2E_RECORD_HISTORIES"); dir != "" {
		out := temporalCLI(t, "workflow", "show", "--workflow-id", release.FleetFreezeID, "-o", "json")
		if err := os.WriteFile(filepath.Join(dir, "freeze-fleet-"+ns[len(ns)-4:]+".json"), []byte(out), 0o644); err != nil {
			t.Error(err)
		}
	}
	if r := releaseResult(t, name); r.Phase != release.PhaseSucceeded {
		t.Fatalf("result %+v", r)
	}
	d := waitComplete(t, ns, "web")
	if at := currentReplicaSet(t, env.kube, d).CreationTimestamp.Time; at.Before(thawed.Truncate(time.Second)) {
		t.Errorf("the new replicaset was created at %s, before the thaw at %s", at, thawed)
	}

	// A freeze window: it began at least 50s ago, on a whole minute (UTC), and ends about 20s
	// from now.
	now := time.Now().UTC()
	start := now.Add(-50 * time.Second).Truncate(time.Minute)
	end := now.Add(20 * time.Second).Truncate(time.Second)
	name2 := "window-" + ns[len(ns)-4:]
	applyRelease(t, fmt.Sprintf(`
name: %s
change: {images: {app: "nginx:1.27"}}
targets: [{name: web, namespace: %s, names: [web]}]
waves: [{name: one, targets: [web]}]
freeze: [{cron: "%d %d * * *", duration: %s, timeZone: UTC, reason: "change window closed"}]
`, name2, ns, start.Minute(), start.Hour(), end.Sub(start)))
	st = waitRelease(t, name2, waitingFor(release.WaitingForFreeze))
	if st.FreezeReason != "change window closed" || st.FrozenUntil == nil || !st.FrozenUntil.Equal(end) {
		t.Errorf("held by the window: reason %q until %v, want until %s", st.FreezeReason, st.FrozenUntil, end)
	}
	if r := releaseResult(t, name2); r.Phase != release.PhaseSucceeded {
		t.Fatalf("result %+v", r)
	}
	d = waitComplete(t, ns, "web")
	if at := currentReplicaSet(t, env.kube, d).CreationTimestamp.Time; at.Before(end) {
		t.Errorf("the window's release created its replicaset at %s, before the window's end %s", at, end)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.27" {
		t.Errorf("image %s, want nginx:1.27", img)
	}
}

// TestReleaseTwoClusters: one release across the suite's cluster ("") and cluster "b". Wave 1
// is web-a (cluster "") and web-b (cluster b, a stepped rollout: 50%, then a 20s pause), wave 2
// web-c (cluster b, the same steps). Mid wave 1, at web-b's 50%, b's worker is SIGKILLed and
// started again; mid wave 2, at web-c's 50%, b's kube-apiserver is stopped for 12s. The release
// still succeeds, in order. A second release then fails in wave 2 (web-c's new pods cannot be
// placed: its nodeSelector label is gone from b's nodes; progress deadline 10s) and rolls back
// web-c, web-b and web-a, across both clusters, to their exact ReplicaSets.
func TestReleaseTwoClusters(t *testing.T) {
	if env.builtin {
		t.Skip("needs our worker")
	}
	ctx := context.Background()
	b := startCluster(t, "b")
	a := &testCluster{name: "", kube: env.kube}
	ns := newNamespace(t)
	createNamespaceIn(t, b, ns)
	label := "release-e2e-" + ns[len(ns)-4:]
	setNodeLabel(t, b.kube, label, "yes")
	t.Cleanup(func() { setNodeLabel(t, b.kube, label, "") })
	steps := func(d *appsv1.Deployment) {
		d.Annotations = mergeMap(d.Annotations, k8s.StepsAnnotation, `[{"setWeight":50},{"pause":{"duration":"20s"}}]`)
	}
	onlyLabelled := func(d *appsv1.Deployment) { d.Spec.Template.Spec.NodeSelector = map[string]string{label: "yes"} }
	for _, c := range []struct {
		cluster *testCluster
		d       *appsv1.Deployment
	}{
		{a, newDeployment(ns, "web-a", 4, "nginx:1.25", rolling("1", "0"))},
		{b, newDeployment(ns, "web-b", 4, "nginx:1.25", rolling("1", "0"), steps)},
		{b, newDeployment(ns, "web-c", 4, "nginx:1.25", rolling("1", "0"), steps, onlyLabelled)},
	} {
		if _, err := c.cluster.kube.AppsV1().Deployments(ns).Create(ctx, c.d, metav1.CreateOptions{}); err != nil {
			t.Fatalf("cluster %q: create %s: %v", c.cluster.name, c.d.Name, err)
		}
	}
	completeIn(t, a, ns, "web-a")
	completeIn(t, b, ns, "web-b")
	completeIn(t, b, ns, "web-c")

	spec := func(name, image string) string {
		return fmt.Sprintf(`
name: %s
change: {images: {app: %q}}
targets:
  - {name: a, namespace: %s, names: [web-a]}
  - {name: b, cluster: b, namespace: %s, names: [web-b]}
  - {name: c, cluster: b, namespace: %s, names: [web-c]}
waves:
  - {name: one, targets: [a, b], maxConcurrent: 2}
  - {name: two, targets: [c]}
clusterTimeout: 5m
`, name, image, ns, ns, ns)
	}

	// Release 1, with b's worker killed mid wave 1 and b's API server down mid wave 2.
	name := "two-" + ns[len(ns)-4:]
	applyRelease(t, spec(name, "nginx:1.26"))
	waitWeight(t, b, ns, "web-b", "nginx:1.26", "nginx:1.25")
	killClusterWorker(t, b)
	time.Sleep(3 * time.Second)
	if st, err := queryRelease(name); err != nil || st.Wave != 1 || st.Targets[1].State != release.TargetUpdating {
		t.Errorf("with b's worker dead: %+v %v, want wave 1 with web-b updating", st, err)
	}
	startClusterWorker(t, b)
	waitWeight(t, b, ns, "web-c", "nginx:1.26", "nginx:1.25")
	b.k.StopAPIServer()
	down := time.Now()
	time.Sleep(12 * time.Second)
	if st, err := queryRelease(name); err != nil || st.Wave != 2 || st.Targets[2].State != release.TargetUpdating {
		t.Errorf("with b's API server down: %+v %v, want wave 2 with web-c updating", st, err)
	}
	if err := b.k.StartAPIServer(ctx); err != nil {
		t.Fatalf("start cluster b's kube-apiserver: %v", err)
	}
	t.Logf("cluster b's kube-apiserver was down %s", time.Since(down).Round(time.Second))
	// As TestTwoClusters: a real kube-controller-manager cut off past its leader election's
	// renew deadline restarts; the stack's runs without leader election.
	if err := b.k.RestartControllerManager(float32(env.qps), env.burst); err != nil {
		t.Fatalf("restart cluster b's kube-controller-manager: %v", err)
	}
	if r := releaseResult(t, name); r.Phase != release.PhaseSucceeded {
		t.Fatalf("release 1: %+v, want Succeeded", r)
	}
	dA, dB, dC := completeIn(t, a, ns, "web-a"), completeIn(t, b, ns, "web-b"), completeIn(t, b, ns, "web-c")
	for _, x := range []struct {
		c *testCluster
		d *appsv1.Deployment
	}{{a, dA}, {b, dB}, {b, dC}} {
		if got := imagesOf(t, x.c.kube, x.d); got != "nginx:1.25=0 nginx:1.26=4" {
			t.Errorf("cluster %q %s: replicasets %s, want nginx:1.25=0 nginx:1.26=4", x.c.name, x.d.Name, got)
		}
	}
	// Wave 2 started after wave 1 completed: web-c's new ReplicaSet after web-b's 20s pause.
	if gap := currentReplicaSet(t, b.kube, dC).CreationTimestamp.Sub(currentReplicaSet(t, b.kube, dB).CreationTimestamp.Time); gap < 20*time.Second {
		t.Errorf("web-c's new ReplicaSet %s after web-b's, want after web-b's 20s pause", gap)
	}
	for _, d := range []*appsv1.Deployment{dA, dB, dC} {
		if d.Annotations[release.AnnotationRelease] != name {
			t.Errorf("%s: annotation %s = %q", d.Name, release.AnnotationRelease, d.Annotations[release.AnnotationRelease])
		}
	}

	// Release 2 fails in wave 2 and rolls back both waves in both clusters.
	updateIn(t, b, ns, "web-c", func(d *appsv1.Deployment) { s := int32(10); d.Spec.ProgressDeadlineSeconds = &s })
	completeIn(t, b, ns, "web-c")
	setNodeLabel(t, b.kube, label, "")
	type rsBefore struct {
		current string
		all     map[string]rsState
	}
	before := map[string]rsBefore{}
	for _, c := range []struct {
		cluster *testCluster
		name    string
	}{{a, "web-a"}, {b, "web-b"}, {b, "web-c"}} {
		d := getIn(t, c.cluster, ns, c.name)
		before[c.name] = rsBefore{current: currentReplicaSet(t, c.cluster.kube, d).Name, all: replicaSetsOf(t, c.cluster.kube, d)}
	}
	name2 := "two-fail-" + ns[len(ns)-4:]
	applyRelease(t, spec(name2, "nginx:1.27"))
	r := releaseResult(t, name2)
	if r.Phase != release.PhaseRolledBack || !strings.Contains(r.Reason, "wave two: b:"+ns+"/web-c: rollout failed") {
		t.Fatalf("release 2: %+v, want RolledBack for web-c", r)
	}
	for _, c := range []struct {
		cluster *testCluster
		name    string
	}{{a, "web-a"}, {b, "web-b"}, {b, "web-c"}} {
		d := completeIn(t, c.cluster, ns, c.name)
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.26" {
			t.Errorf("cluster %q %s: image %s, want nginx:1.26 back", c.cluster.name, c.name, img)
		}
		cur := currentReplicaSet(t, c.cluster.kube, d)
		old := before[c.name].all[before[c.name].current]
		if cur.Name != before[c.name].current || cur.UID != old.UID || cur.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != old.Hash || *cur.Spec.Replicas != 4 {
			t.Errorf("cluster %q %s: current replicaset %s (%s) at %d, want %s (%s) at 4", c.cluster.name, c.name, cur.Name, cur.UID, *cur.Spec.Replicas, before[c.name].current, old.UID)
		}
		for rsName, s := range replicaSetsOf(t, c.cluster.kube, d) {
			if rsName != cur.Name && s.Replicas != 0 {
				t.Errorf("cluster %q %s: replicaset %s at %d, want 0", c.cluster.name, c.name, rsName, s.Replicas)
			}
		}
		if !strings.HasPrefix(d.Annotations[release.AnnotationRolledBack], name2+": wave two") {
			t.Errorf("cluster %q %s: %s = %q", c.cluster.name, c.name, release.AnnotationRolledBack, d.Annotations[release.AnnotationRolledBack])
		}
	}
	st, err := queryRelease(name2)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tg := range st.Targets {
		got = append(got, fmt.Sprintf("%s:%s %s", tg.Cluster, tg.Name, tg.State))
	}
	if want := ":web-a RolledBack, b:web-b RolledBack, b:web-c RolledBack"; strings.Join(got, ", ") != want {
		t.Errorf("targets %v, want %s", got, want)
	}
}

// TestReleasePauseSkipBakeAbort, with `starter release`: resume is rejected while not
// paused; pause during wave 1's bake, then skip-bake ends the bake and the pause holds wave 2;
// abort rolls web-a back to its exact ReplicaSet and leaves web-b (wave 2) untouched; the
// reason is on the release and on web-a.
func TestReleasePauseSkipBakeAbort(t *testing.T) {
	if env.builtin {
		t.Skip("needs our worker")
	}
	ns := newNamespace(t)
	create(t, newDeployment(ns, "web-a", 2, "nginx:1.25", rolling("1", "0")))
	create(t, newDeployment(ns, "web-b", 2, "nginx:1.25", rolling("1", "0")))
	dA := waitComplete(t, ns, "web-a")
	waitComplete(t, ns, "web-b")
	beforeA := currentReplicaSet(t, env.kube, dA)
	name := "abort-" + ns[len(ns)-4:]
	applyRelease(t, fmt.Sprintf(`
name: %s
change: {images: {app: "nginx:1.26"}}
targets:
  - {name: a, namespace: %s, names: [web-a]}
  - {name: b, namespace: %s, names: [web-b]}
waves:
  - {name: one, targets: [a], bake: 10m}
  - {name: two, targets: [b]}
`, name, ns, ns))
	waitRelease(t, name, waitingFor(release.WaitingForBake))
	run := func(args ...string) string {
		t.Helper()
		out, err := starterCmd(t, append([]string{"release"}, args...)...)
		if err != nil {
			t.Fatalf("starter release %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	if out, err := starterCmd(t, "release", "resume", name); err == nil || !strings.Contains(out, "the release is not paused") {
		t.Errorf("resume while not paused: %v\n%s", err, out)
	}
	run("pause", name, "--reason", "e2e hold")
	run("skip-bake", name)
	st := waitRelease(t, name, waitingFor(release.WaitingForResume))
	if !st.Paused || st.PauseReason != "e2e hold" || st.Wave != 2 {
		t.Errorf("after skip-bake while paused: %+v, want wave 2 held by the pause", st)
	}
	out := run("abort", name, "--reason", "e2e abort")
	var got release.Status
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &got); err != nil || got.FailureReason != "aborted: e2e abort" {
		t.Errorf("abort printed %s (%v)", out, err)
	}
	if r := releaseResult(t, name); r.Phase != release.PhaseRolledBack || r.Reason != "aborted: e2e abort" {
		t.Fatalf("result %+v", r)
	}
	dA = waitComplete(t, ns, "web-a")
	if cur := currentReplicaSet(t, env.kube, dA); cur.Name != beforeA.Name || cur.UID != beforeA.UID || *cur.Spec.Replicas != 2 {
		t.Errorf("web-a's current replicaset %s (%s) at %d, want %s (%s) at 2", cur.Name, cur.UID, *cur.Spec.Replicas, beforeA.Name, beforeA.UID)
	}
	if d := getDeployment(t, ns, "web-b"); d.Generation != 1 || d.Annotations[release.AnnotationRelease] != "" {
		t.Errorf("web-b changed: generation %d, annotations %v", d.Generation, d.Annotations)
	}
	waitEvent(t, ns, "web-a", "ReleaseRolledBack: Release "+name+" rolled back to revision 1's template: aborted: e2e abort")
}
