package k8s

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// NotifyAnnotation asks for a webhook on a rollout's events:
//
//	{"url":"https://hooks.example/rollouts","format":"json","events":["aborted","completed"]}
//
// Format is json (the default: activities.Notification as JSON) or slack (an incoming
// webhook's {"text": "..."}); Events defaults to every event. A Deployment without it sends
// nothing.
const NotifyAnnotation = "temporal-rollout.io/notify"

// Notification events.
const (
	// NotifyStepReached: a step began (a setWeight scaling, a timed pause, an analysis).
	NotifyStepReached = "stepReached"
	// NotifyPaused: the rollout waits for promote (a pause step without a duration, or an
	// inconclusive analysis).
	NotifyPaused = "paused"
	// NotifyPromoted: promote moved the rollout on.
	NotifyPromoted = "promoted"
	// NotifyAborted: the rollout was aborted (by abort, a failed analysis, or a progress
	// deadline with auto-rollback).
	NotifyAborted = "aborted"
	// NotifyAnalysisFailed: an analysis step failed (an abort follows).
	NotifyAnalysisFailed = "analysisFailed"
	// NotifyCompleted: a rollout completed (not the rollback after an abort).
	NotifyCompleted = "completed"
)

// NotifyEvents lists every notification event.
var NotifyEvents = []string{NotifyStepReached, NotifyPaused, NotifyPromoted, NotifyAborted, NotifyAnalysisFailed, NotifyCompleted}

// Notification formats.
const (
	NotifyFormatJSON  = "json"
	NotifyFormatSlack = "slack"
)

// NotifyConfig is the notify annotation's value.
type NotifyConfig struct {
	URL    string   `json:"url"`
	Format string   `json:"format,omitempty"`
	Events []string `json:"events,omitempty"`
}

// Wants reports whether the webhook asked for event.
func (c *NotifyConfig) Wants(event string) bool {
	return c != nil && (len(c.Events) == 0 || slices.Contains(c.Events, event))
}

// ParseNotify reads and validates the notify annotation. An absent or empty annotation is no
// webhook (nil, nil). The error names every problem found.
func ParseNotify(annotations map[string]string) (*NotifyConfig, error) {
	raw, ok := annotations[NotifyAnnotation]
	if !ok || strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	var c NotifyConfig
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object {\"url\":...,\"format\":...,\"events\":[...]}: %v", NotifyAnnotation, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s has data after the object", NotifyAnnotation)
	}
	var errs []error
	if strings.TrimSpace(c.URL) == "" {
		errs = append(errs, errors.New("url is empty"))
	} else if u, err := url.Parse(c.URL); err != nil {
		errs = append(errs, fmt.Errorf("url %q: %v", c.URL, err))
	} else if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("url %q is not an absolute http(s) URL", c.URL))
	}
	switch c.Format {
	case "":
		c.Format = NotifyFormatJSON
	case NotifyFormatJSON, NotifyFormatSlack:
	default:
		errs = append(errs, fmt.Errorf("format %q is neither %q nor %q", c.Format, NotifyFormatJSON, NotifyFormatSlack))
	}
	for _, e := range c.Events {
		if !slices.Contains(NotifyEvents, e) {
			errs = append(errs, fmt.Errorf("event %q is not one of %s", e, strings.Join(NotifyEvents, ", ")))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %w", NotifyAnnotation, errors.Join(errs...))
	}
	return &c, nil
}
