//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/converter"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// createServices creates the Services a blue-green Deployment "web" switches, selecting
// app=web (the workflow adds pod-template-hash).
func createServices(t *testing.T, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": "web"},
				Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}
		if _, err := env.kube.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create service %s/%s: %v", ns, name, err)
		}
	}
}

// selects is a Service's selector, "app=web,pod-template-hash=..." sorted.
func selects(t *testing.T, ns, name string) string {
	t.Helper()
	svc, err := env.kube.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get service %s/%s: %v", ns, name, err)
	}
	return fmt.Sprintf("app=%s,pod-template-hash=%s", svc.Spec.Selector["app"], svc.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey])
}

func sel(hash string) string { return "app=web,pod-template-hash=" + hash }

// bgState is what a test checks at each phase: the ReplicaSets (sizes' format) and the two
// Services' selectors.
func bgState(t *testing.T, ns string) string {
	return fmt.Sprintf("replicasets %s; active %s; preview %s", sizes(t, ns), selects(t, ns, "web"), selects(t, ns, "web-preview"))
}

// waitBlueGreen waits for a phase (and what it waits for) with the exact state want (bgState's
// format), and returns the status.
func waitBlueGreen(t *testing.T, ns, phase, waiting, want string) contract.Status {
	t.Helper()
	var st contract.Status
	eventually(t, 90*time.Second, func() string {
		st = queryStatus(t, ns, "web")
		if bg := st.BlueGreen; bg == nil || bg.Phase != phase || bg.WaitingFor != waiting {
			return fmt.Sprintf("blueGreen %+v, want phase %s waiting for %q", st.BlueGreen, phase, waiting)
		}
		if got := bgState(t, ns); got != want {
			return fmt.Sprintf("%s, want %s", got, want)
		}
		return ""
	})
	return st
}

// memoBlueGreen is the blueGreen field of the workflow's memo.
func memoBlueGreen(t *testing.T, id string) contract.BlueGreenStatus {
	t.Helper()
	resp, err := env.tc.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	var bg contract.BlueGreenStatus
	p := resp.GetWorkflowExecutionInfo().GetMemo().GetFields()["blueGreen"]
	if p == nil {
		t.Fatalf("memo of %s has no blueGreen", id)
	}
	if err := converter.GetDefaultDataConverter().FromPayload(p, &bg); err != nil {
		t.Fatalf("decode memo blueGreen: %v", err)
	}
	return bg
}

// pausedBlueGreen is newBlueGreen with annotation, then nginx:1.26 rolled out up to the pause
// before promotion, both stacks at 3 with the preview Service on the new pods; it returns the
// two templates' hashes.
func pausedBlueGreen(t *testing.T, ns, annotation string) (h1, h2 string) {
	t.Helper()
	h1 = newBlueGreen(t, ns, annotation)
	setImage(t, ns, "web", "nginx:1.26")
	h2 = waitPausedHash(t, ns)
	waitBlueGreen(t, ns, contract.BlueGreenPaused, contract.WaitingForPromote,
		fmt.Sprintf("replicasets nginx:1.26=3/3 nginx:1.25=3/3; active %s; preview %s", sel(h1), sel(h2)))
	return h1, h2
}

// waitPausedHash waits for the blue-green rollout to pause before promotion and returns the
// hash of the template it rolls out.
func waitPausedHash(t *testing.T, ns string) string {
	t.Helper()
	var hash string
	eventually(t, 60*time.Second, func() string {
		st := queryStatus(t, ns, "web")
		if st.BlueGreen == nil || st.BlueGreen.Phase != contract.BlueGreenPaused {
			return fmt.Sprintf("blueGreen %+v, want paused", st.BlueGreen)
		}
		hash = st.BlueGreen.Hash
		return ""
	})
	return hash
}

// rsReplicasOf is the spec.replicas of the ReplicaSet running image.
func rsReplicasOf(t *testing.T, ns, image string) int32 {
	t.Helper()
	for _, rs := range replicaSets(t, ns) {
		if rs.Spec.Template.Spec.Containers[0].Image == image {
			return *rs.Spec.Replicas
		}
	}
	return -1
}

// newBlueGreen creates Services web and web-preview and a 3-replica Deployment web with the
// blue-green annotation, waits for its first rollout and for both Services to select it, and
// returns the first template's hash.
func newBlueGreen(t *testing.T, ns, annotation string, opts ...deployOpt) string {
	t.Helper()
	recordHistories(t, ns, "web")
	createServices(t, ns, "web", "web-preview")
	opts = append([]deployOpt{rolling("25%", "25%"), withAnnotation(k8s.BlueGreenAnnotation, annotation)}, opts...)
	create(t, newDeployment(ns, "web", 3, "nginx:1.25", opts...))
	waitComplete(t, ns, "web")
	h1 := hashOf(t, ns, "nginx:1.25")
	eventually(t, 60*time.Second, func() string {
		if got, want := bgState(t, ns), "replicasets nginx:1.25=3/3; active "+sel(h1)+"; preview "+sel(h1); got != want {
			return fmt.Sprintf("at rest: %s, want %s", got, want)
		}
		return ""
	})
	return h1
}

// TestBlueGreen drives blue-green rollouts on the real stack and checks the ReplicaSets and
// the Services' selectors at each phase: promote from the plain Temporal CLI and the
// scale-down delay, an instant rollback to the warm ReplicaSet, autoPromotionSeconds, abort,
// pre- and post-promotion analysis, a worker SIGKILL during the automatic promotion's wait,
// and an invalid annotation.
func TestBlueGreen(t *testing.T) {
	t.Run("promote and scale-down delay", func(t *testing.T) {
		ns := newNamespace(t)
		hook := newWebhook(t)
		h1 := newBlueGreen(t, ns, `{"activeService":"web","previewService":"web-preview","autoPromotionEnabled":false,"scaleDownDelaySeconds":15}`,
			withAnnotation(k8s.NotifyAnnotation, fmt.Sprintf(`{"url":%q,"events":["paused","promoted","completed"]}`, hook.url)))
		obs := observe(t, ns, 6, 3)
		setImage(t, ns, "web", "nginx:1.26")

		// Both stacks full, the preview on the new pods, the active Service on the old ones.
		h2 := ""
		eventually(t, 60*time.Second, func() string {
			for _, rs := range replicaSets(t, ns) {
				if rs.Spec.Template.Spec.Containers[0].Image == "nginx:1.26" {
					h2 = rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
				}
			}
			if h2 == "" {
				return "no new replicaset yet"
			}
			return ""
		})
		st := waitBlueGreen(t, ns, contract.BlueGreenPaused, contract.WaitingForPromote,
			fmt.Sprintf("replicasets nginx:1.26=3/3 nginx:1.25=3/3; active %s; preview %s", sel(h1), sel(h2)))
		if bg := st.BlueGreen; bg.Hash != h2 || bg.StableHash != h1 || bg.ActiveSelects != h1 || bg.PreviewSelects != h2 || bg.Promoted {
			t.Errorf("status blueGreen %+v, want hash %s, stable %s, not promoted", bg, h2, h1)
		}
		d := getDeployment(t, ns, "web")
		if c := k8s.GetCondition(d.Status, appsv1.DeploymentProgressing); c == nil || c.Reason != k8s.CanaryPausedReason || !strings.Contains(c.Message, "paused until promoted") {
			t.Errorf("Progressing condition = %+v, want CanaryPaused, paused until promoted", c)
		}
		out, err := runKubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=2s")
		if err == nil || !strings.Contains(out, "Waiting for deployment \"web\" rollout to finish: 3 old replicas are pending termination") {
			t.Errorf("kubectl rollout status before promotion: %v\n%s\nwant it waiting on the 3 old replicas", err, out)
		}
		id := workflowID(ns, "web")
		eventually(t, 30*time.Second, func() string {
			return listed(t, fmt.Sprintf(`%s = "%s" AND WorkflowId = "%s"`, contract.SearchAttrWaitingFor, contract.WaitingForPromote, id), id)
		})
		// The memo (the Temporal UI) and `starter status` show the phase.
		if bg := memoBlueGreen(t, id); bg.Phase != contract.BlueGreenPaused || bg.WaitingFor != contract.WaitingForPromote || bg.PreviewSelects != h2 {
			t.Errorf("memo blueGreen %+v, want Paused waiting for promote, preview on %s", bg, h2)
		}
		out, err = starterCmd(t, "status", ns+"/web")
		for _, want := range []string{"Blue-green:", "Paused, template " + h2, "Promote (starter promote " + ns + "/web)", "web → pod-template-hash " + h1, "web-preview → pod-template-hash " + h2} {
			if err != nil || !strings.Contains(out, want) {
				t.Errorf("starter status: %v\n%s\nwant %q", err, out, want)
			}
		}
		time.Sleep(2 * time.Second)
		if got, want := bgState(t, ns), fmt.Sprintf("replicasets nginx:1.26=3/3 nginx:1.25=3/3; active %s; preview %s", sel(h1), sel(h2)); got != want {
			t.Errorf("while paused: %s, want unchanged %s", got, want)
		}

		// The webhook is told the rollout waits for promote.
		if n := hook.wait(t, ns, k8s.NotifyPaused, 2); n.Reason != "BlueGreenPhase" || !strings.Contains(n.Message, "paused until promoted") {
			t.Errorf("paused notification %+v, want the Paused phase's", n)
		}

		out, err = updateCLI(ns, "web", contract.UpdatePromote)
		if err != nil {
			t.Fatalf("temporal workflow update execute --name promote: %v\n%s", err, out)
		}
		// The active Service switches; the old ReplicaSet stays at full size for the delay.
		st = waitBlueGreen(t, ns, contract.BlueGreenScaleDownDelay, contract.WaitingForTimer,
			fmt.Sprintf("replicasets nginx:1.26=3/3 nginx:1.25=3/3; active %s; preview %s", sel(h2), sel(h2)))
		until := *st.BlueGreen.Until
		t.Logf("scale-down delay until %s", until.Format(time.RFC3339Nano))
		if left := time.Until(until); left > 5*time.Second {
			time.Sleep(left - 4*time.Second)
			if n := rsReplicasOf(t, ns, "nginx:1.25"); n != 3 {
				t.Errorf("old replicaset at %d replicas %s before the delay ends, want 3 (warm)", n, time.Until(until).Round(time.Millisecond))
			}
		}
		out, err = runKubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=2s")
		if err == nil || !strings.Contains(out, "3 old replicas are pending termination") {
			t.Errorf("kubectl rollout status in the scale-down delay: %v\n%s\nwant it waiting on the 3 old replicas", err, out)
		}
		out, err = updateCLI(ns, "web", contract.UpdatePromote)
		if err == nil || !strings.Contains(out, "already promoted") {
			t.Errorf("promote during the scale-down delay: %v %s, want rejected", err, out)
		}
		eventually(t, 60*time.Second, func() string {
			if n := rsReplicasOf(t, ns, "nginx:1.25"); n != 0 {
				return fmt.Sprintf("old replicaset at %d", n)
			}
			return ""
		})
		if scaled := time.Now(); scaled.Before(until) {
			t.Errorf("old replicaset scaled down at %s, before the delay ended at %s", scaled.Format(time.RFC3339Nano), until)
		}
		waitComplete(t, ns, "web")
		out, err = runKubectl("rollout", "status", "deployment/web", "-n", ns, "--timeout=10s")
		if err != nil || !strings.Contains(out, "successfully rolled out") {
			t.Errorf("kubectl rollout status after the delay: %v\n%s", err, out)
		}
		hook.wait(t, ns, k8s.NotifyPromoted, 2)
		hook.wait(t, ns, k8s.NotifyCompleted, 2)
		var notified []string
		for _, n := range hook.all(ns) {
			notified = append(notified, fmt.Sprintf("%s:%d", n.Event, n.Revision))
		}
		sort.Strings(notified)
		if got, want := strings.Join(notified, ","), "completed:1,completed:2,paused:2,promoted:2"; got != want {
			t.Errorf("notifications %s, want %s (the first rollout's completion, then the events asked for)", got, want)
		}
		eventually(t, 30*time.Second, func() string {
			if got, want := bgState(t, ns), fmt.Sprintf("replicasets nginx:1.26=3/3 nginx:1.25=0/0; active %s; preview %s", sel(h2), sel(h2)); got != want {
				return fmt.Sprintf("after the rollout: %s, want %s", got, want)
			}
			if st := queryStatus(t, ns, "web"); st.BlueGreen == nil || st.BlueGreen.Phase != "" || st.BlueGreen.ActiveSelects != h2 {
				return fmt.Sprintf("status blueGreen %+v, want at rest on %s", st.BlueGreen, h2)
			}
			return ""
		})
		obs.stop()
		for _, want := range []string{
			"BlueGreenStarted: Rolling out template " + h2,
			"PreviewSwitched: Preview Service web-preview selects pod-template-hash " + h2,
			"BlueGreenPhase: Blue-green: preview ready, paused until promoted",
			"RolloutPromoted: Promoted: the active Service web switches to template " + h2,
			"ActiveSwitched: Active Service web selects pod-template-hash " + h2,
			"BlueGreenPhase: Blue-green: active Service web on template " + h2 + "; the old ReplicaSet stays warm until",
			"OldReplicaSetScaledDown: Blue-green: the old ReplicaSet is scaled down",
		} {
			waitEvent(t, ns, "web", want)
		}
	})

	for _, how := range []string{"kubectl rollout undo", "rollback signal"} {
		t.Run("instant rollback to the warm replicaset by "+how, func(t *testing.T) {
			ns := newNamespace(t)
			h1 := newBlueGreen(t, ns, `{"activeService":"web","previewService":"web-preview","scaleDownDelaySeconds":300}`)
			setImage(t, ns, "web", "nginx:1.26")
			h2 := ""
			eventually(t, 60*time.Second, func() string {
				st := queryStatus(t, ns, "web")
				if st.BlueGreen == nil || st.BlueGreen.Hash == "" {
					return "no blue-green rollout yet"
				}
				h2 = st.BlueGreen.Hash
				return ""
			})
			// autoPromotionEnabled (the default) promotes as soon as the preview is ready.
			waitBlueGreen(t, ns, contract.BlueGreenScaleDownDelay, contract.WaitingForTimer,
				fmt.Sprintf("replicasets nginx:1.26=3/3 nginx:1.25=3/3; active %s; preview %s", sel(h2), sel(h2)))
			waitEvent(t, ns, "web", "RolloutPromoted: Promoted automatically (autoPromotionEnabled)")

			obs := observe(t, ns, 6, 3)
			start := time.Now()
			if how == "kubectl rollout undo" {
				if out, err := runKubectl("rollout", "undo", "deployment/web", "-n", ns); err != nil {
					t.Fatalf("kubectl rollout undo: %v\n%s", err, out)
				}
			} else {
				signal(t, ns, "web", contract.SignalRollback, `{"revision":0}`)
			}
			var switched time.Duration
			var oldMin int32 = 3
			eventually(t, 60*time.Second, func() string {
				oldMin = min(oldMin, rsReplicasOf(t, ns, "nginx:1.25"))
				if selects(t, ns, "web") != sel(h1) {
					return "active Service still on " + selects(t, ns, "web")
				}
				switched = time.Since(start)
				return ""
			})
			t.Logf("rollback to the warm replicaset: the active Service selected it again %s after the %s", switched.Round(time.Millisecond), how)
			if switched > 20*time.Second {
				t.Errorf("rollback to the warm replicaset took %s; want it at once", switched)
			}
			waitComplete(t, ns, "web")
			eventually(t, 60*time.Second, func() string {
				if got, want := bgState(t, ns), fmt.Sprintf("replicasets nginx:1.25=3/3 nginx:1.26=0/0; active %s; preview %s", sel(h1), sel(h1)); got != want {
					return fmt.Sprintf("after the rollback: %s, want %s", got, want)
				}
				return ""
			})
			obs.stop()
			// The warm ReplicaSet was never scaled: no scale-up was needed.
			if oldMin != 3 || obs.worstTotal > 6 {
				t.Errorf("the warm replicaset went down to %d (worst Σ spec %d); want it at 3 throughout", oldMin, obs.worstTotal)
			}
			if img := getDeployment(t, ns, "web").Spec.Template.Spec.Containers[0].Image; img != "nginx:1.25" {
				t.Errorf("image after the undo = %s, want nginx:1.25", img)
			}
			waitEvent(t, ns, "web", "ActiveSwitched: Active Service web selects pod-template-hash "+h1)
		})
	}

	t.Run("autoPromotionSeconds survives a worker SIGKILL", func(t *testing.T) {
		ns := newNamespace(t)
		// previewReplicaCount 1: one new pod before promotion, all three after, and the active
		// Service switches once all three are available.
		h1 := newBlueGreen(t, ns, `{"activeService":"web","previewService":"web-preview","autoPromotionSeconds":20,"scaleDownDelaySeconds":3,"previewReplicaCount":1}`)
		setImage(t, ns, "web", "nginx:1.26")
		h2 := ""
		eventually(t, 60*time.Second, func() string {
			st := queryStatus(t, ns, "web")
			if st.BlueGreen == nil || st.BlueGreen.Hash == "" {
				return "no blue-green rollout yet"
			}
			h2 = st.BlueGreen.Hash
			return ""
		})
		st := waitBlueGreen(t, ns, contract.BlueGreenPaused, contract.WaitingForTimer,
			fmt.Sprintf("replicasets nginx:1.26=1/1 nginx:1.25=3/3; active %s; preview %s", sel(h1), sel(h2)))
		until := *st.BlueGreen.Until
		env.stack.KillProcess("worker")
		time.Sleep(5 * time.Second)
		if got, want := bgState(t, ns), fmt.Sprintf("replicasets nginx:1.26=1/1 nginx:1.25=3/3; active %s; preview %s", sel(h1), sel(h2)); got != want {
			t.Errorf("worker down during the wait: %s, want unchanged %s", got, want)
		}
		if err := startWorker(); err != nil {
			t.Fatal(err)
		}
		if st := queryStatus(t, ns, "web"); st.BlueGreen == nil || st.BlueGreen.Until == nil || !st.BlueGreen.Until.Equal(until) {
			t.Errorf("after the restart: blueGreen %+v, want the same promotion time %s", st.BlueGreen, until)
		}
		eventually(t, 60*time.Second, func() string {
			if selects(t, ns, "web") != sel(h2) {
				return "active Service still on " + selects(t, ns, "web")
			}
			return ""
		})
		switched := time.Now()
		for _, rs := range replicaSets(t, ns) {
			if rs.Spec.Template.Spec.Containers[0].Image == "nginx:1.26" && (*rs.Spec.Replicas != 3 || rs.Status.AvailableReplicas != 3) {
				t.Errorf("active Service switched with the new replicaset at %d replicas, %d available; want all 3 available", *rs.Spec.Replicas, rs.Status.AvailableReplicas)
			}
		}
		if switched.Before(until) {
			t.Errorf("active Service switched at %s, before the automatic promotion at %s", switched.Format(time.RFC3339Nano), until)
		}
		if late := switched.Sub(until); late > 15*time.Second {
			t.Errorf("active Service switched %s after the automatic promotion was due; want only the time left waited", late)
		}
		waitComplete(t, ns, "web")
		if got, want := bgState(t, ns), fmt.Sprintf("replicasets nginx:1.26=3/3 nginx:1.25=0/0; active %s; preview %s", sel(h2), sel(h2)); got != want {
			t.Errorf("after the rollout: %s, want %s", got, want)
		}
		waitEvent(t, ns, "web", "RolloutPromoted: Promoted automatically after autoPromotionSeconds 20")
	})

	t.Run("abort before promotion", func(t *testing.T) {
		// The preview's pods stay abortScaleDownDelaySeconds (8) once both Services are back
		// on the stable pods, then go.
		ns := newNamespace(t)
		h1, _ := pausedBlueGreen(t, ns, `{"activeService":"web","previewService":"web-preview","autoPromotionEnabled":false,"abortScaleDownDelaySeconds":8}`)
		aborted := time.Now()
		if out, err := updateCLI(ns, "web", contract.UpdateAbort, `{"reason":"preview looks wrong"}`); err != nil {
			t.Fatalf("abort: %v\n%s", err, out)
		}
		// Held: the template and both Services back on the stable pods, the preview's still up.
		var until time.Time
		eventually(t, 60*time.Second, func() string {
			if got, want := bgState(t, ns), fmt.Sprintf("replicasets nginx:1.25=3/3 nginx:1.26=3/3; active %s; preview %s", sel(h1), sel(h1)); got != want {
				return fmt.Sprintf("held: %s, want %s", got, want)
			}
			st := queryStatus(t, ns, "web")
			if st.AbortScaleDownAt == nil {
				return "no abortScaleDownAt in the status"
			}
			until = *st.AbortScaleDownAt
			return ""
		})
		if img := getDeployment(t, ns, "web").Spec.Template.Spec.Containers[0].Image; img != "nginx:1.25" {
			t.Errorf("image while held = %s, want nginx:1.25", img)
		}
		if left := until.Sub(aborted); left < 7*time.Second || left > 12*time.Second {
			t.Errorf("abortScaleDownAt %s, %s after the abort command, want about 8s", until.Format(time.RFC3339Nano), left)
		}
		d := waitComplete(t, ns, "web")
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.25" {
			t.Errorf("image after the abort = %s, want nginx:1.25", img)
		}
		if done := time.Now(); done.Before(until) {
			t.Errorf("complete at %s, before the hold ended at %s", done.Format(time.RFC3339Nano), until.Format(time.RFC3339Nano))
		}
		eventually(t, 60*time.Second, func() string {
			if got, want := bgState(t, ns), fmt.Sprintf("replicasets nginx:1.25=3/3 nginx:1.26=0/0; active %s; preview %s", sel(h1), sel(h1)); got != want {
				return fmt.Sprintf("after the abort: %s, want %s", got, want)
			}
			return ""
		})
		if st := queryStatus(t, ns, "web"); !strings.Contains(st.AbortReason, "aborted by user: preview looks wrong") {
			t.Errorf("abortReason = %q", st.AbortReason)
		}
		waitEvent(t, ns, "web", "RolloutAborted: Rollout of revision 2 aborted: aborted by user: preview looks wrong")
		waitEvent(t, ns, "web", "PreviewSwitched: Preview Service web-preview selects pod-template-hash "+h1)
		waitEvent(t, ns, "web", "BlueGreenPhase: Blue-green: abortScaleDownDelaySeconds 8 passed; scaling the aborted ReplicaSet down")
	})

	t.Run("replicas changed mid-rollout", func(t *testing.T) {
		// Both stacks follow a change of replicas, before promotion and in the scale-down
		// delay; the stack the active Service selects never shrinks on a scale-up (upstream's
		// proportional scaling took it from 3 to 2 pods here: replicas 5 + maxSurge 2 = 7
		// shared between two stacks of 3).
		ns := newNamespace(t)
		h1, h2 := pausedBlueGreen(t, ns, `{"activeService":"web","previewService":"web-preview","autoPromotionEnabled":false,"scaleDownDelaySeconds":30}`)

		stable := k8s.ReplicaSetName("web", h1)
		low := watchLowestReplicas(t, ns, stable)
		if out, err := runKubectl("scale", "deployment/web", "-n", ns, "--replicas=5"); err != nil {
			t.Fatalf("kubectl scale --replicas=5: %v\n%s", err, out)
		}
		waitBlueGreen(t, ns, contract.BlueGreenPaused, contract.WaitingForPromote,
			fmt.Sprintf("replicasets nginx:1.26=5/5 nginx:1.25=5/5; active %s; preview %s", sel(h1), sel(h2)))
		if lowest, last := low(); lowest != 3 || last != 5 {
			t.Errorf("the active Service's ReplicaSet %s: lowest %d and last %d replicas seen by a watch across the scale from 3 to 5, want 3 and 5", stable, lowest, last)
		}
		waitEvent(t, ns, "web", fmt.Sprintf("ScalingReplicaSet: Scaled up replica set %s from 3 to 5", stable))

		if out, err := updateCLI(ns, "web", contract.UpdatePromote); err != nil {
			t.Fatalf("promote: %v\n%s", err, out)
		}
		waitBlueGreen(t, ns, contract.BlueGreenScaleDownDelay, contract.WaitingForTimer,
			fmt.Sprintf("replicasets nginx:1.26=5/5 nginx:1.25=5/5; active %s; preview %s", sel(h2), sel(h2)))
		// In the delay the warm ReplicaSet follows replicas too, so a rollback gets the
		// capacity the Deployment asks for.
		if out, err := runKubectl("scale", "deployment/web", "-n", ns, "--replicas=2"); err != nil {
			t.Fatalf("kubectl scale --replicas=2: %v\n%s", err, out)
		}
		waitBlueGreen(t, ns, contract.BlueGreenScaleDownDelay, contract.WaitingForTimer,
			fmt.Sprintf("replicasets nginx:1.26=2/2 nginx:1.25=2/2; active %s; preview %s", sel(h2), sel(h2)))

		d := waitComplete(t, ns, "web")
		if d.Status.Replicas != 2 || d.Status.UpdatedReplicas != 2 || d.Status.AvailableReplicas != 2 {
			t.Errorf("status %+v, want 2 replicas, all updated and available", d.Status)
		}
		eventually(t, 60*time.Second, func() string {
			if got, want := bgState(t, ns), fmt.Sprintf("replicasets nginx:1.26=2/2 nginx:1.25=0/0; active %s; preview %s", sel(h2), sel(h2)); got != want {
				return fmt.Sprintf("after the rollout: %s, want %s", got, want)
			}
			return ""
		})
	})

	t.Run("a new template before promotion", func(t *testing.T) {
		// The earlier preview keeps its pods while the preview Service selects it, and goes to 0
		// once the Service selects the newest template's pods (etcd orders the two writes).
		ns := newNamespace(t)
		h1, h2 := pausedBlueGreen(t, ns, `{"activeService":"web","previewService":"web-preview","autoPromotionEnabled":false}`)

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		earlier := k8s.ReplicaSetName("web", h2)
		rsWatch, err := env.kube.AppsV1().ReplicaSets(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + earlier})
		if err != nil {
			t.Fatal(err)
		}
		svcWatch, err := env.kube.CoreV1().Services(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=web-preview"})
		if err != nil {
			t.Fatal(err)
		}
		scaledDownAt := firstRevision(rsWatch, func(o any) bool {
			rs, ok := o.(*appsv1.ReplicaSet)
			return ok && rs.Spec.Replicas != nil && *rs.Spec.Replicas == 0
		})
		// The preview Service's only move from h2 is to the third template.
		switchedAt := firstRevision(svcWatch, func(o any) bool {
			svc, ok := o.(*corev1.Service)
			return ok && svc.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey] != h2
		})
		var h3 string
		setImage(t, ns, "web", "nginx:1.27")
		eventually(t, 60*time.Second, func() string {
			st := queryStatus(t, ns, "web")
			if st.BlueGreen == nil || st.BlueGreen.Hash == h2 || st.BlueGreen.Hash == "" {
				return fmt.Sprintf("blueGreen %+v, want the third template's", st.BlueGreen)
			}
			h3 = st.BlueGreen.Hash
			return ""
		})
		waitBlueGreen(t, ns, contract.BlueGreenPaused, contract.WaitingForPromote,
			fmt.Sprintf("replicasets nginx:1.27=3/3 nginx:1.26=0/0 nginx:1.25=3/3; active %s; preview %s", sel(h1), sel(h3)))
		scaled, switched := scaledDownAt(), switchedAt()
		t.Logf("the preview Service switched at resourceVersion %d, the earlier preview went to 0 at %d", switched, scaled)
		if switched == 0 || scaled == 0 || scaled < switched {
			t.Errorf("the earlier preview %s went to 0 at resourceVersion %d, the preview Service switched to %s at %d: want the switch first", earlier, scaled, h3, switched)
		}
		waitEvent(t, ns, "web", fmt.Sprintf("ScalingReplicaSet: Scaled down replica set %s from 3 to 0", earlier))

		if out, err := updateCLI(ns, "web", contract.UpdatePromote, `{"full":true}`); err != nil {
			t.Fatalf("promote: %v\n%s", err, out)
		}
		d := waitComplete(t, ns, "web")
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.27" {
			t.Errorf("image %s, want nginx:1.27", img)
		}
	})

	t.Run("auto-rollback on a missed progress deadline", func(t *testing.T) {
		ns := newNamespace(t)
		h1 := newBlueGreen(t, ns, `{"activeService":"web","previewService":"web-preview"}`,
			progressDeadline(5), withAnnotation(k8s.AutoRollbackAnnotation, "true"))
		setImage(t, ns, "web", "nginx:404")
		// The new pods never become ready: neither Service moves to them, the deadline
		// passes while the preview scales, and the rollout aborts.
		waitEvent(t, ns, "web", "RolloutAborted: Rollout of revision 2 aborted: progress deadline exceeded")
		h2 := hashOf(t, ns, "nginx:404")
		d := waitComplete(t, ns, "web")
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.25" {
			t.Errorf("image after the auto-rollback = %s, want nginx:1.25", img)
		}
		eventually(t, 60*time.Second, func() string {
			if got, want := bgState(t, ns), fmt.Sprintf("replicasets nginx:1.25=3/3 nginx:404=0/0; active %s; preview %s", sel(h1), sel(h1)); got != want {
				return fmt.Sprintf("after the auto-rollback: %s, want %s", got, want)
			}
			return ""
		})
		for _, e := range events(t, ns, "web") {
			if strings.Contains(e, "pod-template-hash "+h2) {
				t.Errorf("a Service was switched to the pods that never became ready: %s", e)
			}
		}
	})

	t.Run("analyses", func(t *testing.T) {
		var mu sync.Mutex
		calls := map[string]int{}
		metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			calls[r.URL.Path]++
			mu.Unlock()
			rate := "0.01"
			if strings.HasSuffix(r.URL.Path, "/bad") {
				rate = "0.3"
			}
			fmt.Fprintf(w, `{"data":{"errorRate":%s}}`, rate)
		}))
		defer metrics.Close()
		ns := newNamespace(t)
		ann := fmt.Sprintf(`{"activeService":"web","previewService":"web-preview","scaleDownDelaySeconds":300,
			"prePromotionAnalysis":{"web":{"url":%q,"jsonPath":"$.data.errorRate"},"max":0.05,"interval":"1s","count":2},
			"postPromotionAnalysis":{"web":{"url":%q,"jsonPath":"$.data.errorRate"},"max":0.05,"interval":"1s","count":2,"failureLimit":1}}`,
			metrics.URL+"/pre/good", metrics.URL+"/post/bad")
		h1 := newBlueGreen(t, ns, ann)
		setImage(t, ns, "web", "nginx:1.26")
		// The pre-promotion analysis passes and promotes; the post-promotion one fails and
		// aborts: the active Service goes straight back to the warm old ReplicaSet.
		waitEvent(t, ns, "web", "AnalysisSuccessful: Blue-green: pre-promotion analysis passed: 2 measurements, 0 failed")
		waitEvent(t, ns, "web", "ActiveSwitched: Active Service web selects pod-template-hash")
		waitEvent(t, ns, "web", "AnalysisFailed: Blue-green: post-promotion analysis failed: 2 of 2 measurements failed (failureLimit 1)")
		waitEvent(t, ns, "web", "RolloutAborted")
		d := waitComplete(t, ns, "web")
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.25" {
			t.Errorf("image after the failed post-promotion analysis = %s, want nginx:1.25", img)
		}
		eventually(t, 60*time.Second, func() string {
			if got, want := bgState(t, ns), fmt.Sprintf("replicasets nginx:1.25=3/3 nginx:1.26=0/0; active %s; preview %s", sel(h1), sel(h1)); got != want {
				return fmt.Sprintf("after the abort: %s, want %s", got, want)
			}
			return ""
		})
		if st := queryStatus(t, ns, "web"); !strings.Contains(st.AbortReason, "post-promotion analysis failed") {
			t.Errorf("abortReason = %q", st.AbortReason)
		}
		mu.Lock()
		defer mu.Unlock()
		if calls["/pre/good"] != 2 || calls["/post/bad"] != 2 {
			t.Errorf("analysis endpoint calls %v, want 2 each", calls)
		}
	})

	t.Run("invalid annotation", func(t *testing.T) {
		ns := newNamespace(t)
		recordHistories(t, ns, "web")
		createServices(t, ns, "web", "web-preview")
		create(t, newDeployment(ns, "web", 3, "nginx:1.25", rolling("25%", "25%"), withSteps(`[{"setWeight":50},{"pause":{}}]`)))
		waitComplete(t, ns, "web")
		update(t, ns, "web", func(d *appsv1.Deployment) {
			d.Annotations[k8s.BlueGreenAnnotation] = `{"previewService":"web-preview","scaleDownDelaySeconds":-1}`
			d.Spec.Template.Spec.Containers[0].Image = "nginx:1.26"
		})
		waitEvent(t, ns, "web", "InvalidRolloutAnnotation: Rollout held: invalid annotation: temporal-rollout.io/blue-green: activeService is missing")
		waitEvent(t, ns, "web", "scaleDownDelaySeconds -1 is not between 0 and 86400")
		waitEvent(t, ns, "web", "temporal-rollout.io/steps is set too: a Deployment rolls out either in steps or blue-green, not both")
		time.Sleep(3 * time.Second)
		if got := sizes(t, ns); got != "nginx:1.25=3/3" {
			t.Errorf("with an invalid annotation: %s, want nothing moved", got)
		}
		if got := selects(t, ns, "web"); got != "app=web,pod-template-hash=" {
			t.Errorf("active Service %s, want untouched", got)
		}
		if st := queryStatus(t, ns, "web"); !strings.Contains(st.AnnotationError, "activeService is missing") {
			t.Errorf("annotationError = %q", st.AnnotationError)
		}
		// Fixed (steps removed, activeService set): the rollout goes blue-green.
		update(t, ns, "web", func(d *appsv1.Deployment) {
			delete(d.Annotations, k8s.StepsAnnotation)
			d.Annotations[k8s.BlueGreenAnnotation] = `{"activeService":"web","previewService":"web-preview","scaleDownDelaySeconds":0}`
		})
		waitComplete(t, ns, "web")
		h2 := hashOf(t, ns, "nginx:1.26")
		eventually(t, 60*time.Second, func() string {
			if got, want := bgState(t, ns), fmt.Sprintf("replicasets nginx:1.26=3/3 nginx:1.25=0/0; active %s; preview %s", sel(h2), sel(h2)); got != want {
				return fmt.Sprintf("after the fix: %s, want %s", got, want)
			}
			return ""
		})
	})
}

// watchLowestReplicas watches ReplicaSet name from now on and returns a function that reports
// the lowest spec.replicas it has had since (its size now, if it has not changed) and the last
// one the watch delivered.
func watchLowestReplicas(t *testing.T, ns, name string) func() (lowest, last int32) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rs, err := env.kube.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		cancel()
		t.Fatalf("get replicaset %s/%s: %v", ns, name, err)
	}
	w, err := env.kube.AppsV1().ReplicaSets(ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + name, ResourceVersion: rs.ResourceVersion})
	if err != nil {
		cancel()
		t.Fatalf("watch replicaset %s/%s: %v", ns, name, err)
	}
	var mu sync.Mutex
	lowest, last := *rs.Spec.Replicas, *rs.Spec.Replicas
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if got, ok := ev.Object.(*appsv1.ReplicaSet); ok && got.Spec.Replicas != nil {
				mu.Lock()
				lowest, last = min(lowest, *got.Spec.Replicas), *got.Spec.Replicas
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { w.Stop(); cancel(); <-done })
	return func() (int32, int32) {
		mu.Lock()
		defer mu.Unlock()
		return lowest, last
	}
}

// firstRevision reads w in the background and returns a function that reports the
// resourceVersion (etcd's revision, which orders writes to every object of one cluster) of the
// first object for which match held, or 0 before any.
func firstRevision(w watch.Interface, match func(any) bool) func() int64 {
	var mu sync.Mutex
	var rev int64
	go func() {
		for ev := range w.ResultChan() {
			m, err := meta.Accessor(ev.Object)
			if err != nil || !match(ev.Object) {
				continue
			}
			n, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
			mu.Lock()
			if rev == 0 && err == nil {
				rev = n
			}
			mu.Unlock()
		}
	}()
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		return rev
	}
}
