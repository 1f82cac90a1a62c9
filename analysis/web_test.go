package analysis

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestMeasureWeb(t *testing.T) {
	var gotMethod, gotAuth, gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotMethod, gotAuth, gotBody = r.Method, r.Header.Get("Authorization"), string(b)
		switch r.URL.Path {
		case "/ok":
			_, _ = io.WriteString(w, `{"data":{"errorRate":0.02,"series":[{"v":"3.5"}]}}`)
		case "/down":
			http.Error(w, "backend down", http.StatusServiceUnavailable)
		case "/html":
			_, _ = io.WriteString(w, "<html>")
		case "/slow":
			time.Sleep(200 * time.Millisecond)
			_, _ = io.WriteString(w, `{"a":1}`)
		}
	}))
	defer srv.Close()
	tests := []struct {
		name    string
		give    WebRequest
		want    float64
		wantOK  bool
		wantErr string
	}{
		{name: "value", give: WebRequest{URL: srv.URL + "/ok", JSONPath: "$.data.errorRate"}, want: 0.02, wantOK: true},
		{name: "array element, numeric string", give: WebRequest{URL: srv.URL + "/ok", JSONPath: "$.data.series[0].v"}, want: 3.5, wantOK: true},
		{name: "missing path is no data", give: WebRequest{URL: srv.URL + "/ok", JSONPath: "$.data.latency"}},
		{name: "non-2xx", give: WebRequest{URL: srv.URL + "/down", JSONPath: "$.a"}, wantErr: "HTTP 503: backend down"},
		{name: "not json", give: WebRequest{URL: srv.URL + "/html", JSONPath: "$.a"}, wantErr: "answer is not JSON"},
		{name: "not a number", give: WebRequest{URL: srv.URL + "/ok", JSONPath: "$.data"}, wantErr: "is a object, not a number"},
		{name: "timeout", give: WebRequest{URL: srv.URL + "/slow", JSONPath: "$.a", Timeout: 50 * time.Millisecond}, wantErr: "deadline exceeded"},
		{name: "unreachable", give: WebRequest{URL: "http://127.0.0.1:1/x", JSONPath: "$.a"}, wantErr: "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := MeasureWeb(context.Background(), nil, tt.give)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("MeasureWeb error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("MeasureWeb: %v", err)
			}
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("MeasureWeb = %g, %t; want %g, %t", got, ok, tt.want, tt.wantOK)
			}
		})
	}
	// POST sends the body and the headers.
	if _, _, err := MeasureWeb(context.Background(), nil, WebRequest{URL: srv.URL + "/ok", Method: "POST", Body: `{"q":1}`,
		Headers: map[string]string{"Authorization": "Bearer t"}, JSONPath: "$.data.errorRate"}); err != nil {
		t.Fatal(err)
	}
	if gotMethod != "POST" || gotAuth != "Bearer t" || gotBody != `{"q":1}` {
		t.Errorf("request: %s, Authorization %q, body %q; want POST, Bearer t, {\"q\":1}", gotMethod, gotAuth, gotBody)
	}
}
