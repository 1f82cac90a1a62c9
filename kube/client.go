package kube

import (
	"fmt"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ProtobufContentType is the Kubernetes protobuf media type our clients send and prefer.
const ProtobufContentType = "application/vnd.kubernetes.protobuf"

// RESTConfig builds a client config from a kubeconfig path, or from the in-cluster service
// account when the path is empty, with the given client-side rate limit.
func RESTConfig(kubeconfig string, qps float32, burst int) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("load in-cluster config (set --kubeconfig outside a cluster): %w", err)
		}
	} else {
		// A list of files (path-list separated), as KUBECONFIG allows, is merged as kubectl does.
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(kubeconfig)}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
		}
	}
	cfg.QPS = qps
	cfg.Burst = burst
	cfg.UserAgent = UserAgent
	// Protobuf, as kube-controller-manager speaks (its --kube-api-content-type default): every
	// object we read or write is a built-in type. Decoding the watch streams of every pod and
	// ReplicaSet in JSON cost our worker and watcher several times the CPU, and the API server
	// a JSON encoding of each event on top of the protobuf one it makes for the controllers.
	cfg.ContentType = ProtobufContentType
	cfg.AcceptContentTypes = ProtobufContentType + ",application/json"
	return cfg, nil
}

// NewClientset builds a typed clientset; see RESTConfig.
func NewClientset(kubeconfig string, qps float32, burst int) (kubernetes.Interface, *rest.Config, error) {
	return NewClientsetAs(UserAgent, kubeconfig, qps, burst)
}

// NewClientsetAs builds a typed clientset that writes under another user agent, which is also
// the default field manager of its writes. Test and benchmark harnesses use it: the watcher
// skips updates made only by our controller's field manager, and a harness's own changes must
// not look like ours.
func NewClientsetAs(userAgent, kubeconfig string, qps float32, burst int) (kubernetes.Interface, *rest.Config, error) {
	cfg, err := RESTConfig(kubeconfig, qps, burst)
	if err != nil {
		return nil, nil, err
	}
	cfg.UserAgent = userAgent
	if qps > 0 && burst > 0 {
		// client-go's token bucket of the same QPS and burst, which also serves IfBudgetWithin.
		cfg.RateLimiter = newBudget(qps, burst)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("build clientset: %w", err)
	}
	return cs, cfg, nil
}
