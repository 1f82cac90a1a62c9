//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/k8s"
)

// The data plane (docs/traffic.md): Traefik's Kubernetes Gateway provider routes real HTTP
// requests by the HTTPRoute the rollout moves, to the endpoints kube-controller-manager's
// EndpointSlice controller derives from the Services' selectors and the pods' readiness.
//
// kwok gives each pod an address from --cidr (10.0.0.0/16 here); nothing listens there.
// Addresses in 127.0.0.0/8, which a test server could bind, do not work: kube-apiserver
// rejects loopback addresses in an EndpointSlice ("may not be in the loopback range"), so the
// slices would stay empty. Instead Traefik runs with HTTP_PROXY set to a SOCKS5 server in the
// test, the pod network: Go's transport (and Traefik's fast proxy) dial every backend through
// it, naming the pod's address and port, and the pod network connects the dial to that pod's
// HTTP server, which answers with the pod's ReplicaSet (pod-template-hash). A pod's server runs
// from when kwok gives the pod an address until its termination grace period has passed after
// the pod starts terminating (kwok removes a terminating pod's object at once; a kubelet would
// keep its container running that long, which is how a real pod serves while the
// EndpointSlices and the gateway catch up); then its connections close. A dial to an address
// with no server is refused (SOCKS reply 5, as a closed port refuses a TCP connect). An HTTP
// proxy would not do: Traefik sends origin-form requests (it sets URL.Opaque), so an HTTP
// proxy cannot tell which pod a request is for.

// podPort is the containers' port, the Services' targetPort.
const podPort = 8080

// podNetwork is the SOCKS5 server and the pods' HTTP servers.
type podNetwork struct {
	mu   sync.Mutex
	byIP map[string]*podServer
	// gone is the hash of the pod that last stopped at an address; stopped, per hash, when its
	// first pod stopped; toGone, per hash, the dials to an address after its pod stopped there
	// ("" for an address no pod ever had).
	gone map[string]string
	// stopped: per hash, when its first pod started terminating (or went).
	stopped map[string]time.Time
	toGone  map[string]int
	ln      net.Listener
	addr    string
}

// podServer is one pod's HTTP server, fed the connections the SOCKS server accepts for it.
type podServer struct {
	name, hash string
	// terminating: the pod is going; its server stops after the grace period.
	terminating bool
	conns       chan net.Conn
	closed      chan struct{}
	srv         *http.Server
}

func (p *podServer) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.closed:
		return nil, net.ErrClosed
	}
}
func (p *podServer) Close() error   { return nil }
func (p *podServer) Addr() net.Addr { return &net.TCPAddr{} }

func startPodNetwork(t *testing.T) *podNetwork {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pod network: listen: %v", err)
	}
	n := &podNetwork{byIP: map[string]*podServer{}, gone: map[string]string{}, stopped: map[string]time.Time{}, toGone: map[string]int{}, ln: l, addr: l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go n.dial(c)
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		n.mu.Lock()
		defer n.mu.Unlock()
		for ip, ps := range n.byIP {
			n.stop(ip, ps)
		}
	})
	return n
}

// dial serves one SOCKS5 CONNECT (RFC 1928, no authentication, an IPv4 address): it hands
// the connection to the pod's server at that address and port, or refuses it.
func (n *podNetwork) dial(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 262)
	if _, err := io.ReadFull(c, buf[:2]); err != nil || buf[0] != 5 {
		c.Close()
		return
	}
	if _, err := io.ReadFull(c, buf[:buf[1]]); err != nil {
		c.Close()
		return
	}
	if _, err := c.Write([]byte{5, 0}); err != nil {
		c.Close()
		return
	}
	// VER CMD RSV ATYP(1: IPv4) ADDR(4) PORT(2)
	if _, err := io.ReadFull(c, buf[:10]); err != nil || buf[1] != 1 || buf[3] != 1 {
		_, _ = c.Write([]byte{5, 8, 0, 1, 0, 0, 0, 0, 0, 0})
		c.Close()
		return
	}
	ip := net.IP(buf[4:8]).String()
	port := int(buf[8])<<8 | int(buf[9])
	n.mu.Lock()
	ps, ok := n.byIP[ip]
	if !ok || port != podPort {
		n.toGone[n.gone[ip]]++
		n.mu.Unlock()
		_, _ = c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0}) // connection refused
		c.Close()
		return
	}
	n.mu.Unlock()
	if _, err := c.Write([]byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0}); err != nil {
		c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	select {
	case ps.conns <- c:
	case <-ps.closed:
		c.Close()
	}
}

// onPod starts or stops a pod's server: up while it has an address and is not terminating.
func (n *podNetwork) onPod(p *corev1.Pod, deleted bool) {
	ip := p.Status.PodIP
	if ip == "" {
		return
	}
	hash := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
	n.mu.Lock()
	defer n.mu.Unlock()
	cur, ok := n.byIP[ip]
	if !deleted && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
		if ok && cur.name == p.Name {
			return
		}
		if ok {
			n.stop(ip, cur)
		}
		ps := &podServer{name: p.Name, hash: hash, conns: make(chan net.Conn), closed: make(chan struct{})}
		ps.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Pod", ps.name)
			fmt.Fprint(w, ps.hash)
		})}
		go func() { _ = ps.srv.Serve(ps) }()
		n.byIP[ip] = ps
		return
	}
	if ok && cur.name == p.Name && !cur.terminating {
		cur.terminating = true
		if _, ok := n.stopped[hash]; !ok {
			n.stopped[hash] = time.Now()
		}
		grace := time.Duration(0)
		if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
			grace = time.Duration(*g) * time.Second
		}
		time.AfterFunc(grace, func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.byIP[ip] == cur {
				n.stop(ip, cur)
			}
		})
	}
}

// stop ends a pod's server and its connections (n.mu held).
func (n *podNetwork) stop(ip string, ps *podServer) {
	close(ps.closed)
	_ = ps.srv.Close()
	delete(n.byIP, ip)
	n.gone[ip] = ps.hash
}

func (n *podNetwork) stoppedAt(hash string) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stopped[hash]
}

func (n *podNetwork) requestsToGone() map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]int{}
	for h, c := range n.toGone {
		out[h] = c
	}
	return out
}

// trafficSampler checks the invariant at every change it observes to the route, the two
// Services or the pods: the canary's weight is no larger than its share of the available
// (Ready, not terminating) pods its Service selects, and a backend with weight has an
// available pod; the stable Service, the fallback, may carry more than its share. When both
// Services select the same pods, or no pod is available at all, any weights hold.
type trafficSampler struct {
	mu       sync.Mutex
	samples  int
	breaches []string
	pods     cache.Indexer
	services cache.Indexer
	routes   cache.Indexer
	ns       string
	// since: when the breach under way began; windows: how long each lasted.
	since   time.Time
	windows []time.Duration
	// rss: the ReplicaSets; full: the Deployment's replicas; handovers: samples in a handover.
	rss       cache.Indexer
	full      int32
	handovers int
	// pending: samples of a handover whose stable ReplicaSet has not gone to 0 yet.
	pending []string
	// aborting: an abort is under way; the canary keeps what the stable pods cannot take yet
	// (k8s.AbortWeight), so only a backend with weight and no pod breaks the invariant.
	aborting atomic.Bool
}

func (s *trafficSampler) rsReplicas(hash string) int32 {
	for _, o := range s.rss.List() {
		if rs := o.(*appsv1.ReplicaSet); rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == hash && rs.Spec.Replicas != nil {
			return *rs.Spec.Replicas
		}
	}
	return -1
}

func (s *trafficSampler) check() {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, ok, _ := s.routes.GetByKey(s.ns + "/web")
	if !ok {
		return
	}
	v := routeOf(nil, s.ns, obj.(*unstructured.Unstructured))
	hash := map[string]string{}
	for _, name := range []string{"web-stable", "web-canary"} {
		o, ok, _ := s.services.GetByKey(s.ns + "/" + name)
		if !ok {
			return
		}
		hash[name] = o.(*corev1.Service).Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey]
	}
	avail := map[string]int64{}
	for _, o := range s.pods.List() {
		p := o.(*corev1.Pod)
		if p.DeletionTimestamp == nil && podReady(p) {
			avail[p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]]++
		}
	}
	s.samples++
	sh, ch := hash["web-stable"], hash["web-canary"]
	sa, ca := avail[sh], avail[ch]
	cw := max(v.canaryWeight, 0)
	now := time.Now()
	// The handover (k8s.TrafficHandover): past the last step, the canary takes everything as
	// the stable's last pods go (its ReplicaSet at 0, or the canary's at the Deployment's
	// full size). The route moves first, then the sync scales: a sample of the route at 100
	// before that is the handover if the stable ReplicaSet goes to 0 next, a breach if not.
	stableGone := s.rsReplicas(sh) == 0
	if stableGone {
		s.pending = nil
	}
	if sh != ch && cw == 100 && ca > 0 {
		s.handovers++
		if s.rsReplicas(ch) != s.full && !stableGone {
			s.pending = append(s.pending, fmt.Sprintf("%s: weights %d/%d on %d stable (%s) and %d canary (%s) available pods, and the stable ReplicaSet never went to 0",
				now.Format("15:04:05.000"), v.stableWeight, cw, sa, sh, ca, ch))
		}
		return
	}
	overShare := cw*(sa+ca) > 100*ca && !s.aborting.Load()
	if sh != ch && sa+ca > 0 && (overShare || (cw > 0 && ca == 0) || (v.stableWeight > 0 && sa == 0)) {
		s.breaches = append(s.breaches, fmt.Sprintf("%s: weights %d/%d on %d stable (%s) and %d canary (%s) available pods",
			now.Format("15:04:05.000"), v.stableWeight, cw, sa, sh, ca, ch))
		if s.since.IsZero() {
			s.since = now
		}
		return
	}
	if !s.since.IsZero() {
		s.windows = append(s.windows, now.Sub(s.since).Round(time.Millisecond))
		s.since = time.Time{}
	}
}

// sampleTraffic runs the sampler until the test ends (pn, if not nil, follows the pods too).
func sampleTraffic(t *testing.T, dc dynamic.Interface, ns string, pn *podNetwork, full int32) *trafficSampler {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	kf := informers.NewSharedInformerFactoryWithOptions(env.kube, 0, informers.WithNamespace(ns))
	df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, ns, nil)
	podInf, svcInf := kf.Core().V1().Pods().Informer(), kf.Core().V1().Services().Informer()
	routeInf := df.ForResource(activities.HTTPRouteResource).Informer()
	rsInf := kf.Apps().V1().ReplicaSets().Informer()
	s := &trafficSampler{ns: ns, pods: podInf.GetIndexer(), services: svcInf.GetIndexer(), routes: routeInf.GetIndexer(), rss: rsInf.GetIndexer(), full: full}
	check := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.check() },
		UpdateFunc: func(any, any) { s.check() },
		DeleteFunc: func(any) { s.check() },
	}
	pod := func(o any, deleted bool) {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if p, ok := o.(*corev1.Pod); ok && pn != nil {
			pn.onPod(p, deleted)
		}
		s.check()
	}
	for _, inf := range []cache.SharedIndexInformer{svcInf, routeInf, rsInf} {
		if _, err := inf.AddEventHandler(check); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { pod(o, false) },
		UpdateFunc: func(_, o any) { pod(o, false) },
		DeleteFunc: func(o any) { pod(o, true) },
	}); err != nil {
		t.Fatal(err)
	}
	kf.Start(ctx.Done())
	df.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		kf.Shutdown()
		df.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, svcInf.HasSynced, routeInf.HasSynced, rsInf.HasSynced) {
		t.Fatal("sampler: informers did not sync")
	}
	return s
}

// report fails t for every breach of the invariant the sampler saw (a weighted backend
// without an available pod), logs the count of samples otherwise, and returns how many of
// them saw the handover.
func (s *trafficSampler) report(t *testing.T) (handovers int) {
	t.Helper()
	s.mu.Lock()
	samples, handovers, windows := s.samples, s.handovers, append([]time.Duration(nil), s.windows...)
	breaches := append(append([]string(nil), s.breaches...), s.pending...)
	s.mu.Unlock()
	if len(breaches) > 0 {
		t.Errorf("invariant: %d breaches in %d samples, for %v; first: %s", len(breaches), samples, windows, breaches[0])
	} else {
		t.Logf("invariant: %d samples, 0 breaches (%d in the handover)", samples, handovers)
	}
	return handovers
}

// noInvariantEvents fails t for every TrafficInvariant event on ns/web: the worker's own
// report that the route sent traffic where no pod served it.
func noInvariantEvents(t *testing.T, ns string) {
	t.Helper()
	for _, ev := range events(t, ns, "web") {
		if strings.Contains(ev, "TrafficInvariant") {
			t.Errorf("event %s: the invariant broke", ev)
		}
	}
}

// installDataPlaneCRDs adds to installGatewayCRDs' the standard-channel CRDs Traefik's
// provider also watches (GRPCRoute, ReferenceGrant, BackendTLSPolicy), from the same module.
func installDataPlaneCRDs(t *testing.T) {
	t.Helper()
	installGatewayCRDs(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module scratch\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/gateway-api@"+gatewayAPIVersion)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download sigs.k8s.io/gateway-api@%s: %v", gatewayAPIVersion, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download: no Dir in %s", out)
	}
	for _, f := range []string{"grpcroutes", "referencegrants", "backendtlspolicies"} {
		kubectl(t, "apply", "--server-side", "-f", filepath.Join(mod.Dir, "config", "crd", "standard", "gateway.networking.k8s.io_"+f+".yaml"))
	}
	if err := waitCRDs("crd/grpcroutes.gateway.networking.k8s.io", "crd/referencegrants.gateway.networking.k8s.io", "crd/backendtlspolicies.gateway.networking.k8s.io"); err != nil {
		t.Fatal(err)
	}
}

// waitCRDs waits until the CRDs are established. `kubectl wait` fails at once on a CRD whose
// status has no conditions yet (just applied), so it is tried again for up to a minute.
func waitCRDs(crds ...string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := runKubectl(append([]string{"--kubeconfig", env.stack.Kubeconfig, "wait", "--for", "condition=established", "--timeout=60s"}, crds...)...)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("wait for the CRDs %v: %v\n%s", crds, err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// startTraefik runs Traefik with its Kubernetes Gateway provider on the stack's apiserver
// (the namespace ns only), one entrypoint on a free port, and its requests to pods through
// the pod network. It returns the entrypoint's port; the test's end stops it.
func startTraefik(t *testing.T, ns string, pods *podNetwork) int {
	t.Helper()
	return startTraefikOn(t, []string{ns}, pods)
}

// traefikThrottle is Traefik's providersThrottleDuration in the data-plane test.
const traefikThrottle = 0 * time.Second

// gatewayObjects creates the GatewayClass for Traefik's controller, a Gateway with an HTTP
// listener on Traefik's entrypoint port, the two Services (port 80 to the pods' 8080) and the
// HTTPRoute the rollout drives, its rule 0 all to web-stable.
func gatewayObjects(t *testing.T, dc dynamic.Interface, ns string, port int) {
	t.Helper()
	createGateway(t, dc, ns, port, false)
	createTrafficObjects(t, context.Background(), dc, ns, podPort)
}

// gatewayClient sends requests to Traefik's entrypoint (never through a proxy).
type gatewayClient struct {
	url string
	c   *http.Client
}

func newGatewayClient(port int) *gatewayClient {
	return &gatewayClient{url: fmt.Sprintf("http://127.0.0.1:%d/", port), c: &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4},
	}}
}

// get sends one request and returns the answering pod's hash, or "" and why not.
func (g *gatewayClient) get(header map[string]string) (hash string, why string) {
	return g.getHost("", header)
}

// split sends n requests and counts the answers by hash ("" counts failures; the first one is
// returned).
func (g *gatewayClient) split(n int, header map[string]string) (map[string]int, string) {
	counts, first := map[string]int{}, ""
	for range n {
		h, why := g.get(header)
		counts[h]++
		if why != "" && first == "" {
			first = why
		}
	}
	return counts, first
}

// binomialOK: got of n requests to a backend with weight w% is within k standard deviations
// of n×w/100 (exact when w is 0 or 100).
func binomialOK(got, n int, w int64, k float64) (bool, float64) {
	p := float64(w) / 100
	mean, sd := float64(n)*p, math.Sqrt(float64(n)*p*(1-p))
	return math.Abs(float64(got)-mean) <= k*sd, sd
}

// waitEndpoints waits until the Service's EndpointSlices list, as ready, exactly the
// addresses of the Ready pods with the pod-template-hash.
func waitEndpoints(t *testing.T, ns, svc, hash string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 60*time.Second, func() string {
		pl, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: appsv1.DefaultDeploymentUniqueLabelKey + "=" + hash})
		if err != nil {
			return err.Error()
		}
		var want []string
		for i := range pl.Items {
			if p := &pl.Items[i]; p.DeletionTimestamp == nil && podReady(p) && p.Status.PodIP != "" {
				want = append(want, p.Status.PodIP)
			}
		}
		sl, err := env.kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + svc})
		if err != nil {
			return err.Error()
		}
		var got []string
		for _, s := range sl.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					got = append(got, e.Addresses...)
				}
			}
		}
		sort.Strings(want)
		sort.Strings(got)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			return fmt.Sprintf("service %s: ready endpoints %v, want the %d Ready pods of %s %v", svc, got, len(want), hash, want)
		}
		return ""
	})
}

// waitAccepted waits until Traefik reports the route's current generation accepted on its
// parent (status.parents[].conditions Accepted with that observedGeneration), the sign that
// its configuration has the route as it is now.
func waitAccepted(t *testing.T, dc dynamic.Interface, ns string) {
	t.Helper()
	eventually(t, 60*time.Second, func() string {
		r, err := dc.Resource(activities.HTTPRouteResource).Namespace(ns).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		parents, _, _ := unstructured.NestedSlice(r.Object, "status", "parents")
		for _, p := range parents {
			conds, _, _ := unstructured.NestedSlice(p.(map[string]any), "conditions")
			for _, c := range conds {
				m := c.(map[string]any)
				g, _, _ := unstructured.NestedInt64(m, "observedGeneration")
				if m["type"] == "Accepted" && m["status"] == "True" && g == r.GetGeneration() {
					return ""
				}
			}
		}
		return fmt.Sprintf("httproute generation %d not accepted by traefik yet: status %v", r.GetGeneration(), r.Object["status"])
	})
}

// requestsPerCheck is how many requests each split check sends; sigmas is its tolerance.
const (
	requestsPerCheck = 400
	sigmas           = 5.0
)

// checkSplit waits for Traefik to accept the route as it is, then sends requestsPerCheck
// requests and checks the split by ReplicaSet against the weights (binomialOK at sigmas; no
// failed request), and that requests with hdr (when set) all reach the canary.
func checkSplit(t *testing.T, dc dynamic.Interface, g *gatewayClient, ns string, want routeView, hdr map[string]string) {
	t.Helper()
	// The data plane follows the objects with a lag: kube-controller-manager writes a
	// Service's EndpointSlices after its selector or a pod's readiness changes, and Traefik
	// reloads after the route or a slice changes. Wait for both, timed, before measuring.
	start := time.Now()
	waitEndpoints(t, ns, "web-stable", want.stableHash)
	waitEndpoints(t, ns, "web-canary", want.canaryHash)
	slices := time.Since(start)
	waitAccepted(t, dc, ns)
	// Traefik reports the route accepted before its new configuration serves every request
	// (measured: up to half a second later on this machine): batches of 100 requests until one
	// splits within 3σ of the weights and every backend with weight answers, then the
	// measurement.
	probe := time.Now()
	for {
		c, _ := g.split(100, nil)
		ok := c[""] == 0
		if want.stableHash == want.canaryHash {
			ok = ok && c[want.stableHash] == 100
		} else {
			for _, b := range []struct {
				hash string
				w    int64
			}{{want.stableHash, want.stableWeight}, {want.canaryHash, want.canaryWeight}} {
				in, _ := binomialOK(c[b.hash], 100, b.w, 3)
				ok = ok && in && (b.w > 0) == (c[b.hash] > 0)
			}
		}
		if ok {
			break
		}
		if time.Since(probe) > 30*time.Second {
			t.Errorf("weights %d/%d: the data plane did not follow within 30s: the last 100 requests %v", want.stableWeight, want.canaryWeight, c)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("weights %d/%d: EndpointSlices right %s after the route showed the weights; requests followed %s after that",
		want.stableWeight, want.canaryWeight, slices.Round(10*time.Millisecond), time.Since(start.Add(slices)).Round(10*time.Millisecond))
	counts, why := g.split(requestsPerCheck, nil)
	if counts[""] > 0 {
		t.Errorf("weights %d/%d: %d of %d requests failed; first: %s", want.stableWeight, want.canaryWeight, counts[""], requestsPerCheck, why)
	}
	if want.stableHash == want.canaryHash {
		if counts[want.stableHash] != requestsPerCheck {
			t.Errorf("at rest: %v of %d requests, want all on %s", counts, requestsPerCheck, want.stableHash)
		}
	} else {
		for _, b := range []struct {
			hash string
			w    int64
		}{{want.stableHash, want.stableWeight}, {want.canaryHash, want.canaryWeight}} {
			ok, sd := binomialOK(counts[b.hash], requestsPerCheck, b.w, sigmas)
			if !ok {
				t.Errorf("weights %d/%d: %d of %d requests on %s (weight %d%%, σ %.1f), want within %.0fσ; all: %v",
					want.stableWeight, want.canaryWeight, counts[b.hash], requestsPerCheck, b.hash, b.w, sd, sigmas, counts)
			}
		}
	}
	if want.stableHash == want.canaryHash {
		t.Logf("weights %d/%d on one ReplicaSet: %d of %d requests on %s", want.stableWeight, want.canaryWeight, counts[want.stableHash], requestsPerCheck, want.stableHash)
	} else {
		t.Logf("weights %d/%d: %d requests: %d stable (%s), %d canary (%s)", want.stableWeight, want.canaryWeight,
			requestsPerCheck, counts[want.stableHash], want.stableHash, counts[want.canaryHash], want.canaryHash)
	}
	if hdr == nil {
		return
	}
	hc, why := g.split(requestsPerCheck/4, hdr)
	if hc[want.canaryHash] != requestsPerCheck/4 {
		t.Errorf("header route: %v of %d requests with %v, want all on the canary %s (first failure: %s)", hc, requestsPerCheck/4, hdr, want.canaryHash, why)
	} else {
		t.Logf("header route: %d of %d requests with %v on the canary", hc[want.canaryHash], requestsPerCheck/4, hdr)
	}
}

// loadGen sends requests one after another until stopped, recording when each answer came and
// from which ReplicaSet.
type loadGen struct {
	mu     sync.Mutex
	hits   []hit
	stop   chan struct{}
	done   chan struct{}
	failed int
	first  string
}

type hit struct {
	at   time.Time
	hash string
}

func startLoad(g *gatewayClient) *loadGen {
	l := &loadGen{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			h, why := g.get(nil)
			l.mu.Lock()
			if why != "" {
				l.failed++
				if l.first == "" {
					l.first = why
				}
			} else {
				l.hits = append(l.hits, hit{at: time.Now(), hash: h})
			}
			l.mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return l
}

func (l *loadGen) end() ([]hit, int, string) {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hits, l.failed, l.first
}

// TestTrafficDataPlane: the traffic steps proven with real requests through a real Gateway API
// implementation (Traefik, from hack/tools.sh). A stepped rollout with
// temporal-rollout.io/traffic: at each pause 400 requests split by ReplicaSet as the route's
// weights say (within 5σ of the binomial count; no failure), requests with the header route's
// header all reach the canary; the invariant holds at every change the test observes (0
// breaches); an abort mid-step moves every request back to the stable pods as they come back,
// with no failed request and none to a stopped pod (a request stream through the abort); a second rollout promoted to completion sends every request to the new ReplicaSet.
func TestTrafficDataPlane(t *testing.T) {
	installDataPlaneCRDs(t)
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	dc := dynamicClient(t)
	pods := startPodNetwork(t)
	port := startTraefik(t, ns, pods)
	gatewayObjects(t, dc, ns, port)
	sampler := sampleTraffic(t, dc, ns, pods, 10)
	g := newGatewayClient(port)

	steps := `[{"setWeight":20},{"pause":{}},{"setHeaderRoute":{"name":"testers","match":[{"name":"X-Canary","value":"true"}]}},{"setWeight":50},{"pause":{}}]`
	traffic := `{"httpRoute":{"name":"web"},"stableService":"web-stable","canaryService":"web-canary"}`
	canaryHdr := map[string]string{"X-Canary": "true"}
	// A pod serves for 2s after it starts terminating (its grace period).
	grace := func(d *appsv1.Deployment) { d.Spec.Template.Spec.TerminationGracePeriodSeconds = new(int64(2)) }
	create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("25%", "25%"), withSteps(steps), withAnnotation(k8s.TrafficAnnotation, traffic), grace))
	waitComplete(t, ns, "web")
	h1 := hashOf(t, ns, "nginx:1.25")
	waitRoute(t, dc, ns, routeView{stableWeight: 100, canaryWeight: 0, stableHash: h1, canaryHash: h1}, "")
	checkSplit(t, dc, g, ns, routeView{stableWeight: 100, stableHash: h1, canaryHash: h1}, nil)

	// Rollout 1: 20%, then the header route and 50%, then abort.
	setImage(t, ns, "web", "nginx:1.26")
	waitSteps(t, ns, "web", 2, contract.WaitingForPromote, "nginx:1.26=2/2 nginx:1.25=8/8")
	h2 := hashOf(t, ns, "nginx:1.26")
	at20 := routeView{stableWeight: 80, canaryWeight: 20, stableHash: h1, canaryHash: h2}
	waitRoute(t, dc, ns, at20, "")
	checkSplit(t, dc, g, ns, at20, nil)
	if out, err := updateCLI(ns, "web", contract.UpdatePromote); err != nil {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	waitSteps(t, ns, "web", 5, contract.WaitingForPromote, "nginx:1.26=5/5 nginx:1.25=5/5")
	at50 := routeView{stableWeight: 50, canaryWeight: 50, stableHash: h1, canaryHash: h2}
	waitRoute(t, dc, ns, at50, "temporal-rollout-testers→web-canary")
	checkSplit(t, dc, g, ns, at50, canaryHdr)

	// Abort under a stream of requests: the last one a canary pod answers comes before the
	// first canary pod stops, and no request reaches a stopped canary pod.
	load := startLoad(g)
	time.Sleep(time.Second)
	abortAt := time.Now()
	sampler.aborting.Store(true)
	if out, err := updateCLI(ns, "web", contract.UpdateAbort, `{"reason":"testers saw errors"}`); err != nil {
		t.Fatalf("abort: %v\n%s", err, out)
	}
	waitComplete(t, ns, "web")
	waitRoute(t, dc, ns, routeView{stableWeight: 100, canaryWeight: 0, stableHash: h1, canaryHash: h1}, "")
	eventually(t, 60*time.Second, func() string {
		if got := sizes(t, ns); got != "nginx:1.25=10/10 nginx:1.26=0/0" {
			return "after abort: " + got
		}
		if pods.stoppedAt(h2).IsZero() {
			return "no canary pod stopped yet"
		}
		return ""
	})
	time.Sleep(time.Second)
	hits, failed, why := load.end()
	var lastCanary time.Time
	var before, after int
	for _, h := range hits {
		if h.hash == h2 {
			lastCanary = h.at
		}
		if h.at.Before(abortAt) {
			before++
		} else {
			after++
		}
	}
	// The abort moves the traffic back as the stable pods come back (k8s.AbortWeight): the
	// canary keeps serving what the stable pods cannot take yet, so canary pods answer after
	// the first of them stops. What must not happen: a request to a stopped pod, or a failure.
	canaryStop := pods.stoppedAt(h2)
	if lastCanary.IsZero() {
		t.Errorf("abort: no request reached a canary pod in the stream (%d requests)", len(hits))
	} else {
		t.Logf("abort: %d requests before it, %d after; the last canary answer %s after the abort (the first canary pod began terminating %s after it)",
			before, after, lastCanary.Sub(abortAt).Round(time.Millisecond), canaryStop.Sub(abortAt).Round(time.Millisecond))
	}
	if n := pods.requestsToGone()[h2]; n > 0 {
		t.Errorf("abort: %d dials to a canary pod's address after it stopped", n)
	}
	if failed > 0 {
		t.Errorf("abort: %d requests of the stream failed; first: %s", failed, why)
	}
	sampler.aborting.Store(false)
	checkSplit(t, dc, g, ns, routeView{stableWeight: 100, stableHash: h1, canaryHash: h1}, nil)

	// Rollout 2, promoted through every step: all requests on the new ReplicaSet.
	load = startLoad(g)
	setImage(t, ns, "web", "nginx:1.27")
	waitSteps(t, ns, "web", 2, contract.WaitingForPromote, "nginx:1.27=2/2 nginx:1.25=8/8 nginx:1.26=0/0")
	h3 := hashOf(t, ns, "nginx:1.27")
	at20 = routeView{stableWeight: 80, canaryWeight: 20, stableHash: h1, canaryHash: h3}
	waitRoute(t, dc, ns, at20, "")
	checkSplit(t, dc, g, ns, at20, nil)
	if out, err := updateCLI(ns, "web", contract.UpdatePromote, `{"full":true}`); err != nil {
		t.Fatalf("promote full: %v\n%s", err, out)
	}
	waitPromoted(t, dc, ns, h3, "nginx:1.27=10/10 nginx:1.25=0/0 nginx:1.26=0/0")
	hits, failed, why = load.end()
	if failed > 0 {
		t.Errorf("rollout 2: %d of %d requests failed; first: %s", failed, len(hits)+failed, why)
	} else {
		t.Logf("rollout 2: %d requests through the rollout, none failed", len(hits))
	}
	checkSplit(t, dc, g, ns, routeView{stableWeight: 100, stableHash: h3, canaryHash: h3}, nil)

	if sampler.report(t) == 0 {
		t.Errorf("invariant: no sample saw the handover (canary 100%% as the stable's last pods go)")
	}
	gone := pods.requestsToGone()
	keys := make([]string, 0, len(gone))
	for k := range gone {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("dials to a stopped pod's address (hash %q): %d", k, gone[k])
	}
	noInvariantEvents(t, ns)
}
