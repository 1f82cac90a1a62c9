package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
)

// ExtraClusterNodes is the number of kwok nodes of a cluster StartKubeCluster starts: one,
// of PodsPerNode pods, keeps its control plane lean.
const ExtraClusterNodes = 1

// KubeCluster is one Kubernetes control plane on loopback: its own etcd, kube-apiserver,
// kube-controller-manager (with the stack's --controllers), kube-scheduler and kwok, each on
// free ports. Start starts the stack's own (Name ""); StartKubeCluster starts more beside it,
// sharing the stack's Temporal.
type KubeCluster struct {
	// Name is "" for the stack's own cluster.
	Name string
	// Dir holds the cluster's state, certificates, kubeconfig and logs.
	Dir        string
	Kubeconfig string
	APIServer  string
	Token      string
	Client     kubernetes.Interface

	s       *Stack
	nodes   int
	apiPort int
	// apiArgs are kube-apiserver's flags, for StartAPIServer.
	apiArgs []string
	// started are the keys of its processes in s.procs, in start order.
	started []string
	// kwokArgs are kwok's flags, for a start again (waitKube); kwokStarts counts its starts.
	kwokArgs   []string
	kwokStarts int
}

// StartKubeCluster starts another Kubernetes cluster beside the stack's, in Opts.Dir/cluster-NAME
// with ExtraClusterNodes fake nodes, and waits until it is ready. The stack's Stop stops it
// too; so does its own Stop. On error, what was started is stopped.
func (s *Stack) StartKubeCluster(ctx context.Context, name string) (_ *KubeCluster, err error) {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return nil, fmt.Errorf("cluster name %q: %v", name, errs)
	}
	if _, ok := s.procs[name+"/etcd"]; ok {
		return nil, fmt.Errorf("cluster %s is already running", name)
	}
	k := &KubeCluster{Name: name, Dir: filepath.Join(s.Opts.Dir, "cluster-"+name), nodes: ExtraClusterNodes, s: s}
	// A cluster started again under the same name (another test's "b") starts empty: the
	// last one's etcd data would still hold its nodes and objects.
	if err := os.RemoveAll(k.Dir); err != nil {
		return nil, fmt.Errorf("clear cluster %s dir: %w", name, err)
	}
	if err := os.MkdirAll(k.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cluster %s dir: %w", name, err)
	}
	defer func() {
		if err != nil {
			k.Stop()
		}
	}()
	if err := k.start(ctx); err != nil {
		return nil, fmt.Errorf("start cluster %s: %w", name, err)
	}
	return k, nil
}

// key is the name of one of the cluster's processes in the stack: "etcd" for the stack's own
// cluster, "NAME/etcd" for another.
func (k *KubeCluster) key(proc string) string {
	if k.Name == "" {
		return proc
	}
	return k.Name + "/" + proc
}

// label is " NAME" for a named cluster, for messages.
func (k *KubeCluster) label() string {
	if k.Name == "" {
		return ""
	}
	return " " + k.Name
}

func (k *KubeCluster) progress(format string, args ...any) {
	if k.Name != "" {
		format = "cluster " + k.Name + ": " + format
	}
	k.s.progress(format, args...)
}

// startProc starts one of the cluster's processes, logging to Dir/NAME.log.
func (k *KubeCluster) startProc(name, bin string, args ...string) (*Proc, error) {
	p, err := k.s.startIn(k.Dir, k.key(name), name, bin, args...)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(k.started, k.key(name)) {
		k.started = append(k.started, k.key(name))
	}
	return p, nil
}

// Proc returns one of the cluster's processes by name ("kube-apiserver"), nil when stopped.
func (k *KubeCluster) Proc(name string) *Proc { return k.s.procs[k.key(name)] }

// StopAPIServer stops kube-apiserver (SIGTERM): every client sees its watches end and its
// requests refused until StartAPIServer.
func (k *KubeCluster) StopAPIServer() {
	k.s.StopProcess(k.key("kube-apiserver"))
	k.progress("kube-apiserver stopped")
}

// StartAPIServer starts kube-apiserver with its flags, on the same port and etcd, and waits
// until it is ready.
func (k *KubeCluster) StartAPIServer(ctx context.Context) error {
	if k.apiArgs == nil {
		return errors.New("kube-apiserver was not started by this stack")
	}
	if p := k.Proc("kube-apiserver"); p != nil {
		if exited, _ := p.Exited(); !exited {
			return fmt.Errorf("kube-apiserver%s is already running", k.label())
		}
		k.s.StopProcess(k.key("kube-apiserver"))
	}
	if _, err := k.startProc("kube-apiserver", ToolPath(k.s.Opts.Tools, "kube-apiserver"), k.apiArgs...); err != nil {
		return err
	}
	return k.s.waitHTTP(ctx, k.key("kube-apiserver"), k.APIServer+"/readyz", k.Token, 120*time.Second)
}

// RestartAPIServer stops kube-apiserver (SIGTERM) and starts it again with the same flags, on
// the same port and etcd, and waits until it is ready: every client sees its watches end and
// its requests refused for the seconds in between.
func (k *KubeCluster) RestartAPIServer(ctx context.Context) error {
	if k.apiArgs == nil {
		return errors.New("kube-apiserver was not started by this stack")
	}
	k.s.StopProcess(k.key("kube-apiserver"))
	k.progress("kube-apiserver restarting on %s", k.APIServer)
	return k.StartAPIServer(ctx)
}

// RestartControllerManager stops the cluster's kube-controller-manager and starts it again at
// another client budget (its controllers resync from fresh informers, as after any restart).
func (k *KubeCluster) RestartControllerManager(qps float32, burst int) error {
	k.s.StopProcess(k.key("kube-controller-manager"))
	if _, err := k.startProc("kube-controller-manager", ToolPath(k.s.Opts.Tools, "kube-controller-manager"), k.kcmArgs(qps, burst)...); err != nil {
		return err
	}
	k.progress("kube-controller-manager restarted at QPS %g / burst %d", qps, burst)
	return nil
}

// Stop stops the cluster's processes in reverse start order; its Dir stays (the logs).
func (k *KubeCluster) Stop() {
	for i := len(k.started) - 1; i >= 0; i-- {
		k.s.StopProcess(k.started[i])
	}
	k.started = nil
}
