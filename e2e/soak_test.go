//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/stack"
	"github.com/temporal-rollout/rollout/k8s"
)

// TestTrafficSoak is the data-plane soak of issue 38: requests flow through Traefik without
// pause (at least 100 a second, one stream per Deployment) while the test drives at least 30
// rollouts across six Deployments, each in its own namespace behind one Gateway:
//
//	aborts     10 replicas: [setWeight W, pause {}] then abort, for W = 10, 20, ..., 100
//	promotes   10 replicas: [setWeight 30, pause 2s, setWeight 70, pause 2s], 9 rollouts to the end
//	bluegreen  4 replicas, blue-green: v2 promoted, v3 inside v2's scale-down delay
//	single     1 replica, maxSurge 1: [setWeight 20, pause 2s], 4 rollouts (1 canary pod beside
//	           the stable one; without surge the Deployment itself has a moment with no pod)
//	headers    10 replicas: [setCanaryScale 2, setHeaderRoute, pause 3s, setCanaryScale matchTrafficWeight,
//	           setWeight 50, pause 2s], 3 rollouts,
//	           half of its requests with the header
//	first      4 replicas at rest without annotations; the traffic and steps annotations and a
//	           new image in one update, abort at the pause, then a new image: routed again
//	tworules   two Deployments, a and b (6 replicas each), on two rules of one HTTPRoute (b's
//	           rule matches the header X-App: b, half of the requests carry it): both roll
//	           out at once, three images each, the second of each aborted at its pause
//
// It must see 0 failed requests (non-2xx or connection errors) and 0 samples, taken every
// 50 ms from the apiserver (the routes, the Services and the pods), in which a backend with
// weight has no available pod. It logs the requests, the samples and each abort's time from
// the command to 100% of traffic on stable pods (BENCHMARKS.md records them). SOAK_REPORT,
// when set, names a file the figures are written to.
func TestTrafficSoak(t *testing.T) {
	installDataPlaneCRDs(t)
	dc := dynamicClient(t)
	pods := startPodNetwork(t)
	roles := []string{"aborts", "promotes", "bluegreen", "single", "headers", "first", "rollback", "scaled", "instant", "autoscale", "deleted", "bgabort", "pauseabort", "tworules"}
	nss := map[string]string{}
	var all []string
	for _, r := range roles {
		ns := newNamespace(t)
		nss[r] = ns
		all = append(all, ns)
		if r == "tworules" {
			recordHistories(t, ns, "a")
			continue
		}
		recordHistories(t, ns, "web")
	}
	port := startTraefikOn(t, all, pods)
	createGateway(t, dc, nss["aborts"], port, true)
	followPods(t, all, pods)
	for _, r := range roles {
		ns := nss[r]
		if r == "tworules" {
			twoRulesRoute(t, dc, ns, nss["aborts"])
			continue
		}
		if r == "bluegreen" || r == "bgabort" {
			createServices(t, ns, "web", "web-preview")
			soakRoute(t, dc, ns, nss["aborts"], r, "web")
			continue
		}
		createServices(t, ns, "web-stable", "web-canary")
		soakRoute(t, dc, ns, nss["aborts"], r, "web-stable")
	}
	// A pod serves for its grace period once its deletion begins (the pod network's model of an
	// app that drains before it exits, as a preStop sleep does). 5 s: with 2 s and a busy loop
	// per core, Traefik's endpoints occasionally caught up with a scale-down after the pod had
	// stopped (3 of 65,658 requests, 502 Bad Gateway, no route weight involved: 0 bad samples).
	grace := func(d *appsv1.Deployment) { d.Spec.Template.Spec.TerminationGracePeriodSeconds = new(int64(5)) }
	traffic := withAnnotation(k8s.TrafficAnnotation, `{"httpRoute":{"name":"web"},"stableService":"web-stable","canaryService":"web-canary"}`)
	create(t, newDeployment(nss["aborts"], "web", 10, "nginx:a0", rolling("2", "1"), withSteps(`[{"setWeight":10},{"pause":{}}]`), traffic, grace))
	create(t, newDeployment(nss["promotes"], "web", 10, "nginx:p0", rolling("25%", "25%"),
		withSteps(`[{"setWeight":30},{"pause":{"duration":"2s"}},{"setWeight":70},{"pause":{"duration":"2s"}}]`), traffic, grace))
	create(t, newDeployment(nss["bluegreen"], "web", 4, "nginx:b1", rolling("25%", "25%"),
		withAnnotation(k8s.BlueGreenAnnotation, `{"activeService":"web","previewService":"web-preview","scaleDownDelaySeconds":20}`), grace))
	create(t, newDeployment(nss["single"], "web", 1, "nginx:s0", rolling("1", "0"), withSteps(`[{"setWeight":20},{"pause":{"duration":"2s"}}]`), traffic, grace))
	create(t, newDeployment(nss["headers"], "web", 10, "nginx:h0", rolling("25%", "25%"),
		withSteps(`[{"setCanaryScale":{"replicas":2}},{"setHeaderRoute":{"name":"testers","match":[{"name":"X-Canary","value":"true"}]}},{"pause":{"duration":"3s"}},{"setCanaryScale":{"matchTrafficWeight":true}},{"setWeight":50},{"pause":{"duration":"2s"}}]`),
		traffic, grace))
	create(t, newDeployment(nss["first"], "web", 4, "nginx:f1", rolling("25%", "25%"), grace))
	// Issue 44: the rollback signal at setWeight 100; aborts after setCanaryScale (the canary at
	// 0% and in a header route); setCanaryScale then setWeight; a new image the instant each
	// completion is written.
	create(t, newDeployment(nss["rollback"], "web", 6, "nginx:r0", rolling("25%", "25%"), withSteps(`[{"setWeight":100},{"pause":{}}]`), traffic, grace))
	create(t, newDeployment(nss["scaled"], "web", 10, "nginx:c0", rolling("25%", "25%"), withSteps(`[{"setCanaryScale":{"replicas":3}},{"pause":{}}]`), traffic, grace))
	create(t, newDeployment(nss["autoscale"], "web", 10, "nginx:z0", rolling("25%", "25%"), withSteps(`[{"setWeight":30},{"pause":{}}]`), traffic, grace))
	create(t, newDeployment(nss["deleted"], "web", 6, "nginx:d0", rolling("25%", "25%"), withSteps(`[{"setWeight":50},{"pause":{}}]`), traffic, grace))
	create(t, newDeployment(nss["bgabort"], "web", 4, "nginx:g0", rolling("25%", "25%"),
		withAnnotation(k8s.BlueGreenAnnotation, `{"activeService":"web","previewService":"web-preview","autoPromotionEnabled":false,"abortScaleDownDelaySeconds":3}`), grace))
	create(t, newDeployment(nss["pauseabort"], "web", 6, "nginx:q0", rolling("25%", "25%"), withSteps(`[{"setWeight":50},{"pause":{}}]`), traffic, grace))
	create(t, newDeployment(nss["instant"], "web", 4, "nginx:i0", rolling("25%", "25%"), withSteps(`[{"setWeight":50},{"pause":{"duration":"1s"}}]`), traffic, grace))
	for _, name := range []string{"a", "b"} {
		create(t, newDeployment(nss["tworules"], name, 6, "nginx:"+name+"0", rolling("25%", "25%"),
			withSteps(`[{"setWeight":30},{"pause":{"duration":"2s"}},{"setWeight":60},{"pause":{}}]`),
			withAnnotation(k8s.TrafficAnnotation, fmt.Sprintf(`{"httpRoute":{"name":"web","rule":%d},"stableService":"%s-stable","canaryService":"%s-canary"}`,
				map[string]int{"a": 0, "b": 1}[name], name, name)), grace))
	}
	for _, r := range roles {
		if r == "tworules" {
			waitComplete(t, nss[r], "a")
			waitComplete(t, nss[r], "b")
			continue
		}
		waitComplete(t, nss[r], "web")
	}
	// Traefik has every route and its endpoints before the load starts.
	for _, r := range roles {
		svcs := []string{"web-stable"}
		switch r {
		case "bluegreen", "bgabort":
			svcs = []string{"web"}
		case "tworules":
			svcs = []string{"a-stable", "b-stable"}
		}
		for _, svc := range svcs {
			waitEndpointsAll(t, nss[r], svc)
		}
		waitAcceptedNamed(t, dc, nss[r])
	}
	g := newGatewayClient(port)
	eventually(t, 60*time.Second, func() string {
		for _, r := range roles {
			if _, why := g.getHost(r+".soak.test", nil); why != "" {
				return r + ": " + why
			}
		}
		return ""
	})

	sampler := startSoakSampler(t, dc, all)
	load := startSoakLoad(g, roles)
	start := time.Now()

	var rollouts atomic.Int32
	var abortTimes []time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	scenario := func(name string, fn func(t *testing.T)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(name, fn)
		}()
	}
	// abortAndTime aborts the rollout and returns the time from the command to the route
	// carrying no weight to the canary (every request to stable pods).
	abortAndTime := func(t *testing.T, ns string) time.Duration {
		t.Helper()
		at := time.Now()
		if out, err := updateCLI(ns, "web", contract.UpdateAbort, `{"reason":"soak"}`); err != nil {
			t.Fatalf("abort: %v\n%s", err, out)
		}
		var took time.Duration
		eventually(t, 2*time.Minute, func() string {
			v := viewRoute(t, dc, ns)
			if v.canaryWeight > 0 && v.stableHash != v.canaryHash {
				return fmt.Sprintf("after the abort: route %s", v)
			}
			took = time.Since(at)
			return ""
		})
		mu.Lock()
		abortTimes = append(abortTimes, took)
		mu.Unlock()
		return took
	}

	// rollImages rolls out prefix1, prefix2, ..., prefixN one after another, each the moment
	// the previous one completed.
	rollImages := func(t *testing.T, ns, prefix string, n int) {
		t.Helper()
		for i := 1; i <= n; i++ {
			setImage(t, ns, "web", fmt.Sprintf("%s%d", prefix, i))
			rollouts.Add(1)
			waitCompleteImage(t, ns, fmt.Sprintf("%s%d", prefix, i))
		}
	}
	scenario("aborts", func(t *testing.T) {
		ns := nss["aborts"]
		for i, w := range []int{10, 20, 30, 40, 50, 60, 70, 80, 90, 100} {
			image := fmt.Sprintf("nginx:a%d", i+1)
			update(t, ns, "web", func(d *appsv1.Deployment) {
				d.Annotations[k8s.StepsAnnotation] = fmt.Sprintf(`[{"setWeight":%d},{"pause":{}}]`, w)
				d.Spec.Template.Spec.Containers[0].Image = image
			})
			rollouts.Add(1)
			st := waitHeld(t, ns, 2, contract.WaitingForPromote)
			// The setWeight step passed only once the route carried its weight.
			want := int32(w)
			if c, s := k8s.StepShares(want, 10, 2); true {
				want = k8s.FollowPods(k8s.TrafficWeight(want, c, s), c, s)
			}
			if tr := st.Steps.Traffic; tr == nil || tr.CanaryWeight != want {
				t.Errorf("setWeight %d: at the pause the route carries %+v, want the canary at %d", w, tr, want)
			}
			took := abortAndTime(t, ns)
			waitComplete(t, ns, "web")
			t.Logf("setWeight %d: aborted; all traffic on stable pods %s after the abort", w, took.Round(time.Millisecond))
		}
	})
	scenario("promotes", func(t *testing.T) {
		rollImages(t, nss["promotes"], "nginx:p", 9)
	})
	scenario("bluegreen", func(t *testing.T) {
		ns := nss["bluegreen"]
		setImage(t, ns, "web", "nginx:b2")
		rollouts.Add(1)
		waitActive(t, ns, "nginx:b2")
		// A new template inside v2's scale-down delay: production stays on v2 until v3 is
		// promoted, never back on v1.
		time.Sleep(2 * time.Second)
		h1 := hashOf(t, ns, "nginx:b1")
		stop := watchSelector(t, ns, "web")
		setImage(t, ns, "web", "nginx:b3")
		rollouts.Add(1)
		waitActive(t, ns, "nginx:b3")
		seen := stop()
		for _, h := range seen {
			if h == h1 {
				t.Errorf("the active Service went back to v1 (%s) after v2 was promoted: selectors %v", h1, seen)
			}
		}
		waitComplete(t, ns, "web")
	})
	scenario("single", func(t *testing.T) {
		rollImages(t, nss["single"], "nginx:s", 4)
	})
	scenario("headers", func(t *testing.T) {
		rollImages(t, nss["headers"], "nginx:h", 3)
	})
	scenario("first", func(t *testing.T) {
		ns := nss["first"]
		steps := `[{"setWeight":50},{"pause":{}}]`
		route := `{"httpRoute":{"name":"web"},"stableService":"web-stable","canaryService":"web-canary"}`
		update(t, ns, "web", func(d *appsv1.Deployment) {
			d.Annotations[k8s.StepsAnnotation] = steps
			d.Annotations[k8s.TrafficAnnotation] = route
			d.Spec.Template.Spec.Containers[0].Image = "nginx:f2"
		})
		rollouts.Add(1)
		waitHeld(t, ns, 2, contract.WaitingForPromote)
		abortAndTime(t, ns)
		waitComplete(t, ns, "web")
		d := getDeployment(t, ns, "web")
		if d.Annotations[k8s.StepsAnnotation] != steps || d.Annotations[k8s.TrafficAnnotation] != route {
			t.Errorf("after the abort: annotations %v, want the steps and traffic annotations kept", d.Annotations)
		}
		setImage(t, ns, "web", "nginx:f3")
		rollouts.Add(1)
		st := waitHeld(t, ns, 2, contract.WaitingForPromote)
		if tr := st.Steps.Traffic; tr == nil || tr.CanaryWeight != 50 {
			t.Errorf("the rollout after the abort: traffic %+v, want routed at 50", tr)
		}
		if out, err := updateCLI(ns, "web", contract.UpdatePromote, `{"full":true}`); err != nil {
			t.Fatalf("promote: %v\n%s", err, out)
		}
		waitCompleteImage(t, ns, "nginx:f3")
	})
	scenario("rollback", func(t *testing.T) {
		ns := nss["rollback"]
		for i := 1; i <= 2; i++ {
			image := fmt.Sprintf("nginx:r%d", i)
			setImage(t, ns, "web", image)
			rollouts.Add(1)
			if st := waitHeld(t, ns, 2, contract.WaitingForPromote); st.Steps.Traffic == nil || st.Steps.Traffic.CanaryWeight != 100 {
				t.Errorf("%s: at the pause the route carries %+v, want the canary at 100", image, st.Steps.Traffic)
			}
			// The rollback signal to the previous revision: the stable ReplicaSet has no pod,
			// the canary keeps the traffic until it has.
			signal(t, ns, "web", contract.SignalRollback, `{"revision":0}`)
			waitCompleteImage(t, ns, "nginx:r0")
			t.Logf("%s: rolled back to nginx:r0 by the rollback signal", image)
		}
	})
	scenario("scaled", func(t *testing.T) {
		ns := nss["scaled"]
		for i, steps := range []string{
			`[{"setCanaryScale":{"replicas":3}},{"pause":{}}]`,
			`[{"setCanaryScale":{"replicas":3}},{"setHeaderRoute":{"name":"testers","match":[{"name":"X-Canary","value":"true"}]}},{"pause":{}}]`,
		} {
			image := fmt.Sprintf("nginx:c%d", i+1)
			update(t, ns, "web", func(d *appsv1.Deployment) {
				d.Annotations[k8s.StepsAnnotation] = steps
				d.Spec.Template.Spec.Containers[0].Image = image
			})
			rollouts.Add(1)
			waitHeld(t, ns, len(strings.Split(steps, "},{")), contract.WaitingForPromote)
			stop := watchCanaryWeight(t, dc, ns)
			abortAndTime(t, ns)
			waitComplete(t, ns, "web")
			if ws := stop(); len(ws) > 0 {
				t.Errorf("%s: the aborted canary at 0%% took weight on the way back: %v", steps, ws)
			}
		}
		// setCanaryScale then setWeight: the step passes (the old side keeps what
		// maxUnavailable needs) and the rollout is promoted to the end.
		update(t, ns, "web", func(d *appsv1.Deployment) {
			d.Annotations[k8s.StepsAnnotation] = `[{"setCanaryScale":{"replicas":2}},{"setWeight":50},{"pause":{}}]`
			d.Spec.Template.Spec.Containers[0].Image = "nginx:c3"
		})
		rollouts.Add(1)
		waitHeld(t, ns, 3, contract.WaitingForPromote)
		if out, err := updateCLI(ns, "web", contract.UpdatePromote, `{"full":true}`); err != nil {
			t.Fatalf("promote: %v\n%s", err, out)
		}
		waitCompleteImage(t, ns, "nginx:c3")
	})
	scenario("autoscale", func(t *testing.T) {
		// Replicas changed mid-canary, as an autoscaler would, then promoted to the end.
		ns := nss["autoscale"]
		setImage(t, ns, "web", "nginx:z1")
		rollouts.Add(1)
		waitHeld(t, ns, 2, contract.WaitingForPromote)
		for _, n := range []int32{14, 6, 10} {
			update(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Replicas = &n })
			eventually(t, 2*time.Minute, func() string {
				var sum int32
				for _, rs := range replicaSets(t, ns) {
					sum += rs.Status.AvailableReplicas
				}
				if sum < n {
					return fmt.Sprintf("%d of %d pods available", sum, n)
				}
				return ""
			})
		}
		if out, err := updateCLI(ns, "web", contract.UpdatePromote, `{"full":true}`); err != nil {
			t.Fatalf("promote: %v\n%s", err, out)
		}
		waitCompleteImage(t, ns, "nginx:z1")
	})
	scenario("deleted", func(t *testing.T) {
		// A Deployment deleted mid-canary, its ReplicaSets orphaned: the Services and the
		// route are left serving the pods that remain.
		ns := nss["deleted"]
		setImage(t, ns, "web", "nginx:d1")
		rollouts.Add(1)
		waitHeld(t, ns, 2, contract.WaitingForPromote)
		orphan := metav1.DeletePropagationOrphan
		if err := env.kube.AppsV1().Deployments(ns).Delete(context.Background(), "web", metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
			t.Fatalf("delete deployment: %v", err)
		}
		time.Sleep(10 * time.Second)
		if v := viewRoute(t, dc, ns); v.stableWeight+v.canaryWeight <= 0 {
			t.Errorf("after the Deployment was deleted: route %s, want it left routing", v)
		}
	})
	// The worker SIGKILLed five times while the scenarios abort and move traffic, each time
	// started again at once.
	scenario("kills", func(t *testing.T) {
		for i := 0; i < 5; i++ {
			time.Sleep(9 * time.Second)
			env.stack.KillProcess("worker")
			if err := startWorker(); err != nil {
				t.Fatalf("start the worker after kill %d: %v", i+1, err)
			}
			t.Logf("worker SIGKILLed and started again (%d of 5)", i+1)
		}
	})
	scenario("bgabort", func(t *testing.T) {
		// Blue-green aborted in its preview, then with automatic promotion (the abort lands
		// before or after the promotion; either way production is served throughout).
		ns := nss["bgabort"]
		setImage(t, ns, "web", "nginx:g1")
		rollouts.Add(1)
		eventually(t, 2*time.Minute, func() string {
			if bg := queryStatus(t, ns, "web").BlueGreen; bg == nil || bg.Phase != contract.BlueGreenPaused || bg.WaitingFor != contract.WaitingForPromote {
				return fmt.Sprintf("blueGreen %+v, want paused for promote", bg)
			}
			return ""
		})
		if out, err := updateCLI(ns, "web", contract.UpdateAbort, `{"reason":"soak"}`); err != nil {
			t.Fatalf("abort: %v\n%s", err, out)
		}
		waitCompleteImage(t, ns, "nginx:g0")
		update(t, ns, "web", func(d *appsv1.Deployment) {
			d.Annotations[k8s.BlueGreenAnnotation] = `{"activeService":"web","previewService":"web-preview","autoPromotionSeconds":4,"abortScaleDownDelaySeconds":3}`
			d.Spec.Template.Spec.Containers[0].Image = "nginx:g2"
		})
		rollouts.Add(1)
		time.Sleep(5 * time.Second)
		if out, err := updateCLI(ns, "web", contract.UpdateAbort, `{"reason":"soak"}`); err != nil {
			t.Logf("abort with autoPromotion refused (promoted first): %v: %s", err, out)
		}
		waitComplete(t, ns, "web")
	})
	scenario("pauseabort", func(t *testing.T) {
		// kubectl rollout pause, then abort, then kubectl rollout resume.
		ns := nss["pauseabort"]
		setImage(t, ns, "web", "nginx:q1")
		rollouts.Add(1)
		waitHeld(t, ns, 2, contract.WaitingForPromote)
		update(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Paused = true })
		if out, err := updateCLI(ns, "web", contract.UpdateAbort, `{"reason":"soak"}`); err != nil {
			t.Logf("abort while paused: %v: %s", err, out)
		}
		time.Sleep(5 * time.Second)
		update(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Paused = false })
		waitComplete(t, ns, "web")
		if d := getDeployment(t, ns, "web"); d.Spec.Template.Spec.Containers[0].Image != "nginx:q0" {
			t.Errorf("after pause, abort and resume: image %s, want nginx:q0 (the abort restores the stable template)", d.Spec.Template.Spec.Containers[0].Image)
		}
	})
	scenario("instant", func(t *testing.T) {
		rollImages(t, nss["instant"], "nginx:i", 20)
		d := getDeployment(t, nss["instant"], "web")
		if got, want := d.Annotations[k8s.StableAnnotation], hashOfOr(t, nss["instant"], "nginx:i20"); got != want {
			t.Errorf("after 20 rollouts: %s = %q, want nginx:i20's template %q", k8s.StableAnnotation, got, want)
		}
	})
	// Two rollouts write one HTTPRoute at once, each its own rule: neither write may undo the
	// other's (a conflict is read again, never overwritten), and each rule's weights follow its
	// own Deployment's pods.
	for _, name := range []string{"a", "b"} {
		scenario("tworules-"+name, func(t *testing.T) {
			ns := nss["tworules"]
			for i := 1; i <= 3; i++ {
				image := fmt.Sprintf("nginx:%s%d", name, i)
				setImage(t, ns, name, image)
				rollouts.Add(1)
				waitHeldNamed(t, ns, name, 4, contract.WaitingForPromote)
				if i == 2 {
					if out, err := updateCLI(ns, name, contract.UpdateAbort, `{"reason":"soak"}`); err != nil {
						t.Fatalf("%s: abort: %v\n%s", name, err, out)
					}
					waitCompleteNamed(t, ns, name, fmt.Sprintf("nginx:%s1", name))
					continue
				}
				if out, err := updateCLI(ns, name, contract.UpdatePromote, `{"full":true}`); err != nil {
					t.Fatalf("%s: promote: %v\n%s", name, err, out)
				}
				waitCompleteNamed(t, ns, name, image)
			}
		})
	}
	wg.Wait()
	time.Sleep(time.Second)
	elapsed := time.Since(start)
	checkTwoRulesAtRest(t, dc, nss["tworules"])
	sent, failed, firstFail, byRole := load.end()
	samples, bad := sampler.end()

	rate := float64(sent) / elapsed.Seconds()
	t.Logf("soak: %d rollouts in %s; %d requests (%.0f/s), %d failed; %d samples, %d with a weighted backend without an available pod",
		rollouts.Load(), elapsed.Round(time.Second), sent, rate, failed, samples, len(bad))
	for _, r := range roles {
		t.Logf("soak: %s: %d requests", r, byRole[r])
	}
	sort.Slice(abortTimes, func(i, j int) bool { return abortTimes[i] < abortTimes[j] })
	med, p99 := percentile(abortTimes, 50), percentile(abortTimes, 99)
	t.Logf("soak: %d aborts, from the command to 100%% of traffic on stable pods: median %s, p99 %s, all %v",
		len(abortTimes), med.Round(time.Millisecond), p99.Round(time.Millisecond), roundAll(abortTimes))
	if f := os.Getenv("SOAK_REPORT"); f != "" {
		report := fmt.Sprintf("rollouts %d\nseconds %.0f\nrequests %d\nrate %.0f\nfailed %d\nsamples %d\nbad_samples %d\naborts %d\nabort_median_ms %d\nabort_p99_ms %d\n",
			rollouts.Load(), elapsed.Seconds(), sent, rate, failed, samples, len(bad), len(abortTimes), med.Milliseconds(), p99.Milliseconds())
		_ = os.WriteFile(f, []byte(report), 0o644)
	}
	if n := rollouts.Load(); n < 30 {
		t.Errorf("soak: %d rollouts, want at least 30", n)
	}
	if rate < 100 {
		t.Errorf("soak: %.0f requests a second, want at least 100", rate)
	}
	if failed > 0 {
		t.Errorf("soak: %d of %d requests failed; first: %s", failed, sent, firstFail)
	}
	if want := int(elapsed / (60 * time.Millisecond)); samples < want {
		t.Errorf("soak: %d samples in %s, want one every 50 ms (at least %d)", samples, elapsed.Round(time.Second), want)
	}
	if len(bad) > 0 {
		t.Errorf("soak: %d of %d samples had a backend with weight and no available pod; first: %s", len(bad), samples, bad[0])
	}
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := (len(d)*p + 99) / 100
	return d[min(max(i-1, 0), len(d)-1)]
}

func roundAll(d []time.Duration) []time.Duration {
	out := make([]time.Duration, len(d))
	for i, x := range d {
		out[i] = x.Round(time.Millisecond)
	}
	return out
}

// startTraefikOn runs Traefik with its Kubernetes Gateway provider on the stack's apiserver,
// watching the namespaces, one entrypoint on a free port, and its requests to pods through the
// pod network (HTTP_PROXY: Go's transport never proxies loopback, so the apiserver is reached
// directly). It returns the entrypoint's port; the test's end stops it.
func startTraefikOn(t *testing.T, nss []string, pods *podNetwork) int {
	t.Helper()
	bin := stack.ToolPath(env.tools, "traefik")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("traefik %s is not built (%v): run make tools", stack.TraefikVersion, err)
	}
	port, err := stack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{
		fmt.Sprintf("--entryPoints.web.address=127.0.0.1:%d", port),
		"--providers.kubernetesgateway=true",
		"--providers.kubernetesgateway.namespaces=" + strings.Join(nss, ","),
		"--providers.providersThrottleDuration=" + traefikThrottle.String(),
		"--global.checkNewVersion=false", "--global.sendAnonymousUsage=false",
		"--log.level=INFO",
	}
	penv := []string{"KUBECONFIG=" + env.stack.Kubeconfig, "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT=",
		"HTTP_PROXY=socks5://" + pods.addr, "http_proxy=", "NO_PROXY=", "no_proxy=", "HTTPS_PROXY=", "https_proxy="}
	p, err := stack.StartProc(env.logDir, "traefik-"+nss[0], bin, args, penv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("---- traefik log tail ----\n%s", p.Tail(4000))
		}
	})
	return port
}

// createGateway creates the GatewayClass for Traefik's controller and a Gateway in ns with an
// HTTP listener on Traefik's entrypoint port; allowAll lets routes of every namespace attach.
func createGateway(t *testing.T, dc dynamic.Interface, ns string, port int, allowAll bool) {
	t.Helper()
	ctx := context.Background()
	gcRes := activities.HTTPRouteResource
	gcRes.Resource = "gatewayclasses"
	class := "traefik-" + ns
	gc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
		"metadata": map[string]any{"name": class},
		"spec":     map[string]any{"controllerName": "traefik.io/gateway-controller"},
	}}
	if _, err := dc.Resource(gcRes).Create(ctx, gc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create gatewayclass: %v", err)
	}
	t.Cleanup(func() { _ = dc.Resource(gcRes).Delete(context.Background(), class, metav1.DeleteOptions{}) })
	gwRes := activities.HTTPRouteResource
	gwRes.Resource = "gateways"
	listener := map[string]any{"name": "web", "port": int64(port), "protocol": "HTTP"}
	if allowAll {
		listener["allowedRoutes"] = map[string]any{"namespaces": map[string]any{"from": "All"}}
	}
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "gateway"},
		"spec": map[string]any{
			"gatewayClassName": class,
			"listeners":        []any{listener},
		},
	}}
	if _, err := dc.Resource(gwRes).Namespace(ns).Create(ctx, gw, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create gateway: %v", err)
	}
}

// soakRoute creates the HTTPRoute "web" in ns for host <role>.soak.test on the Gateway in
// gwNS, its one rule all to backend.
func soakRoute(t *testing.T, dc dynamic.Interface, ns, gwNS, role, backend string) {
	t.Helper()
	route := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "web"},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"name": "gateway", "namespace": gwNS}},
			"hostnames":  []any{role + ".soak.test"},
			"rules": []any{map[string]any{
				"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"}}},
				"backendRefs": []any{map[string]any{"name": backend, "port": int64(80)}},
			}},
		},
	}}
	if _, err := dc.Resource(activities.HTTPRouteResource).Namespace(ns).Create(context.Background(), route, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create httproute in %s: %v", ns, err)
	}
}

// twoRulesRoute creates the HTTPRoute "web" in ns for host tworules.soak.test with two rules:
// rule 0 (every request) to a-stable, rule 1 (the header X-App: b) to b-stable.
func twoRulesRoute(t *testing.T, dc dynamic.Interface, ns, gwNS string) {
	t.Helper()
	for _, name := range []string{"a", "b"} {
		for _, svc := range []string{name + "-stable", name + "-canary"} {
			s := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc},
				Spec: corev1.ServiceSpec{
					Selector: map[string]string{"app": name},
					Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
				},
			}
			if _, err := env.kube.CoreV1().Services(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create service %s/%s: %v", ns, svc, err)
			}
		}
	}
	prefix := map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"}}
	route := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "web"},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"name": "gateway", "namespace": gwNS}},
			"hostnames":  []any{"tworules.soak.test"},
			"rules": []any{
				map[string]any{
					"matches":     []any{prefix},
					"backendRefs": []any{map[string]any{"name": "a-stable", "port": int64(80)}},
				},
				map[string]any{
					"matches": []any{map[string]any{"path": prefix["path"],
						"headers": []any{map[string]any{"name": "X-App", "value": "b"}}}},
					"backendRefs": []any{map[string]any{"name": "b-stable", "port": int64(80)}},
				},
			},
		},
	}}
	if _, err := dc.Resource(activities.HTTPRouteResource).Namespace(ns).Create(context.Background(), route, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create httproute in %s: %v", ns, err)
	}
}

// checkTwoRulesAtRest checks the tworules route at rest: each rule sends everything to its
// own Deployment's stable Service, which selects that Deployment's last image.
func checkTwoRulesAtRest(t *testing.T, dc dynamic.Interface, ns string) {
	t.Helper()
	r, err := dc.Resource(activities.HTTPRouteResource).Namespace(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get httproute: %v", err)
	}
	rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
	if len(rules) != 2 {
		t.Fatalf("tworules: the route has %d rules, want the two it was created with", len(rules))
	}
	for i, name := range []string{"a", "b"} {
		refs, _, _ := unstructured.NestedSlice(rules[i].(map[string]any), "backendRefs")
		got := map[string]int64{}
		for _, ref := range refs {
			m := ref.(map[string]any)
			w, found, _ := unstructured.NestedInt64(m, "weight")
			if !found {
				w = 1
			}
			got[m["name"].(string)] = w
		}
		if got[name+"-stable"] <= 0 || got[name+"-canary"] != 0 {
			t.Errorf("tworules: rule %d at rest: backends %v, want all to %s-stable", i, got, name)
		}
		for svc := range got {
			if !strings.HasPrefix(svc, name+"-") {
				t.Errorf("tworules: rule %d sends to %s, another Deployment's Service", i, svc)
			}
		}
		s, err := env.kube.CoreV1().Services(ns).Get(context.Background(), name+"-stable", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h, want := s.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey], imageHash(t, ns, name, "nginx:"+name+"3"); h != want {
			t.Errorf("tworules: %s-stable selects %q, want nginx:%s3's template %q", name, h, name, want)
		}
	}
}

// waitHeldNamed is waitHeld for the Deployment name.
func waitHeldNamed(t *testing.T, ns, name string, step int, waiting string) {
	t.Helper()
	eventually(t, 2*time.Minute, func() string {
		v, err := env.tc.QueryWorkflow(context.Background(), workflowID(ns, name), "", contract.QueryStatus)
		if err != nil {
			return err.Error() // the worker may be down a moment (the kills scenario)
		}
		var st contract.Status
		if err := v.Get(&st); err != nil {
			return err.Error()
		}
		if st.Steps == nil || st.Steps.Step != step || st.Steps.WaitingFor != waiting {
			return fmt.Sprintf("%s: steps %+v, want step %d waiting for %s", name, st.Steps, step, waiting)
		}
		return ""
	})
}

// waitCompleteNamed is waitCompleteImage for the Deployment name (labels app=name).
func waitCompleteNamed(t *testing.T, ns, name, image string) {
	t.Helper()
	eventually(t, 3*time.Minute, func() string {
		d := getDeployment(t, ns, name)
		if d.Spec.Template.Spec.Containers[0].Image != image {
			return name + ": template " + d.Spec.Template.Spec.Containers[0].Image + ", want " + image
		}
		if p := rolloutPending(d); p != "" {
			return name + ": " + p
		}
		for _, rs := range replicaSets(t, ns) {
			if rs.Labels["app"] == name && rs.Spec.Template.Spec.Containers[0].Image != image && *rs.Spec.Replicas != 0 {
				return fmt.Sprintf("%s: replicaset %s (%s) at %d", name, rs.Name, rs.Spec.Template.Spec.Containers[0].Image, *rs.Spec.Replicas)
			}
		}
		return ""
	})
}

// imageHash is the pod-template-hash of the ReplicaSet of Deployment name with image.
func imageHash(t *testing.T, ns, name, image string) string {
	t.Helper()
	for _, rs := range replicaSets(t, ns) {
		if rs.Labels["app"] == name && rs.Spec.Template.Spec.Containers[0].Image == image {
			return rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		}
	}
	return ""
}

// followPods runs the pod network's servers for the pods of the namespaces.
func followPods(t *testing.T, nss []string, pn *podNetwork) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var synced []cache.InformerSynced
	var factories []informers.SharedInformerFactory
	for _, ns := range nss {
		kf := informers.NewSharedInformerFactoryWithOptions(env.kube, 0, informers.WithNamespace(ns))
		inf := kf.Core().V1().Pods().Informer()
		pod := func(o any, deleted bool) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				pn.onPod(p, deleted)
			}
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { pod(o, false) },
			UpdateFunc: func(_, o any) { pod(o, false) },
			DeleteFunc: func(o any) { pod(o, true) },
		}); err != nil {
			t.Fatal(err)
		}
		kf.Start(ctx.Done())
		synced = append(synced, inf.HasSynced)
		factories = append(factories, kf)
	}
	t.Cleanup(func() {
		cancel()
		for _, kf := range factories {
			kf.Shutdown()
		}
	})
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		t.Fatal("pod informers did not sync")
	}
}

// waitEndpointsAll waits until the Service's ready endpoints are the addresses of the Ready
// pods it selects.
func waitEndpointsAll(t *testing.T, ns, svc string) {
	t.Helper()
	s, err := env.kube.CoreV1().Services(ns).Get(context.Background(), svc, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hash := s.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey]
	if hash == "" {
		rss := replicaSets(t, ns)
		hash = rss[0].Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	}
	waitEndpoints(t, ns, svc, hash)
}

// waitAcceptedNamed waits for the route "web" in ns to be accepted by the gateway.
func waitAcceptedNamed(t *testing.T, dc dynamic.Interface, ns string) { waitAccepted(t, dc, ns) }

// getHost sends one request for host ("": the gateway's address) with header and returns the
// answering pod's hash, or "" and why not.
func (g *gatewayClient) getHost(host string, header map[string]string) (string, string) {
	req, _ := http.NewRequest(http.MethodGet, g.url, nil)
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := g.c.Do(req)
	if err != nil {
		return "", err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Pod") == "" {
		return "", fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return string(b), ""
}

// soakPace is the pause between two requests of one stream.
const soakPace = 30 * time.Millisecond

// soakLoad sends requests without pause, one stream per role, and counts them.
type soakLoad struct {
	mu     sync.Mutex
	sent   int
	failed int
	first  string
	byRole map[string]int
	stop   chan struct{}
	wg     sync.WaitGroup
}

func startSoakLoad(g *gatewayClient, roles []string) *soakLoad {
	l := &soakLoad{byRole: map[string]int{}, stop: make(chan struct{})}
	for _, r := range roles {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			host := r + ".soak.test"
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				var hdr map[string]string
				if r == "headers" && n%2 == 1 {
					hdr = map[string]string{"X-Canary": "true"}
				}
				if r == "tworules" && n%2 == 1 {
					hdr = map[string]string{"X-App": "b"}
				}
				_, why := g.getHost(host, hdr)
				// About 30 requests a second per stream: well above 100 a second in all, and
				// no more, so the load does not starve the stack on a small machine.
				time.Sleep(soakPace)
				l.mu.Lock()
				l.sent++
				l.byRole[r]++
				if why != "" {
					l.failed++
					if l.first == "" {
						l.first = fmt.Sprintf("%s %s: %s", time.Now().Format("15:04:05.000"), host, why)
					}
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

func (l *soakLoad) end() (sent, failed int, first string, byRole map[string]int) {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent, l.failed, l.first, l.byRole
}

// soakSampler samples every route, Service and pod of the namespaces every 50 ms, as the
// apiserver's watches deliver them (informers: every change, at no cost to the apiserver; three
// lists every 50 ms took it over on this machine), and records each sample in which a backend
// with weight selects no available pod (Ready, not terminating).
type soakSampler struct {
	mu      sync.Mutex
	samples int
	bad     []string
	stop    chan struct{}
	done    chan struct{}
}

func startSoakSampler(t *testing.T, dc dynamic.Interface, nss []string) *soakSampler {
	t.Helper()
	s := &soakSampler{stop: make(chan struct{}), done: make(chan struct{})}
	in := map[string]bool{}
	for _, ns := range nss {
		in[ns] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	kf := informers.NewSharedInformerFactory(env.kube, 0)
	df := dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
	pods, svcs := kf.Core().V1().Pods().Informer(), kf.Core().V1().Services().Informer()
	routes := df.ForResource(activities.HTTPRouteResource).Informer()
	kf.Start(ctx.Done())
	df.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		kf.Shutdown()
		df.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced, svcs.HasSynced, routes.HasSynced) {
		t.Fatal("sampler: informers did not sync")
	}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			bad := sampleOnce(routes.GetStore(), svcs.GetStore(), pods.GetStore(), in)
			s.mu.Lock()
			s.samples++
			s.bad = append(s.bad, bad...)
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *soakSampler) end() (int, []string) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples, s.bad
}

// sampleOnce returns each weighted backend of the routes in the namespaces in that selects no
// available pod.
func sampleOnce(routes, svcs, pods cache.Store, in map[string]bool) (bad []string) {
	svcBy := map[string]*corev1.Service{}
	for _, o := range svcs.List() {
		s := o.(*corev1.Service)
		svcBy[s.Namespace+"/"+s.Name] = s
	}
	var pl []*corev1.Pod
	for _, o := range pods.List() {
		if p := o.(*corev1.Pod); in[p.Namespace] {
			pl = append(pl, p)
		}
	}
	now := time.Now().Format("15:04:05.000")
	for _, o := range routes.List() {
		r := o.(*unstructured.Unstructured)
		ns := r.GetNamespace()
		if !in[ns] {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(r.Object, "spec", "rules")
		for ri, x := range rules {
			refs, _, _ := unstructured.NestedSlice(x.(map[string]any), "backendRefs")
			for _, ref := range refs {
				m := ref.(map[string]any)
				w, found, _ := unstructured.NestedInt64(m, "weight")
				if found && w == 0 {
					continue
				}
				name, _ := m["name"].(string)
				svc := svcBy[ns+"/"+name]
				if svc == nil {
					bad = append(bad, fmt.Sprintf("%s %s: route rule %d sends %d to Service %s, which does not exist", now, ns, ri, w, name))
					continue
				}
				sel := labels.SelectorFromSet(svc.Spec.Selector)
				n := 0
				for _, p := range pl {
					if p.Namespace == ns && p.DeletionTimestamp == nil && podReady(p) && sel.Matches(labels.Set(p.Labels)) {
						n++
					}
				}
				if n == 0 {
					bad = append(bad, fmt.Sprintf("%s %s: route rule %d sends weight %d to Service %s (%v) with no available pod", now, ns, ri, w, name, svc.Spec.Selector))
				}
			}
		}
	}
	return bad
}

// waitHeld waits until the stepped rollout waits for `waiting` at 1-based step `step`, using
// the Temporal client, and returns the status.
func waitHeld(t *testing.T, ns string, step int, waiting string) contract.Status {
	t.Helper()
	var st contract.Status
	eventually(t, 2*time.Minute, func() string {
		v, err := env.tc.QueryWorkflow(context.Background(), workflowID(ns, "web"), "", contract.QueryStatus)
		if err != nil {
			return err.Error()
		}
		st = contract.Status{}
		if err := v.Get(&st); err != nil {
			return err.Error()
		}
		if st.Steps == nil || st.Steps.Step != step || st.Steps.WaitingFor != waiting {
			return fmt.Sprintf("steps %+v, want step %d waiting for %s", st.Steps, step, waiting)
		}
		return ""
	})
	return st
}

// waitCompleteImage waits until the Deployment's rollout of image is complete and every other
// ReplicaSet is at 0.
func waitCompleteImage(t *testing.T, ns, image string) {
	t.Helper()
	eventually(t, 3*time.Minute, func() string {
		d := getDeployment(t, ns, "web")
		if d.Spec.Template.Spec.Containers[0].Image != image {
			return "template " + d.Spec.Template.Spec.Containers[0].Image + ", want " + image
		}
		if p := rolloutPending(d); p != "" {
			return p
		}
		for _, rs := range replicaSets(t, ns) {
			if rs.Spec.Template.Spec.Containers[0].Image != image && *rs.Spec.Replicas != 0 {
				return "replicasets " + sizes(t, ns)
			}
		}
		return ""
	})
}

// waitActive waits until the blue-green active Service "web" selects image's pods (promoted).
func waitActive(t *testing.T, ns, image string) {
	t.Helper()
	eventually(t, 2*time.Minute, func() string {
		if h := hashOfOr(t, ns, image); h == "" || selects(t, ns, "web") != sel(h) {
			return image + " not promoted yet: active " + selects(t, ns, "web")
		}
		return ""
	})
}

// hashOfOr is the pod-template-hash of image's ReplicaSet, "" when there is none yet.
func hashOfOr(t *testing.T, ns, image string) string {
	t.Helper()
	for _, rs := range replicaSets(t, ns) {
		if rs.Spec.Template.Spec.Containers[0].Image == image {
			return rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		}
	}
	return ""
}

// watchSelector records every pod-template-hash the Service's selector takes until the
// returned function is called.
func watchSelector(t *testing.T, ns, name string) func() []string {
	t.Helper()
	w, err := env.kube.CoreV1().Services(ns).Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	go func() {
		for ev := range w.ResultChan() {
			if s, ok := ev.Object.(*corev1.Service); ok {
				mu.Lock()
				seen = append(seen, s.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey])
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		w.Stop()
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// watchCanaryWeight records every canary weight above 0 the route carries from now until stop
// is called (a watch on the HTTPRoute).
func watchCanaryWeight(t *testing.T, dc dynamic.Interface, ns string) func() []int64 {
	t.Helper()
	var mu sync.Mutex
	var seen []int64
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			r, err := dc.Resource(activities.HTTPRouteResource).Namespace(ns).Get(context.Background(), "web", metav1.GetOptions{})
			if err != nil {
				continue
			}
			v := routeOf(nil, ns, r)
			sel := map[string]string{}
			for _, n := range []string{"web-stable", "web-canary"} {
				if svc, err := env.kube.CoreV1().Services(ns).Get(context.Background(), n, metav1.GetOptions{}); err == nil {
					sel[n] = svc.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey]
				}
			}
			if v.canaryWeight > 0 && sel["web-stable"] != sel["web-canary"] {
				mu.Lock()
				seen = append(seen, v.canaryWeight)
				mu.Unlock()
			}
		}
	}()
	return func() []int64 {
		close(done)
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}
