package analysis

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/temporal-rollout/rollout/analysis/jsonpath"
)

// WebRequest is one web measurement: an HTTP request whose JSON answer holds the value at
// JSONPath (see package jsonpath).
type WebRequest struct {
	URL      string
	Method   string // GET (also when empty) or POST
	Headers  map[string]string
	Body     string
	JSONPath string
	Timeout  time.Duration // 0: the context's deadline only
}

// maxWebAnswer bounds the answer read.
const maxWebAnswer = 4 << 20

// MeasureWeb sends the request and reads the number at the JSON path. ok is false when the path
// leads nowhere (a missing member, an index past the end, null): no data. A request that
// fails, a non-2xx answer, an answer that is not JSON, or a value that is not a number is an
// error that says which.
func MeasureWeb(ctx context.Context, hc *http.Client, r WebRequest) (value float64, ok bool, err error) {
	path, err := jsonpath.Parse(r.JSONPath)
	if err != nil {
		return 0, false, err
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	method := strings.ToUpper(r.Method)
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.URL, body)
	if err != nil {
		return 0, false, fmt.Errorf("%s %s: %w", method, r.URL, err)
	}
	req.Header.Set("Accept", "application/json")
	if r.Body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	names := make([]string, 0, len(r.Headers))
	for k := range r.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		req.Header.Set(k, r.Headers[k])
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, false, fmt.Errorf("%s %s: %w", method, r.URL, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxWebAnswer))
	if err != nil {
		return 0, false, fmt.Errorf("%s %s: read answer: %w", method, r.URL, err)
	}
	if resp.StatusCode/100 != 2 {
		return 0, false, fmt.Errorf("%s %s: HTTP %d: %s", method, r.URL, resp.StatusCode, snippet(answer))
	}
	v, ok, err := path.Number(answer)
	if err != nil {
		return 0, false, fmt.Errorf("%s %s: %w: %s", method, r.URL, err, snippet(answer))
	}
	return v, ok, nil
}
