// Package stack runs the real local stack on loopback: etcd, kube-apiserver,
// kube-controller-manager (with or without the built-in Deployment controller),
// kube-scheduler, kwok with fake nodes, and the Temporal dev server with its UI. `make dev`,
// the end-to-end tests and the benchmark all start it through here, from binaries that
// hack/tools.sh built into a cache folder outside the clone.
package stack

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"

	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/kube"
)

// Versions pinned in hack/tools.sh.
const (
	TemporalVersion = "v1.5.1"
	EtcdVersion     = "v3.6.8"
	KubeVersion     = "v1.36.3"
	KwokVersion     = "v0.8.0"
	// PrometheusVersion is the version of Debian's prometheus package that a tools cache
	// which records none (built before hack/tools.sh picked the version the apt lists offer)
	// holds; DebianVersion reads the version a cache holds.
	PrometheusVersion = "2.42.0+ds-5+b6"
	// TraefikVersion is the Gateway API data plane the traffic tests run (built from its
	// module source by hack/tools.sh; not part of `make tools-core`).
	TraefikVersion = "v3.6.12"
)

// PodsPerNode is each kwok node's pod capacity.
const PodsPerNode = 2000

// Options shape the stack.
type Options struct {
	// Dir holds state, logs, certificates and the kubeconfig.
	Dir string
	// Tools is the folder hack/tools.sh prints; empty means the default cache folder.
	Tools string
	// Nodes is the number of kwok nodes (default 3).
	Nodes int
	// PodReadyDelay and PodReadyJitter delay pods becoming Ready (kwok stage delay).
	PodReadyDelay, PodReadyJitter time.Duration
	// BuiltinDeploymentController keeps kube-controller-manager's own Deployment controller on
	// (the benchmark's reference side). Off by default: ours is the only one.
	BuiltinDeploymentController bool
	// ServiceAccountCredentials runs each of kube-controller-manager's controllers with its own
	// ServiceAccount (--use-service-account-credentials, as kubeadm, GKE and EKS do), so the
	// built-in Deployment controller acts as system:serviceaccount:kube-system:deployment-controller.
	ServiceAccountCredentials bool
	// KubeAPIQPS and KubeAPIBurst are kube-controller-manager's client budget (default 20/30).
	KubeAPIQPS   float32
	KubeAPIBurst int
	// NoTemporal skips Temporal.
	NoTemporal bool
	// Temporal is the Temporal under the stack: the dev server (default) or the Temporal
	// server on PostgreSQL (TemporalCluster) with HistoryShards shards (default 4).
	Temporal      TemporalMode
	HistoryShards int
	// TemporalPort and TemporalUIPort are fixed ports; 0 picks free ones.
	TemporalPort, TemporalUIPort int
	// ServerPprofPort, in TemporalCluster mode, serves the Temporal server's pprof on
	// 127.0.0.1 at this port (the benchmark's --profile); 0 serves none.
	ServerPprofPort int
	// Headless drops the Temporal UI.
	Headless bool
	// APIServerPort is fixed; 0 picks a free one.
	APIServerPort int
	// Progress receives one line per step.
	Progress io.Writer
}

// Stack is a running stack.
type Stack struct {
	Opts            Options
	Kubeconfig      string
	APIServer       string
	Token           string
	TemporalAddress string
	UIAddress       string
	// TemporalMetrics is the Temporal server's Prometheus endpoint (http://host:port/metrics),
	// the dev server's or, in TemporalCluster mode, the server's on PostgreSQL.
	TemporalMetrics string
	Client          kubernetes.Interface

	procs    map[string]*Proc
	order    []string
	tempArgs []string
	// kube is the stack's own Kubernetes cluster (Kubeconfig, APIServer, Token and Client
	// above are its); StartKubeCluster starts more.
	kube *KubeCluster
	// cluster is set in TemporalCluster mode.
	cluster *cluster
}

// ToolPath returns the path of a pinned tool binary.
func ToolPath(tools, name string) string {
	switch name {
	case "temporal":
		return filepath.Join(tools, "temporal-"+TemporalVersion, name)
	case "etcd":
		return filepath.Join(tools, "etcd-"+EtcdVersion, name)
	case "kwok":
		return filepath.Join(tools, "kwok-"+KwokVersion, name)
	case "prometheus":
		return filepath.Join(tools, "prometheus-"+DebianVersion(tools, "prometheus", PrometheusVersion), name)
	case "traefik":
		return filepath.Join(tools, "traefik-"+TraefikVersion, name)
	}
	return filepath.Join(tools, "kube-"+KubeVersion, name)
}

// DebianVersionsFile, in the tools cache, records the version of each Debian package
// hack/tools.sh unpacked there: one "PACKAGE VERSION" a line (hack/debian-versions.sh).
const DebianVersionsFile = "debian-versions.txt"

// DebianVersion is the version of Debian's package pkg that the tools cache holds, as
// DebianVersionsFile records it; fallback when it records none.
func DebianVersion(tools, pkg, fallback string) string {
	b, err := os.ReadFile(filepath.Join(tools, DebianVersionsFile))
	if err != nil {
		return fallback
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == pkg {
			return f[1]
		}
	}
	return fallback
}

// DefaultTools is the cache folder hack/tools.sh uses: $ROLLOUT_TOOLS (or its old name
// $ROLLOUT_TOOLS_CACHE), else temporal-rollout/tools in the user's cache folder.
func DefaultTools() string {
	for _, name := range []string{"ROLLOUT_TOOLS", "ROLLOUT_TOOLS_CACHE"} {
		if v := os.Getenv(name); v != "" {
			return v
		}
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "temporal-rollout", "tools")
}

// FreePort returns a free loopback TCP port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Stack) progress(format string, args ...any) {
	if s.Opts.Progress != nil {
		fmt.Fprintf(s.Opts.Progress, "[stack %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
}

// Start brings the whole stack up and waits until each part is healthy. On error, what was
// started is stopped.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	if o.Tools == "" {
		o.Tools = DefaultTools()
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.KubeAPIQPS == 0 {
		o.KubeAPIQPS, o.KubeAPIBurst = 20, 30
	}
	if o.Temporal == "" {
		o.Temporal = TemporalDev
	}
	if o.HistoryShards == 0 {
		o.HistoryShards = DefaultHistoryShards
	}
	for _, t := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "temporal", "kubectl"} {
		if _, err := os.Stat(ToolPath(o.Tools, t)); err != nil {
			return nil, fmt.Errorf("tool %s missing in %s (run `make tools`): %w", t, o.Tools, err)
		}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create stack dir: %w", err)
	}
	s := &Stack{Opts: o, procs: map[string]*Proc{}}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	s.kube = &KubeCluster{Dir: o.Dir, nodes: o.Nodes, apiPort: o.APIServerPort, s: s}
	if err := s.kube.start(ctx); err != nil {
		return nil, err
	}
	s.Kubeconfig, s.APIServer, s.Token, s.Client = s.kube.Kubeconfig, s.kube.APIServer, s.kube.Token, s.kube.Client
	if !o.NoTemporal {
		if err := s.StartTemporal(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Stack) start(name, bin string, args ...string) (*Proc, error) {
	return s.startIn(s.Opts.Dir, name, name, bin, args...)
}

// startIn starts bin as process key, logging to dir/name.log.
func (s *Stack) startIn(dir, key, name, bin string, args ...string) (*Proc, error) {
	p, err := StartProc(dir, name, bin, args, nil)
	if err != nil {
		return nil, err
	}
	s.procs[key] = p
	s.order = append(s.order, key)
	return p, nil
}

// Proc returns a started process by name.
func (s *Stack) Proc(name string) *Proc { return s.procs[name] }

// start brings the cluster's control plane up in k.Dir, on free ports (kube-apiserver on
// k.apiPort when set): etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok
// with k.nodes fake nodes; it waits until they are Ready.
func (k *KubeCluster) start(ctx context.Context) error {
	s, o, dir := k.s, k.s.Opts, k.Dir
	etcdClient, _ := FreePort()
	etcdPeer, _ := FreePort()
	k.progress("etcd %s on 127.0.0.1:%d", EtcdVersion, etcdClient)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	if _, err := k.startProc("etcd", ToolPath(o.Tools, "etcd"),
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeer),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", etcdPeer),
		"--quota-backend-bytes", strconv.Itoa(4<<30), "--log-level", "warn"); err != nil {
		return err
	}
	if err := s.waitHTTP(ctx, k.key("etcd"), etcdURL+"/health", "", 60*time.Second); err != nil {
		return err
	}

	saKey := k.saKey()
	if err := writeRSAKey(saKey); err != nil {
		return err
	}
	tokenBytes := make([]byte, 16)
	_, _ = rand.Read(tokenBytes)
	k.Token = hex.EncodeToString(tokenBytes)
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(k.Token+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		return fmt.Errorf("write token file: %w", err)
	}
	port := k.apiPort
	if port == 0 {
		port, _ = FreePort()
	}
	k.APIServer = fmt.Sprintf("https://127.0.0.1:%d", port)
	k.progress("kube-apiserver %s on %s", KubeVersion, k.APIServer)
	k.apiArgs = []string{
		"--etcd-servers", etcdURL, "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port), "--cert-dir", filepath.Join(dir, "certs"),
		"--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--token-auth-file", tokens, "--authorization-mode", "Node,RBAC",
		"--service-cluster-ip-range", "10.96.0.0/16", "--allow-privileged=true",
		"--profiling=false", "--v", "1"}
	if err := k.StartAPIServer(ctx); err != nil {
		return err
	}
	k.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(k.Kubeconfig, []byte(kubeconfig(k.APIServer, k.Token)), 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	cs, _, err := kube.NewClientsetAs("rollout-stack", k.Kubeconfig, 100, 200)
	if err != nil {
		return err
	}
	k.Client = cs

	k.progress("kube-controller-manager %s with --controllers=%s, kube-scheduler %s", KubeVersion, s.controllers(), KubeVersion)
	if _, err := k.startProc("kube-controller-manager", ToolPath(o.Tools, "kube-controller-manager"), k.kcmArgs(o.KubeAPIQPS, o.KubeAPIBurst)...); err != nil {
		return err
	}
	if _, err := k.startProc("kube-scheduler", ToolPath(o.Tools, "kube-scheduler"),
		"--kubeconfig", k.Kubeconfig, "--leader-elect=false", "--secure-port=0", "--v", "1"); err != nil {
		return err
	}

	stages, err := k.writeStages()
	if err != nil {
		return err
	}
	kwokPort, _ := FreePort()
	k.progress("kwok %s with %d fake nodes (pods Ready after %s ± %s)", KwokVersion, k.nodes, o.PodReadyDelay, o.PodReadyJitter)
	k.kwokArgs = []string{"--kubeconfig", k.Kubeconfig, "--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake",
		"--config", stages, "--node-ip", "10.0.0.1", "--cidr", "10.0.0.1/16",
		"--server-address", fmt.Sprintf("127.0.0.1:%d", kwokPort)}
	k.kwokStarts = 1
	if _, err := k.startProc("kwok", ToolPath(o.Tools, "kwok"), k.kwokArgs...); err != nil {
		return err
	}
	if err := k.createNodes(ctx); err != nil {
		return err
	}
	return k.waitKube(ctx)
}

// writeStages writes kwok's stages: node initialise and heartbeat, pods Ready after the
// configured delay unless their image tag is :404 or :nonexistent, pod completion (a Job's pod
// whose image tag is :fail fails) and delete.
func (k *KubeCluster) writeStages() (string, error) {
	s := k.s
	src := filepath.Join(s.Opts.Tools, "kwok-"+KwokVersion, "stages")
	var docs []string
	for _, f := range []string{"node-initialize.yaml", "node-heartbeat.yaml", "pod-ready.yaml", "pod-complete.yaml", "pod-delete.yaml"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", fmt.Errorf("read kwok stage %s: %w", f, err)
		}
		doc := string(b)
		if f == "pod-ready.yaml" {
			doc = strings.Replace(doc, "    matchExpressions:\n", "    matchExpressions:\n"+
				"    - key: '[.spec.containers.[].image | test(\":(404|nonexistent)$\")] | any'\n"+
				"      operator: 'NotIn'\n"+
				"      values:\n"+
				"      - 'true'\n", 1)
			if s.Opts.PodReadyDelay > 0 {
				doc = strings.Replace(doc, "  next:\n", fmt.Sprintf("  delay:\n    durationMilliseconds: %d\n    jitterDurationMilliseconds: %d\n  next:\n",
					s.Opts.PodReadyDelay.Milliseconds(), (s.Opts.PodReadyDelay+s.Opts.PodReadyJitter).Milliseconds()), 1)
			}
		}
		if f == "pod-complete.yaml" {
			// A Job's pod whose image tag is :fail exits 1 instead (pod-fail), as a failing
			// test would: the analysis Job fails.
			failing := "    - key: '[.spec.containers.[].image | test(\":fail$\")] | any'\n" +
				"      operator: '%s'\n" +
				"      values:\n" +
				"      - 'true'\n"
			fail := strings.NewReplacer("name: pod-complete", "name: pod-fail", "exitCode: 0", "exitCode: 1",
				"reason: Completed", "reason: Error", "phase: Succeeded", "phase: Failed").Replace(doc)
			fail = strings.Replace(fail, "    matchExpressions:\n", "    matchExpressions:\n"+fmt.Sprintf(failing, "In"), 1)
			doc = strings.Replace(doc, "    matchExpressions:\n", "    matchExpressions:\n"+fmt.Sprintf(failing, "NotIn"), 1)
			docs = append(docs, strings.TrimSpace(fail))
		}
		docs = append(docs, strings.TrimSpace(doc))
	}
	path := filepath.Join(k.Dir, "kwok-stages.yaml")
	return path, os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o644)
}

func (k *KubeCluster) createNodes(ctx context.Context) error {
	for i := range k.nodes {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        fmt.Sprintf("kwok-node-%d", i),
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
				Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": fmt.Sprintf("kwok-node-%d", i), "kubernetes.io/os": "linux"},
			},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"), corev1.ResourcePods: *resource.NewQuantity(PodsPerNode, resource.DecimalSI)},
				Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"), corev1.ResourcePods: *resource.NewQuantity(PodsPerNode, resource.DecimalSI)},
			},
		}
		if _, err := k.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", node.Name, err)
		}
	}
	return nil
}

// saKey is the service-account signing key kube-apiserver and kube-controller-manager share.
func (k *KubeCluster) saKey() string { return filepath.Join(k.Dir, "sa.key") }

func (s *Stack) controllers() string {
	if s.Opts.BuiltinDeploymentController {
		return "*"
	}
	return "*,-deployment"
}

// kcmArgs are kube-controller-manager's flags at the given client budget.
func (k *KubeCluster) kcmArgs(qps float32, burst int) []string {
	s, dir := k.s, k.Dir
	return []string{"--kubeconfig", k.Kubeconfig, "--controllers", s.controllers(), "--leader-elect=false",
		"--service-account-private-key-file", k.saKey(), "--use-service-account-credentials=" + strconv.FormatBool(s.Opts.ServiceAccountCredentials),
		"--root-ca-file", filepath.Join(dir, "certs", "apiserver.crt"),
		"--kube-api-qps", strconv.FormatFloat(float64(qps), 'f', -1, 32), "--kube-api-burst", strconv.Itoa(burst),
		"--secure-port=0", "--v", "1"}
}

// RestartControllerManager stops kube-controller-manager and starts it again at another client
// budget (its controllers resync from fresh informers, as after any restart).
func (s *Stack) RestartControllerManager(qps float32, burst int) error {
	if s.kube == nil {
		return errors.New("kube-controller-manager was not started by this stack")
	}
	return s.kube.RestartControllerManager(qps, burst)
}

// waitKube waits for Ready nodes and the default service account (the controller manager runs).
func (k *KubeCluster) waitKube(ctx context.Context) error {
	s := k.s
	deadline := time.Now().Add(120 * time.Second)
	for {
		if err := s.checkExited(); err != nil {
			// kwok has exited at start now and then (exit status 2, nothing in its log; seen
			// once in e2e TestReleaseTwoClusters): it holds no state of its own, so it is
			// started once more before the cluster's start fails.
			p := k.Proc("kwok")
			if p == nil || k.kwokArgs == nil || k.kwokStarts >= 2 {
				return err
			}
			if exited, _ := p.Exited(); !exited {
				return err
			}
			k.progress("kwok exited at start (%v); starting it again", err)
			s.StopProcess(k.key("kwok"))
			k.kwokStarts++
			if _, err := k.startProc("kwok", ToolPath(s.Opts.Tools, "kwok"), k.kwokArgs...); err != nil {
				return err
			}
			continue
		}
		nodes, err := k.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		ready := 0
		if err == nil {
			for _, n := range nodes.Items {
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
		}
		_, saErr := k.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if ready == k.nodes && saErr == nil {
			k.progress("kubernetes ready: %d nodes Ready, controller manager running", ready)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kubernetes%s not ready after 120s: %d/%d nodes ready, default service account: %v", k.label(), ready, k.nodes, saErr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (s *Stack) checkExited() error {
	for _, name := range s.order {
		if ok, err := s.procs[name].Exited(); ok {
			return fmt.Errorf("%s exited (%v); log tail:\n%s", name, err, s.procs[name].Tail(2000))
		}
	}
	return nil
}

// ServerDynamicConfig is the dynamic configuration both Temporal servers of the stack run
// with: the dev server as --dynamic-config-value flags, the server on PostgreSQL as its
// dynamic.yaml. docs/operations.md recommends the same to users, and
// deploy/temporal/dynamicconfig.yaml (docker-compose.yml's server) sets it.
var ServerDynamicConfig = []struct{ Key, Value string }{
	// AwaitChange, scheduled by a workflow task, comes back in that task's completion
	// response and starts at once on the worker that asked for it, without a round trip
	// through matching (off by default on the server).
	{"system.enableActivityEagerExecution", "true"},
	// promote and abort are Workflow Updates (on by default on the dev server only).
	{"frontend.enableUpdateWorkflowExecution", "true"},
	{"frontend.enableUpdateWorkflowExecutionAsyncAccepted", "true"},
	// One partition per task queue instead of 4: a rollout's tasks and the worker's polls
	// meet in one place, with no forwarding between partitions. scale-1000 at QPS 200 on
	// the server on PostgreSQL: the server and PostgreSQL used 112–160 CPU-s over the run
	// against 167 and 180 with 4 partitions (BENCHMARKS.md, Analysis, 2026-11-27).
	{"matching.numTaskqueueReadPartitions", "1"},
	{"matching.numTaskqueueWritePartitions", "1"},
}

// StartTemporal starts (or restarts) Temporal on the same state: the dev server on the same
// db file, or in TemporalCluster mode the Temporal server on the same PostgreSQL (started,
// with its schemas and the default namespace, on the first call).
func (s *Stack) StartTemporal(ctx context.Context) error {
	o := s.Opts
	if o.Temporal == TemporalCluster {
		if s.cluster == nil {
			return s.startCluster(ctx)
		}
		return s.startServer(ctx)
	}
	if s.tempArgs == nil {
		port, ui := o.TemporalPort, o.TemporalUIPort
		if port == 0 {
			port, _ = FreePort()
		}
		if ui == 0 {
			ui, _ = FreePort()
		}
		metrics, _ := FreePort()
		s.TemporalAddress = fmt.Sprintf("127.0.0.1:%d", port)
		s.UIAddress = fmt.Sprintf("http://127.0.0.1:%d", ui)
		s.TemporalMetrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", metrics)
		s.tempArgs = []string{"server", "start-dev", "--ip", "127.0.0.1", "--port", strconv.Itoa(port),
			"--ui-port", strconv.Itoa(ui), "--metrics-port", strconv.Itoa(metrics), "--db-filename", filepath.Join(o.Dir, "temporal.db"),
			"--log-level", "warn", "--namespace", "default",
			// WAL with synchronous=NORMAL: commits survive a crash of the server process
			// (not a power loss) at a fraction of the fsyncs of the default.
			"--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal"}
		for _, kv := range ServerDynamicConfig {
			s.tempArgs = append(s.tempArgs, "--dynamic-config-value", kv.Key+"="+kv.Value)
		}
		for _, sa := range contract.SearchAttributes() {
			s.tempArgs = append(s.tempArgs, "--search-attribute", sa.Name+"="+sa.Type.String())
		}
		if o.Headless {
			s.tempArgs = append(s.tempArgs, "--headless")
		}
	}
	s.progress("temporal dev server %s on %s (UI %s)", TemporalVersion, s.TemporalAddress, s.UIAddress)
	if _, err := s.start("temporal", ToolPath(o.Tools, "temporal"), s.tempArgs...); err != nil {
		return err
	}
	return s.waitTemporal(ctx, 90*time.Second)
}

// waitTemporal waits until the started Temporal answers a health check.
func (s *Stack) waitTemporal(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if ok, err := s.procs["temporal"].Exited(); ok {
			return fmt.Errorf("temporal exited (%v); log tail:\n%s", err, s.procs["temporal"].Tail(2000))
		}
		c, err := client.Dial(client.Options{HostPort: s.TemporalAddress, Logger: quietLogger{}})
		if err == nil {
			_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
			c.Close()
			if err == nil {
				s.progress("temporal ready")
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("temporal not healthy after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// RestartAPIServer stops kube-apiserver (SIGTERM) and starts it again with the same flags, on
// the same port and etcd, and waits until it is ready: every client sees its watches end and
// its requests refused for the seconds in between.
func (s *Stack) RestartAPIServer(ctx context.Context) error {
	if s.kube == nil {
		return errors.New("kube-apiserver was not started by this stack")
	}
	return s.kube.RestartAPIServer(ctx)
}

// StopTemporal stops the Temporal server (SIGTERM); StartTemporal brings it back on the same
// state. In TemporalCluster mode PostgreSQL keeps running.
func (s *Stack) StopTemporal() {
	s.procs["temporal"].Stop(10 * time.Second)
	delete(s.procs, "temporal")
	s.order = remove(s.order, "temporal")
}

func remove(list []string, v string) []string {
	var out []string
	for _, x := range list {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// Stop stops every process in reverse start order.
func (s *Stack) Stop() {
	for i := len(s.order) - 1; i >= 0; i-- {
		if p := s.procs[s.order[i]]; p != nil {
			p.Stop(10 * time.Second)
		}
	}
	s.procs, s.order = map[string]*Proc{}, nil
	s.stopCluster()
}

// StartProcess runs another program (our worker or watcher) as part of the stack, so Stop
// stops it too.
func (s *Stack) StartProcess(name, bin string, args ...string) (*Proc, error) {
	return s.start(name, bin, args...)
}

// StopProcess stops one named process and forgets it.
func (s *Stack) StopProcess(name string) {
	if p := s.procs[name]; p != nil {
		p.Stop(10 * time.Second)
		delete(s.procs, name)
		s.order = remove(s.order, name)
	}
}

// KillProcess SIGKILLs one named process and forgets it.
func (s *Stack) KillProcess(name string) {
	if p := s.procs[name]; p != nil {
		p.Kill()
		delete(s.procs, name)
		s.order = remove(s.order, name)
	}
}

func (s *Stack) waitHTTP(ctx context.Context, name, url, token string, timeout time.Duration) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback self-signed
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if ok, err := s.procs[name].Exited(); ok {
			return fmt.Errorf("%s exited (%v); log tail:\n%s", name, err, s.procs[name].Tail(2000))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy after %s: %w", name, timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// StartPrometheus runs a Prometheus server on a free loopback port, scraping targets
// (host:port, /metrics) every scrapeInterval, and waits until it is ready. It returns its
// address (http://127.0.0.1:PORT). Stop and StopProcess("prometheus") stop it. It needs
// none of the other processes (a stack started with NoTemporal, or one without Kubernetes).
func (s *Stack) StartPrometheus(ctx context.Context, targets []string, scrapeInterval time.Duration) (string, error) {
	return s.StartPrometheusAs(ctx, "prometheus", targets, scrapeInterval)
}

// StartPrometheusAs is StartPrometheus under another process name, so that a test can run a
// Prometheus of its own beside the stack's; StopProcess(name) stops it. Each start writes
// its configuration to Opts.Dir/NAME and stores into a fresh folder there: no series of an
// earlier start (under the same name) are seen.
func (s *Stack) StartPrometheusAs(ctx context.Context, name string, targets []string, scrapeInterval time.Duration) (string, error) {
	if p := s.procs[name]; p != nil {
		if ok, _ := p.Exited(); !ok {
			return "", fmt.Errorf("%s is already running (StopProcess(%q) first)", name, name)
		}
		s.StopProcess(name)
	}
	if scrapeInterval <= 0 {
		return "", fmt.Errorf("%s: scrape interval %s, want > 0", name, scrapeInterval)
	}
	bin := ToolPath(s.Opts.Tools, "prometheus")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("tool prometheus missing in %s (run `make tools`): %w", s.Opts.Tools, err)
	}
	port, err := FreePort()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(s.Opts.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	data, err := os.MkdirTemp(dir, "data-")
	if err != nil {
		return "", err
	}
	quoted := make([]string, len(targets))
	for i, t := range targets {
		quoted[i] = strconv.Quote(t)
	}
	conf := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  evaluation_interval: %[1]s
scrape_configs:
- job_name: test
  static_configs:
  - targets: [%[2]s]
`, model(scrapeInterval), strings.Join(quoted, ", "))
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	s.progress("%s %s on %s, scraping %s every %s", name, DebianVersion(s.Opts.Tools, "prometheus", PrometheusVersion), addr, strings.Join(targets, ", "), scrapeInterval)
	if _, err := s.start(name, bin, "--config.file", confPath, "--storage.tsdb.path", data,
		"--web.listen-address", addr, "--log.level", "warn"); err != nil {
		return "", err
	}
	if err := s.waitHTTP(ctx, name, "http://"+addr+"/-/ready", "", 30*time.Second); err != nil {
		if exited, _ := s.procs[name].Exited(); !exited {
			// waitHTTP names the log tail only when the process is gone.
			err = fmt.Errorf("%w; log tail:\n%s", err, s.procs[name].Tail(2000))
		}
		s.StopProcess(name)
		return "", err
	}
	s.progress("%s ready at http://%s", name, addr)
	return "http://" + addr, nil
}

// model writes a duration as Prometheus's configuration reads it (1s, 500ms, 1m30s: no
// fractions, no "h0m" filler).
func model(d time.Duration) string {
	if d%time.Second != 0 {
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	}
	sec := int64(d / time.Second)
	out := ""
	for _, u := range []struct {
		n    int64
		unit string
	}{{3600, "h"}, {60, "m"}, {1, "s"}} {
		if sec >= u.n {
			out += strconv.FormatInt(sec/u.n, 10) + u.unit
			sec %= u.n
		}
	}
	return out
}

func writeRSAKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate service account key: %w", err)
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return os.WriteFile(path, b, 0o600)
}

func kubeconfig(server, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: local
  context:
    cluster: local
    user: admin
current-context: local
`, server, token)
}

type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
