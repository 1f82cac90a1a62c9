//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/k8s"
	"github.com/temporal-rollout/rollout/kube"
)

// TestConflictingWriterRetries (issue 23): another client patches the Deployment's annotations
// every 20 ms while it rolls out (each patch bumps its generation, so the decisions our syncs
// weighed before it are stale and their writes conflict). The rollout still completes to the
// exact ReplicaSets, and a stale decision met again in a row is retried after its workflow task
// ended, through the AwaitChange activity (Retry), as the `stale-retry-admitted` version of
// the workflow does: the history holds that version's marker and the retries.
// TestConflictsDuringRollout patches the ReplicaSets instead (409s on our ReplicaSet writes).
func TestConflictingWriterRetries(t *testing.T) {
	if env.builtin {
		t.Skip("our worker is not running")
	}
	ns := newNamespace(t)
	recordHistories(t, ns, "web")
	create(t, newDeployment(ns, "web", 10, "nginx:1.25", rolling("1", "0")))
	old := waitComplete(t, ns, "web")
	oldRS := expectedRSName(old)

	wc, _, err := kube.NewClientsetAs("e2e-conflicting-writer", env.stack.Kubeconfig, 100, 200)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	var patches atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{"e2e.example.com/touch":"%d"}}}`, i)
			if _, err := wc.AppsV1().Deployments(ns).Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err == nil {
				patches.Add(1)
			}
		}
	})
	defer func() { stop(); wg.Wait() }()

	// The new image goes in as a JSON patch without a resourceVersion, as `kubectl set image`
	// sends it: a read-modify-write Update would itself lose to the writer's stream of patches.
	start := time.Now()
	imagePatch := fmt.Sprintf(`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"nginx:1.26"},`+
		`{"op":"add","path":"/metadata/annotations/%s","value":"image nginx:1.26"}]`, strings.ReplaceAll(k8s.ChangeCauseAnnotation, "/", "~1"))
	if _, err := env.kube.AppsV1().Deployments(ns).Patch(context.Background(), "web", types.JSONPatchType, []byte(imagePatch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("set the image: %v", err)
	}
	eventually(t, waitTimeout, func() string {
		d := getDeployment(t, ns, "web")
		want := fmt.Sprintf("%s:r2:10 %s:r1:0", expectedRSName(d), oldRS)
		if got := rsSummary(ownedReplicaSets(t, ns, "web")); got != want {
			return "replicasets " + got + ", want " + want
		}
		return ""
	})
	stop()
	wg.Wait()
	t.Logf("rolled out in %s under %d conflicting patches", since(start), patches.Load())
	if patches.Load() < 50 {
		t.Fatalf("only %d patches by the conflicting writer, want a steady stream", patches.Load())
	}

	d := waitComplete(t, ns, "web")
	st := d.Status
	if st.ObservedGeneration != d.Generation || st.Replicas != 10 || st.UpdatedReplicas != 10 || st.AvailableReplicas != 10 || st.UnavailableReplicas != 0 {
		t.Errorf("status %+v at generation %d, want it observed with 10/10/10 and none unavailable", st, d.Generation)
	}
	if got := d.Annotations["deployment.kubernetes.io/revision"]; got != "2" {
		t.Errorf("revision %s, want 2", got)
	}

	markers, retries := staleRetries(t, workflowID(ns, "web"))
	t.Logf("history: %d stale-retry-admitted markers, %d retries through AwaitChange", markers, retries)
	if markers == 0 || retries == 0 {
		t.Errorf("no stale decision was retried through AwaitChange (markers %d, retries %d): the writer made none conflict twice in a row", markers, retries)
	}
}

// staleRetries counts, in every run of the workflow, the stale-retry-admitted version markers
// and the AwaitChange activities scheduled as a stale decision's retry.
func staleRetries(t *testing.T, id string) (markers, retries int) {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	eachRunEvent(t, id, func(ev *historypb.HistoryEvent) {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "AwaitChange" {
			var in activities.AwaitInput
			if dc.FromPayloads(a.GetInput(), &in) == nil && in.Retry {
				retries++
			}
		}
	})
	return versionMarkers(t, id, "stale-retry-admitted"), retries
}
