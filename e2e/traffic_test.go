//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// gatewayAPIVersion pins the Gateway API whose standard-channel HTTPRoute CRD the traffic
// tests install (from the Go module's config/crd/standard/).
const gatewayAPIVersion = "v1.4.1"

var gatewayCRDs struct {
	once sync.Once
	err  error
}

// installGatewayCRDs applies the HTTPRoute CRD (and Gateway, GatewayClass: an HTTPRoute's
// parentRefs name a Gateway) once per run, from the pinned module in the Go module cache.
func installGatewayCRDs(t *testing.T) {
	t.Helper()
	gatewayCRDs.once.Do(func() {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module scratch\n\ngo 1.21\n"), 0o644); err != nil {
			gatewayCRDs.err = err
			return
		}
		cmd := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/gateway-api@"+gatewayAPIVersion)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			gatewayCRDs.err = fmt.Errorf("go mod download sigs.k8s.io/gateway-api@%s: %w", gatewayAPIVersion, err)
			return
		}
		var mod struct{ Dir string }
		if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
			gatewayCRDs.err = fmt.Errorf("go mod download: no Dir in %s", out)
			return
		}
		for _, f := range []string{"gatewayclasses", "gateways", "httproutes"} {
			path := filepath.Join(mod.Dir, "config", "crd", "standard", "gateway.networking.k8s.io_"+f+".yaml")
			if out, err := runKubectl("--kubeconfig", env.stack.Kubeconfig, "apply", "--server-side", "-f", path); err != nil {
				gatewayCRDs.err = fmt.Errorf("kubectl apply %s: %v\n%s", path, err, out)
				return
			}
		}
		gatewayCRDs.err = waitCRDs("crd/httproutes.gateway.networking.k8s.io")
	})
	if gatewayCRDs.err != nil {
		t.Fatal(gatewayCRDs.err)
	}
}

func dynamicClient(t *testing.T) dynamic.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", env.stack.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// routeView is what a test checks of the route and Services.
type routeView struct {
	stableWeight, canaryWeight int64
	stableHash, canaryHash     string
	headerRules                []string
}

func (v routeView) String() string {
	return fmt.Sprintf("weights %d/%d, selectors %s/%s, header rules %v", v.stableWeight, v.canaryWeight, v.stableHash, v.canaryHash, v.headerRules)
}

func viewRoute(t *testing.T, dc dynamic.Interface, ns string) routeView {
	t.Helper()
	ctx := context.Background()
	r, err := dc.Resource(activities.HTTPRouteResource).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get httproute: %v", err)
	}
	return routeOf(t, ns, r)
}

func routeOf(t *testing.T, ns string, r *unstructured.Unstructured) routeView {
	var v routeView
	v.canaryWeight = -1
	rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
	for i, x := range rules {
		rule := x.(map[string]any)
		if i == 0 {
			refs, _, _ := unstructured.NestedSlice(rule, "backendRefs")
			for _, ref := range refs {
				m := ref.(map[string]any)
				w, _, _ := unstructured.NestedInt64(m, "weight")
				switch m["name"] {
				case "web-stable":
					v.stableWeight = w
				case "web-canary":
					v.canaryWeight = w
				}
			}
			continue
		}
		name, _ := rule["name"].(string)
		b, _ := json.Marshal(rule["matches"])
		refs, _, _ := unstructured.NestedSlice(rule, "backendRefs")
		to := ""
		if len(refs) == 1 {
			to, _ = refs[0].(map[string]any)["name"].(string)
		}
		v.headerRules = append(v.headerRules, fmt.Sprintf("%s→%s %s", name, to, b))
	}
	if t != nil {
		for _, n := range []string{"web-stable", "web-canary"} {
			svc, err := env.kube.CoreV1().Services(ns).Get(context.Background(), n, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get service %s: %v", n, err)
			}
			if n == "web-stable" {
				v.stableHash = svc.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey]
			} else {
				v.canaryHash = svc.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey]
			}
		}
	}
	return v
}

func hashOf(t *testing.T, ns, image string) string {
	t.Helper()
	h := hashOfOr(t, ns, image)
	if h == "" {
		t.Fatalf("no replicaset for %s: %s", image, sizes(t, ns))
	}
	return h
}

// stopControllerManager stops kube-controller-manager, so that no pod comes or goes, and
// returns what starts it again (once; the test's cleanup calls it too).
func stopControllerManager(t *testing.T) (restart func()) {
	t.Helper()
	env.stack.StopProcess("kube-controller-manager")
	up := false
	restart = func() {
		if !up {
			up = true
			if err := env.stack.RestartControllerManager(float32(env.qps), env.burst); err != nil {
				t.Fatalf("restart kube-controller-manager: %v", err)
			}
		}
	}
	t.Cleanup(restart)
	return restart
}

func waitRoute(t *testing.T, dc dynamic.Interface, ns string, want routeView, headerWant string) {
	t.Helper()
	eventually(t, 60*time.Second, func() string {
		got := viewRoute(t, dc, ns)
		hr := strings.Join(got.headerRules, ";")
		if got.stableWeight != want.stableWeight || got.canaryWeight != want.canaryWeight || got.stableHash != want.stableHash || got.canaryHash != want.canaryHash ||
			(headerWant == "" && hr != "") || !strings.Contains(hr, headerWant) {
			return fmt.Sprintf("route %s; want %s with header rules %q", got, want, headerWant)
		}
		return ""
	})
}

// TestTrafficRouting: a stepped rollout with temporal-rollout.io/traffic on the real stack
// (apiserver with the Gateway API CRDs; no data plane: the test checks the objects a gateway
// would read). At each step the HTTPRoute's weights and the Services' selectors are exact, a
// setHeaderRoute step adds its rule, and an abort brings the weights back to 100/0 as the
// stable pods return, before the canary ReplicaSet goes to 0 (a watch on both compares the
// times).
func TestTrafficRouting(t *testing.T) {
	ns, dc, h1 := routedAtRest(t, `[{"setWeight":30},{"pause":{}},{"setHeaderRoute":{"name":"testers","match":[{"name":"X-Canary","value":"true"}]}},{"setWeight":50},{"pause":{}}]`)
	ctx := context.Background()
	// At rest both Services select the stable pods, and the stable one takes everything.
	waitRoute(t, dc, ns, routeView{stableWeight: 100, canaryWeight: 0, stableHash: h1, canaryHash: h1}, "")

	setImage(t, ns, "web", "nginx:1.26")
	st := waitSteps(t, ns, "web", 2, contract.WaitingForPromote, "nginx:1.26=3/3 nginx:1.25=7/7")
	h2 := hashOf(t, ns, "nginx:1.26")
	waitRoute(t, dc, ns, routeView{stableWeight: 70, canaryWeight: 30, stableHash: h1, canaryHash: h2}, "")
	st = queryStatus(t, ns, "web")
	if tr := st.Steps.Traffic; tr == nil || tr.CanaryWeight != 30 || tr.StableWeight != 70 || tr.Check != "holds" || tr.Canary.Available != 3 || tr.Stable.Available != 7 {
		t.Errorf("status steps.traffic = %+v, want 70/30 on 7 and 3 pods, the invariant holding", st.Steps.Traffic)
	}

	if out, err := updateCLI(ns, "web", contract.UpdatePromote); err != nil {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	waitSteps(t, ns, "web", 5, contract.WaitingForPromote, "nginx:1.26=5/5 nginx:1.25=5/5")
	header := `temporal-rollout-testers→web-canary [{"headers":[{"name":"X-Canary","type":"Exact","value":"true"}],"path":{"type":"PathPrefix","value":"/"}}]`
	waitRoute(t, dc, ns, routeView{stableWeight: 50, canaryWeight: 50, stableHash: h1, canaryHash: h2}, header)
	if tr := queryStatus(t, ns, "web").Steps.Traffic; tr == nil || len(tr.HeaderRoutes) != 1 || tr.HeaderRoutes[0].Name != "testers" {
		t.Errorf("status steps.traffic = %+v, want the testers header route", tr)
	}

	// Abort: watch the route and the canary ReplicaSet, and compare when each moved. The weight
	// comes back as the stable pods do (k8s.AbortWeight): the canary's last pods go only once
	// the route sends them nothing.
	var mu sync.Mutex
	var weightBack, canaryDown time.Time
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rw, err := dc.Resource(activities.HTTPRouteResource).Namespace(ns).Watch(wctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch httproute: %v", err)
	}
	rsw, err := env.kube.AppsV1().ReplicaSets(ns).Watch(wctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch replicasets: %v", err)
	}
	go func() {
		for ev := range rw.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				if v := routeOf(nil, ns, u); v.canaryWeight == 0 && v.stableWeight == 100 {
					mu.Lock()
					if weightBack.IsZero() {
						weightBack = time.Now()
					}
					mu.Unlock()
				}
			}
		}
	}()
	go func() {
		for ev := range rsw.ResultChan() {
			if rs, ok := ev.Object.(*appsv1.ReplicaSet); ok && rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == h2 && *rs.Spec.Replicas == 0 {
				mu.Lock()
				if canaryDown.IsZero() {
					canaryDown = time.Now()
				}
				mu.Unlock()
			}
		}
	}()
	time.Sleep(time.Second)
	if out, err := updateCLI(ns, "web", contract.UpdateAbort, `{"reason":"testers saw errors"}`); err != nil {
		t.Fatalf("abort: %v\n%s", err, out)
	}
	waitComplete(t, ns, "web")
	waitRoute(t, dc, ns, routeView{stableWeight: 100, canaryWeight: 0, stableHash: h1, canaryHash: h1}, "")
	if got := sizes(t, ns); got != "nginx:1.25=10/10 nginx:1.26=0/0" {
		t.Errorf("after abort: %s, want the stable ReplicaSet back at 10", got)
	}
	mu.Lock()
	back, down := weightBack, canaryDown
	mu.Unlock()
	if back.IsZero() || down.IsZero() || !back.Before(down) {
		t.Errorf("abort: weights back to 100/0 at %s, canary ReplicaSet scaled to 0 at %s; want the weights first",
			back.Format(time.RFC3339Nano), down.Format(time.RFC3339Nano))
	} else {
		t.Logf("abort: weights back to 100/0 %s before the canary ReplicaSet scaled to 0", down.Sub(back))
	}
	for _, want := range []string{"TrafficShifted: Route web rule 0: canary web-canary 30%, stable web-stable 70%",
		"TrafficShifted: Route web rule 0: canary web-canary 0%, stable web-stable 100%"} {
		waitEvent(t, ns, "web", want)
	}
	noInvariantEvents(t, ns)
}

// TestTrafficStablePodsUp: a full promote scales the stable ReplicaSet down before its pods go,
// and the canary's weight stays at its share of all the pods up, the stable's going ones
// included. kube-controller-manager is stopped for the promote and the test plays its
// ReplicaSet controller for one step, in the order that showed the defect on the data plane:
// one more canary pod becomes available (the worker's cue to sync) before the stable's pods
// scaled away are deleted. With the stable ReplicaSet at 5, 7 stable pods up and 4 canary
// ones, the canary gets floor(100×4/11) = 36, not floor(100×4/9) = 44. The invariant is checked
// at every change to the route, the Services and the pods, and once the controller is back the
// rollout completes on the canary.
func TestTrafficStablePodsUp(t *testing.T) {
	if env.builtin {
		t.Skip("E2E_CONTROLLER=built-in runs no worker")
	}
	ns, dc, h1 := routedAtRest(t, `[{"setWeight":30},{"pause":{}}]`)
	ctx := context.Background()
	setImage(t, ns, "web", "nginx:1.26")
	waitSteps(t, ns, "web", 2, contract.WaitingForPromote, "nginx:1.26=3/3 nginx:1.25=7/7")
	h2 := hashOf(t, ns, "nginx:1.26")
	waitRoute(t, dc, ns, routeView{stableWeight: 70, canaryWeight: 30, stableHash: h1, canaryHash: h2}, "")

	sampler := sampleTraffic(t, dc, ns, nil, 10)
	restartKCM := stopControllerManager(t)
	if out, err := updateCLI(ns, "web", contract.UpdatePromote, `{"full":true}`); err != nil {
		t.Fatalf("promote full: %v\n%s", err, out)
	}
	// The worker scales the canary up and the stable down (by maxUnavailable); no pod comes
	// or goes.
	eventually(t, 30*time.Second, func() string {
		if got := sizes(t, ns); got != "nginx:1.26=8/3 nginx:1.25=5/7" {
			return "after the promote: " + got + ", want nginx:1.26=8/3 nginx:1.25=5/7"
		}
		return ""
	})
	// One more canary pod, Ready, and the canary ReplicaSet's status counting it.
	var canary appsv1.ReplicaSet
	for _, rs := range replicaSets(t, ns) {
		if rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == h2 {
			canary = rs
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: canary.Name + "-", Labels: canary.Spec.Template.Labels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&canary, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Spec: canary.Spec.Template.Spec}
	if _, err := env.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a canary pod: %v", err)
	}
	eventually(t, 30*time.Second, func() string {
		n := 0
		pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: appsv1.DefaultDeploymentUniqueLabelKey + "=" + h2})
		if err != nil {
			return err.Error()
		}
		for i := range pods.Items {
			if podReady(&pods.Items[i]) {
				n++
			}
		}
		if n != 4 {
			return fmt.Sprintf("%d canary pods Ready, want 4", n)
		}
		return ""
	})
	c, err := env.kube.AppsV1().ReplicaSets(ns).Get(ctx, canary.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Replicas, c.Status.FullyLabeledReplicas, c.Status.ReadyReplicas, c.Status.AvailableReplicas = 4, 4, 4, 4
	c.Status.ObservedGeneration = c.Generation
	if _, err := env.kube.AppsV1().ReplicaSets(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("canary ReplicaSet status: %v", err)
	}
	// The worker moves the route on it: the stable ReplicaSet is at 5 or fewer, 7 of its pods
	// up. The move is the wait's (change inline-traffic-moves) or a sync's; its event says
	// what it weighed either way.
	eventually(t, 30*time.Second, func() string {
		for _, ev := range events(t, ns, "web") {
			if strings.Contains(ev, "TrafficShifted: Route web rule 0: canary web-canary 36%, stable web-stable 64% (target 100%; canary 4 of 11 available pods)") {
				return ""
			}
		}
		return fmt.Sprintf("no TrafficShifted event for the canary at 36 on 4 of 11 pods up; events %q", events(t, ns, "web"))
	})
	waitRoute(t, dc, ns, routeView{stableWeight: 64, canaryWeight: 36, stableHash: h1, canaryHash: h2}, "")

	restartKCM()
	waitPromoted(t, dc, ns, h2, "nginx:1.26=10/10 nginx:1.25=0/0")
	sampler.report(t)
	noInvariantEvents(t, ns)
}

// TestTrafficAbortFencesTheWait (change inline-traffic-moves): a routed rollout's wait may
// move the route itself, and a wait given up learns so only at its next heartbeat, minutes
// later. kube-controller-manager is stopped so that the canary's pods never come and the wait
// goes on; the abort gives it up, and the sync that follows writes the route's wait fence
// before any move, with the worker's own permissions. Once the controller is back the abort
// completes on the stable template, the weights back before the canary's pods go, and no
// sample of the route sends traffic where no pod serves it.
func TestTrafficAbortFencesTheWait(t *testing.T) {
	if env.builtin {
		t.Skip("E2E_CONTROLLER=built-in runs no worker")
	}
	ns, dc, h1 := routedAtRest(t, `[{"setWeight":30},{"pause":{}}]`)
	ctx := context.Background()
	sampler := sampleTraffic(t, dc, ns, nil, 10)
	restartKCM := stopControllerManager(t)
	setImage(t, ns, "web", "nginx:1.26")
	// The canary ReplicaSet has its replicas and no pod; the route waits at 0 for them, and so
	// does the workflow's wait, given the route to move.
	var h2 string
	eventually(t, 30*time.Second, func() string {
		if h2 = hashOfOr(t, ns, "nginx:1.26"); h2 == "" {
			return "no canary ReplicaSet yet"
		}
		desc, err := env.tc.DescribeWorkflowExecution(ctx, workflowID(ns, "web"), "")
		if err != nil {
			return err.Error()
		}
		for _, pa := range desc.PendingActivities {
			if pa.ActivityType.GetName() == "AwaitChange" {
				return ""
			}
		}
		return "no AwaitChange activity under way"
	})
	waitRoute(t, dc, ns, routeView{stableWeight: 100, canaryWeight: 0, stableHash: h1, canaryHash: h2}, "")
	if f := viewFence(t, dc, ns); f != "" {
		t.Fatalf("wait fence %q before the abort, want none", f)
	}
	if out, err := updateCLI(ns, "web", contract.UpdateAbort, `{"reason":"fence test"}`); err != nil {
		t.Fatalf("abort: %v\n%s", err, out)
	}
	eventually(t, 30*time.Second, func() string {
		if f := viewFence(t, dc, ns); f != "1" {
			return fmt.Sprintf("wait fence %q after the abort, want 1", f)
		}
		return ""
	})
	restartKCM()
	waitPromoted(t, dc, ns, h1, "nginx:1.25=10/10 nginx:1.26=0/0")
	sampler.report(t)
	noInvariantEvents(t, ns)
	if st := queryStatus(t, ns, "web"); !strings.Contains(st.AbortReason, "fence test") {
		t.Errorf("status abortReason %q, want it to give the abort's reason %q", st.AbortReason, "fence test")
	}
}

// viewFence is the weighted rule's wait fence on the route ("" when absent).
func viewFence(t *testing.T, dc dynamic.Interface, ns string) string {
	t.Helper()
	r, err := dc.Resource(activities.HTTPRouteResource).Namespace(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get httproute: %v", err)
	}
	return r.GetAnnotations()[activities.RouteFenceAnnotation+"0"]
}

// TestTrafficInvalidAnnotation: an invalid traffic annotation holds the rollout with a Warning
// naming every problem, and nothing moves.
func TestTrafficInvalidAnnotation(t *testing.T) {
	ns := newNamespace(t)
	create(t, newDeployment(ns, "web", 4, "nginx:1.25", rolling("25%", "25%"), withSteps(`[{"setWeight":50},{"pause":{}}]`),
		withAnnotation(k8s.TrafficAnnotation, `{"httpRoute":{"rule":-1},"stableService":"web"}`)))
	waitComplete(t, ns, "web")
	setImage(t, ns, "web", "nginx:1.26")
	waitEvent(t, ns, "web", "InvalidRolloutAnnotation: Rollout held: invalid annotation: temporal-rollout.io/traffic: httpRoute.name is missing")
	eventually(t, 30*time.Second, func() string {
		st := queryStatus(t, ns, "web")
		for _, w := range []string{"httpRoute.name is missing", "canaryService is missing", "httpRoute.rule -1"} {
			if !strings.Contains(st.AnnotationError, w) {
				return fmt.Sprintf("annotationError %q, want it to say %q", st.AnnotationError, w)
			}
		}
		return ""
	})
	if n := len(replicaSets(t, ns)); n != 1 {
		t.Errorf("%d ReplicaSets, want 1: nothing moves (%s)", n, sizes(t, ns))
	}
}

// routedAtRest is createTrafficDeployment once its first rollout is complete, with the hash
// of its stable pods (nginx:1.25).
func routedAtRest(t *testing.T, steps string) (ns string, dc dynamic.Interface, stable string) {
	t.Helper()
	ns, dc = createTrafficDeployment(t, steps)
	waitComplete(t, ns, "web")
	return ns, dc, hashOf(t, ns, "nginx:1.25")
}

// createTrafficDeployment installs the Gateway API CRDs and creates, in a new namespace whose
// histories are recorded, the traffic objects and the Deployment web (10 replicas of
// nginx:1.25, maxSurge and maxUnavailable 25%) with those steps and the traffic annotation.
func createTrafficDeployment(t *testing.T, steps string) (string, dynamic.Interface) {
	t.Helper()
	installGatewayCRDs(t)
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	dc := dynamicClient(t)
	createTrafficObjects(t, context.Background(), dc, ns, 80)
	traffic := `{"httpRoute":{"name":"web"},"stableService":"web-stable","canaryService":"web-canary"}`
	create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("25%", "25%"), withSteps(steps), withAnnotation(k8s.TrafficAnnotation, traffic)))
	return ns, dc
}

// waitPromoted waits for a promoted rollout to end: complete, every request on the new
// ReplicaSet (hash), and the ReplicaSets at sizes.
func waitPromoted(t *testing.T, dc dynamic.Interface, ns, hash, want string) {
	t.Helper()
	waitComplete(t, ns, "web")
	waitRoute(t, dc, ns, routeView{stableWeight: 100, canaryWeight: 0, stableHash: hash, canaryHash: hash}, "")
	eventually(t, 60*time.Second, func() string {
		if got := sizes(t, ns); got != want {
			return "after the promote: " + got + ", want " + want
		}
		return ""
	})
}

// createTrafficObjects creates what the traffic annotation names: the Services web-stable and
// web-canary (both selecting app: web, port 80 to targetPort) and the HTTPRoute web on the
// Gateway "gateway", whose one rule sends every request to web-stable.
func createTrafficObjects(t *testing.T, ctx context.Context, dc dynamic.Interface, ns string, targetPort int32) {
	t.Helper()
	for _, n := range []string{"web-stable", "web-canary"} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(targetPort)}},
		}}
		if _, err := env.kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create service %s: %v", n, err)
		}
	}
	route := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "web"},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"name": "gateway"}},
			"rules": []any{map[string]any{
				"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"}}},
				"backendRefs": []any{map[string]any{"name": "web-stable", "port": int64(80)}},
			}},
		},
	}}
	if _, err := dc.Resource(activities.HTTPRouteResource).Namespace(ns).Create(ctx, route, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create httproute: %v", err)
	}
}
