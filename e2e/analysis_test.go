//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/temporal-rollout/rollout/activities"
	"github.com/temporal-rollout/rollout/k8s"
)

// TestWebAnalysisNotify runs web analysis steps against an endpoint the test serves (the worker
// runs on this host) and a webhook the test serves: a passing analysis completes the rollout,
// a failing one aborts it, and the webhook receives the events.
func TestWebAnalysisNotify(t *testing.T) {
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rate := "0.01"
		if strings.HasSuffix(r.URL.Path, "/bad") {
			rate = "0.3"
		}
		fmt.Fprintf(w, `{"data":{"errorRate":%s}}`, rate)
	}))
	defer metrics.Close()
	hook := newWebhook(t)
	waitNotified := hook.wait
	run := func(t *testing.T, path string) string {
		ns := newNamespace(t)
		recordHistories(t, ns, "web")
		recordHistories(t, ns, "web")
		steps := fmt.Sprintf(`[{"setWeight":50},{"analysis":{"web":{"url":%q,"jsonPath":"$.data.errorRate","timeout":"5s"},"max":0.05,"interval":"1s","count":2}}]`, metrics.URL+path)
		create(t, newDeployment(ns, "web", 4, "nginx:1.25", rolling("1", "0"), withSteps(steps),
			withAnnotation(k8s.NotifyAnnotation, fmt.Sprintf(`{"url":%q}`, hook.url))))
		waitComplete(t, ns, "web")
		setImage(t, ns, "web", "nginx:1.26")
		return ns
	}

	t.Run("passes", func(t *testing.T) {
		ns := run(t, "/good")
		waitEvent(t, ns, "web", "AnalysisSuccessful: Step 2 of 2")
		d := waitComplete(t, ns, "web")
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.26" {
			t.Errorf("image = %s, want nginx:1.26", img)
		}
		// The Deployment's first rollout (revision 1) completed too, and said so.
		waitNotified(t, ns, k8s.NotifyCompleted, 1)
		if n := waitNotified(t, ns, k8s.NotifyCompleted, 2); n.Deployment != "web" || !strings.Contains(n.Message, "Rollout of revision 2 complete") {
			t.Errorf("completed notification %+v, want web revision 2", n)
		}
		waitNotified(t, ns, k8s.NotifyStepReached, 2)
		// The first step's notification names the new revision too, not the annotation's
		// previous one.
		for _, n := range hook.all(ns) {
			if n.Event == k8s.NotifyStepReached && n.Revision != 2 {
				t.Errorf("stepReached notification %+v, want revision 2", n)
			}
		}
	})

	t.Run("fails and aborts", func(t *testing.T) {
		ns := run(t, "/bad")
		waitEvent(t, ns, "web", "AnalysisFailed: Step 2 of 2")
		waitEvent(t, ns, "web", "= 0.3, above max 0.05")
		waitEvent(t, ns, "web", "RolloutAborted")
		d := waitComplete(t, ns, "web")
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.25" {
			t.Errorf("image after a failed analysis = %s, want nginx:1.25", img)
		}
		waitNotified(t, ns, k8s.NotifyAnalysisFailed, 2)
		n := waitNotified(t, ns, k8s.NotifyAborted, 2)
		if !strings.Contains(n.Message, "analysis failed at step 2") {
			t.Errorf("aborted notification %+v", n)
		}
	})
}

// webhook is a notification webhook the test serves; it keeps what it receives by namespace.
type webhook struct {
	url string
	mu  sync.Mutex
	got map[string][]activities.Notification
}

// newWebhook serves a webhook until the test ends.
func newWebhook(t *testing.T) *webhook {
	h := &webhook{got: map[string][]activities.Notification{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var n activities.Notification
		if err := json.Unmarshal(b, &n); err != nil {
			t.Errorf("webhook payload %s: %v", b, err)
		}
		h.mu.Lock()
		h.got[n.Namespace] = append(h.got[n.Namespace], n)
		h.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

// all is what namespace ns received so far.
func (h *webhook) all(ns string) []activities.Notification {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]activities.Notification(nil), h.got[ns]...)
}

// wait waits for an event's notification in namespace ns (of revision rev, unless 0) and
// returns it.
func (h *webhook) wait(t *testing.T, ns, event string, rev int64) activities.Notification {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		for _, n := range h.got[ns] {
			if n.Event == event && (rev == 0 || n.Revision == rev) {
				h.mu.Unlock()
				return n
			}
		}
		h.mu.Unlock()
		time.Sleep(200 * time.Millisecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	t.Fatalf("no %s notification for %s; got %+v", event, ns, h.got[ns])
	return activities.Notification{}
}
