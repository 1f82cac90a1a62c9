// Package analysis asks a Prometheus server for the measurements of a stepped rollout's
// analysis steps.
package analysis

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Client queries a Prometheus server's HTTP API (/api/v1/query).
type Client struct {
	base *url.URL
	hc   *http.Client
}

// NewClient takes "http://host:port", "https://host:port/prefix" or "host:port" (http).
func NewClient(address string, hc *http.Client) (*Client, error) {
	a := strings.TrimSpace(address)
	if a == "" {
		return nil, fmt.Errorf("prometheus address is empty")
	}
	if !strings.Contains(a, "://") {
		a = "http://" + a
	}
	u, err := url.Parse(a)
	if err != nil {
		return nil, fmt.Errorf("prometheus address %q: %w", address, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("prometheus address %q: want http(s)://host:port", address)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &Client{base: u, hc: hc}, nil
}

// String is the server's address.
func (c *Client) String() string { return c.base.String() }

type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

type queryData struct {
	ResultType string          `json:"resultType"`
	Result     json.RawMessage `json:"result"`
}

type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Query runs an instant query. It returns the value of a scalar result, or of a vector with
// exactly one sample; an empty vector is no data (ok=false). Anything else is an error that
// says what went wrong: the server unreachable, an HTTP or Prometheus error (with its
// message), a matrix or string result, several series, a NaN or infinite value.
func (c *Client) Query(ctx context.Context, query string) (value float64, ok bool, err error) {
	u := *c.base
	u.Path += "/api/v1/query"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(url.Values{"query": {query}}.Encode()))
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, false, fmt.Errorf("prometheus at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, false, fmt.Errorf("prometheus at %s: read answer: %w", c.base, err)
	}
	var ar apiResponse
	jerr := json.Unmarshal(body, &ar)
	if resp.StatusCode/100 != 2 {
		if jerr == nil && ar.Error != "" {
			return 0, false, fmt.Errorf("prometheus at %s: HTTP %d: %s: %s", c.base, resp.StatusCode, ar.ErrorType, ar.Error)
		}
		return 0, false, fmt.Errorf("prometheus at %s: HTTP %d: %s", c.base, resp.StatusCode, snippet(body))
	}
	if jerr != nil {
		return 0, false, fmt.Errorf("prometheus at %s: answer is not JSON: %v: %s", c.base, jerr, snippet(body))
	}
	if ar.Status != "success" {
		return 0, false, fmt.Errorf("prometheus at %s: status %q: %s: %s", c.base, ar.Status, ar.ErrorType, ar.Error)
	}
	var d queryData
	if err := json.Unmarshal(ar.Data, &d); err != nil {
		return 0, false, fmt.Errorf("prometheus at %s: malformed data: %v", c.base, err)
	}
	switch d.ResultType {
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(d.Result, &v); err != nil {
			return 0, false, fmt.Errorf("prometheus: malformed scalar: %v", err)
		}
		f, err := parseValue(v)
		return f, err == nil, err
	case "vector":
		var samples []sample
		if err := json.Unmarshal(d.Result, &samples); err != nil {
			return 0, false, fmt.Errorf("prometheus: malformed vector: %v", err)
		}
		switch len(samples) {
		case 0:
			return 0, false, nil
		case 1:
			f, err := parseValue(samples[0].Value)
			return f, err == nil, err
		}
		return 0, false, fmt.Errorf("query %q returned %d series (%s, %s, ...); want one value: aggregate it (sum, avg, ...)",
			query, len(samples), labels(samples[0].Metric), labels(samples[1].Metric))
	default:
		return 0, false, fmt.Errorf("query %q returned a %s; want a scalar or a one-series vector", query, d.ResultType)
	}
}

// parseValue reads a [time, "value"] pair.
func parseValue(v [2]any) (float64, error) {
	s, ok := v[1].(string)
	if !ok {
		return 0, fmt.Errorf("prometheus: value %v is not a string", v[1])
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("prometheus: value %q: %w", s, err)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("prometheus: the value is %s, not a number to compare", s)
	}
	return f, nil
}

func labels(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
