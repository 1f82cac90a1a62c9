package analysis

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func serve(t *testing.T, status int, body string) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" {
			t.Errorf("path %s, want /api/v1/query", r.URL.Path)
		}
		if err := r.ParseForm(); err != nil || r.Form.Get("query") == "" {
			t.Errorf("no query in the request: %v", err)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestQuery(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		want    float64
		wantOK  bool
		wantErr string
	}{
		{name: "scalar", status: 200, body: `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"0.97"]}}`, want: 0.97, wantOK: true},
		{name: "one sample", status: 200, body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":"x"},"value":[1700000000,"0.5"]}]}}`, want: 0.5, wantOK: true},
		{name: "no data", status: 200, body: `{"status":"success","data":{"resultType":"vector","result":[]}}`},
		{name: "several series", status: 200, body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[1,"1"]},{"metric":{"a":"2"},"value":[1,"2"]}]}}`, wantErr: `returned 2 series ({a="1"}, {a="2"}, ...)`},
		{name: "NaN", status: 200, body: `{"status":"success","data":{"resultType":"scalar","result":[1,"NaN"]}}`, wantErr: "the value is NaN"},
		{name: "Inf", status: 200, body: `{"status":"success","data":{"resultType":"scalar","result":[1,"+Inf"]}}`, wantErr: "the value is +Inf"},
		{name: "string", status: 200, body: `{"status":"success","data":{"resultType":"string","result":[1,"x"]}}`, wantErr: "returned a string"},
		{name: "matrix", status: 200, body: `{"status":"success","data":{"resultType":"matrix","result":[]}}`, wantErr: "returned a matrix"},
		{name: "bad query", status: 400, body: `{"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected"}`, wantErr: "HTTP 400: bad_data: 1:5: parse error: unexpected"},
		{name: "unavailable", status: 503, body: `Service Unavailable`, wantErr: "HTTP 503: Service Unavailable"},
		{name: "status error", status: 200, body: `{"status":"error","errorType":"timeout","error":"query timed out"}`, wantErr: `status "error": timeout: query timed out`},
		{name: "not json", status: 200, body: `<html>`, wantErr: "answer is not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := serve(t, tt.status, tt.body)
			v, ok, err := c.Query(context.Background(), "up")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Query = %v, %t, %v; want an error containing %q", v, ok, err, tt.wantErr)
				}
				return
			}
			if err != nil || ok != tt.wantOK || v != tt.want {
				t.Fatalf("Query = %v, %t, %v; want %v, %t", v, ok, err, tt.want, tt.wantOK)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	c, err := NewClient(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Query(context.Background(), "up"); err == nil || !strings.Contains(err.Error(), "prometheus at "+addr) {
		t.Fatalf("Query to a closed port: %v, want an error naming the server", err)
	}
}

func TestNewClient(t *testing.T) {
	for give, want := range map[string]string{
		"127.0.0.1:9090":             "http://127.0.0.1:9090",
		"http://prom:9090/":          "http://prom:9090",
		"https://prom.example/prom/": "https://prom.example/prom",
	} {
		c, err := NewClient(give, nil)
		if err != nil || c.String() != want {
			t.Errorf("NewClient(%q) = %v, %v; want %s", give, c, err, want)
		}
	}
	for _, bad := range []string{"", "ftp://x:1", "http://", "http://x:1/?q=1", "http://[::1"} {
		_, err := NewClient(bad, nil)
		if err == nil {
			t.Errorf("NewClient(%q) accepted, want an error", bad)
		} else if bad != "" && !strings.Contains(err.Error(), bad) {
			t.Errorf("NewClient(%q): %v, want the error to name the address", bad, err)
		}
	}
}
