package activities

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/temporal-rollout/rollout/k8s"

	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGateOnlyWriter holds the project to one writer of routes and Service selectors: outside
// activities/gate.go no code outside tests writes (Update, Patch, Apply, Create) through a
// Services client or the HTTPRoute resource, whether chained (`.Services(ns).Update(`) or
// through a variable bound to one (`services := ...Services(ns)` then `services.Update(`).
func TestGateOnlyWriter(t *testing.T) {
	root := ".."
	bind := regexp.MustCompile(`(\w+)\s*:?=\s*[^\n]*(\.Services\(|Resource\(HTTPRouteResource\)|Resource\(activities\.HTTPRouteResource\))`)
	chained := regexp.MustCompile(`(\.Services\([^)]*\)|Resource\((activities\.)?HTTPRouteResource\)(\.Namespace\([^)]*\))?)\.(Update|Patch|Apply|Create|UpdateStatus)\(`)
	var offenders []string
	checked := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "e2e", "hack", "testdata", ".dev":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.ToSlash(path) == "../activities/gate.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src := string(b)
		checked++
		if loc := chained.FindStringIndex(src); loc != nil {
			offenders = append(offenders, path+": "+src[loc[0]:loc[1]])
		}
		for _, m := range bind.FindAllStringSubmatch(src, -1) {
			v := m[1]
			write := regexp.MustCompile(`\b` + regexp.QuoteMeta(v) + `\.(Update|Patch|Apply|Create|UpdateStatus)\(`)
			if loc := write.FindStringIndex(src); loc != nil {
				offenders = append(offenders, path+": "+src[loc[0]:loc[1]])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked %d files, want the whole module's", checked)
	}
	if len(offenders) > 0 {
		t.Errorf("routes and Services are written outside activities/gate.go (pass them through the gate):\n%s", strings.Join(offenders, "\n"))
	}
}

// The wait weighs a routed rollout's route through the gate (AwaitTraffic.moves): an abort
// from a canary at 0% with 3 pods asks for AbortWeight's 24, which the gate never writes (rule
// 2), so the wait must not wake the workflow for it; once the canary's pods go the route has
// to move (its Service back to the stable template) and the wait wakes it.
func TestAwaitTrafficMovesThroughGate(t *testing.T) {
	rs := func(h string, size, avail int32) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-" + h, Labels: map[string]string{appsv1.DefaultDeploymentUniqueLabelKey: h}},
			Spec: appsv1.ReplicaSetSpec{Replicas: &size}, Status: appsv1.ReplicaSetStatus{AvailableReplicas: avail}}
	}
	cur := k8s.TrafficState{StableHash: "n", CanaryHash: "m"}
	tr := &AwaitTraffic{Ask: k8s.TrafficAsk{Stable: "n", Canary: "n", Aborted: "m"}, Weight: 0, Cur: &cur, Returning: true}
	tests := []struct {
		name string
		give []*appsv1.ReplicaSet
		want bool
	}{
		{name: "canary 3 pods at 0%: the gate keeps 0, no wake", give: []*appsv1.ReplicaSet{rs("n", 10, 10), rs("m", 3, 3)}, want: false},
		{name: "the canary's pods gone: its Service goes back, wake", give: []*appsv1.ReplicaSet{rs("n", 10, 10), rs("m", 0, 0)}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := tr.moves(tt.give, k8s.Plan{})
			old := *tr
			old.Cur = nil
			before, _ := old.moves(tt.give, k8s.Plan{})
			if got != tt.want {
				t.Errorf("moves = %v (without the gate %v), want %v", got, before, tt.want)
			}
		})
	}
}
