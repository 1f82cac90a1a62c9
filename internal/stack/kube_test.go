package stack

import (
	"context"
	"strings"
	"testing"
)

// TestKubeClusterNames: a named cluster's processes are NAME/etcd, ... beside the stack's own
// (etcd, ...), and a name that is no DNS-1123 label is refused before anything starts.
func TestKubeClusterNames(t *testing.T) {
	own, b := &KubeCluster{}, &KubeCluster{Name: "b"}
	if own.key("etcd") != "etcd" || b.key("etcd") != "b/etcd" {
		t.Errorf("keys %q, %q; want etcd, b/etcd", own.key("etcd"), b.key("etcd"))
	}
	s := &Stack{Opts: Options{Dir: t.TempDir()}, procs: map[string]*Proc{}}
	for _, name := range []string{"", "B", "a/b", "-b"} {
		if _, err := s.StartKubeCluster(context.Background(), name); err == nil || !strings.Contains(err.Error(), "cluster name") {
			t.Errorf("StartKubeCluster(%q) = %v, want an error naming the cluster name", name, err)
		}
	}
	if len(s.procs) != 0 {
		t.Errorf("processes started: %v", s.procs)
	}
	if err := s.RestartControllerManager(20, 30); err == nil {
		t.Error("RestartControllerManager on a stack without Kubernetes: nil error")
	}
}
