package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/temporal-rollout/rollout/k8s"
)

// Notification is a rollout event as a webhook receives it (format json).
type Notification struct {
	Deployment string `json:"deployment"`
	Namespace  string `json:"namespace"`
	// Cluster is the Deployment's cluster (the worker's --cluster); empty for a single one.
	Cluster  string `json:"cluster,omitempty"`
	Revision int64  `json:"revision,omitempty"`
	// Event is one of k8s.NotifyEvents; Reason the Kubernetes event's reason
	// (RolloutAborted, AnalysisFailed, ...), Message its message.
	Event   string `json:"event"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Step is the 1-based step of Steps it happened at (0: not at a step).
	Step  int `json:"step,omitempty"`
	Steps int `json:"steps,omitempty"`
	// Link is the workflow in the Temporal UI (the worker's --ui-url; empty without it).
	Link string    `json:"link,omitempty"`
	Time time.Time `json:"time"`
}

// NotifyInput is one webhook delivery.
type NotifyInput struct {
	URL string `json:"url"`
	// Format is json (the Notification) or slack ({"text": "..."}).
	Format       string       `json:"format,omitempty"`
	Notification Notification `json:"notification"`
}

// ErrWebhookRejected: the webhook answered 4xx (other than 408 and 429): resending the same
// payload will not help.
const ErrWebhookRejected = "WebhookRejected"

// notifyTimeout bounds one delivery.
const notifyTimeout = 10 * time.Second

// Notify POSTs one notification to its webhook. A failed request or a 5xx (or 408, 429)
// answer is an error the retry policy retries; another 4xx is non-retryable.
func (a *Activities) Notify(ctx context.Context, in NotifyInput) error {
	body, err := NotifyPayload(in)
	if err != nil {
		return nonRetryable(ErrInvalid, "notify %s: %v", in.URL, err)
	}
	hc := a.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	rctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, in.URL, bytes.NewReader(body))
	if err != nil {
		return nonRetryable(ErrInvalid, "notify %s: %v", in.URL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "temporal-rollout")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("notify %s of %s: %w", in.URL, in.Notification.Event, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch code := resp.StatusCode; {
	case code/100 == 2:
		return nil
	case code/100 == 4 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests:
		return nonRetryable(ErrWebhookRejected, "notify %s of %s: HTTP %d: %s", in.URL, in.Notification.Event, code, strings.TrimSpace(string(answer)))
	default:
		return fmt.Errorf("notify %s of %s: HTTP %d: %s", in.URL, in.Notification.Event, code, strings.TrimSpace(string(answer)))
	}
}

// NotifyPayload is the body a webhook receives: the Notification as JSON, or for slack
// {"text": "..."} with the same facts on one line.
func NotifyPayload(in NotifyInput) ([]byte, error) {
	n := in.Notification
	if in.Format != k8s.NotifyFormatSlack {
		return json.Marshal(n)
	}
	return json.Marshal(map[string]string{"text": SlackText(n)})
}

// SlackText is a notification as one line of Slack mrkdwn (the message's &, < and > escaped):
//
//	*default/web* revision 3: aborted (step 2 of 4): Rollout of revision 3 aborted: ... <link|Temporal UI>
func SlackText(n Notification) string {
	var b strings.Builder
	esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace
	fmt.Fprintf(&b, "*%s/%s*", n.Namespace, n.Deployment)
	if n.Cluster != "" {
		fmt.Fprintf(&b, " in cluster %s", n.Cluster)
	}
	if n.Revision > 0 {
		fmt.Fprintf(&b, " revision %d", n.Revision)
	}
	fmt.Fprintf(&b, ": %s", n.Event)
	if n.Step > 0 {
		fmt.Fprintf(&b, " (step %d of %d)", n.Step, n.Steps)
	}
	if n.Message != "" {
		fmt.Fprintf(&b, ": %s", esc(n.Message))
	}
	if n.Link != "" {
		fmt.Fprintf(&b, " <%s|Temporal UI>", n.Link)
	}
	return b.String()
}
