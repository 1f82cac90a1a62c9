package codec

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
)

// The codec server round-trips payloads as the temporal CLI's remote codec does.
func TestHandlerRoundTrip(t *testing.T) {
	c := mustCodec(t, keyLine("k1", 1))
	srv := httptest.NewServer(Handler(c, ""))
	defer srv.Close()
	remote := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{Endpoint: srv.URL})
	p := payload(t, "registry.example/app:v2")
	enc, err := remote.Encode([]*commonpb.Payload{p})
	if err != nil {
		t.Fatalf("remote Encode: %v", err)
	}
	if strings.Contains(string(enc[0].Data), "registry.example") || string(enc[0].Metadata[MetadataKeyID]) != "k1" {
		t.Errorf("remote Encode = %v, want it encrypted with k1", enc[0])
	}
	// What the server encoded, the worker's codec decodes, and the other way round.
	local, err := c.Decode(enc)
	if err != nil || string(local[0].Data) != `"registry.example/app:v2"` {
		t.Errorf("local Decode = %v, %v; want the image back", local, err)
	}
	sealed, err := c.Encode([]*commonpb.Payload{p})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := remote.Decode(sealed)
	if err != nil {
		t.Fatalf("remote Decode: %v", err)
	}
	if string(dec[0].Data) != `"registry.example/app:v2"` {
		t.Errorf("remote Decode = %s, want the image back", dec[0].Data)
	}
}

func TestHandler(t *testing.T) {
	c := mustCodec(t, keyLine("k1", 1))
	other := mustCodec(t, keyLine("k9", 9))
	sealed, err := other.Encode([]*commonpb.Payload{payload(t, "secret")})
	if err != nil {
		t.Fatal(err)
	}
	unknownKey, err := protojson.Marshal(&commonpb.Payloads{Payloads: sealed})
	if err != nil {
		t.Fatal(err)
	}
	const ui = "http://localhost:8233"
	type want struct {
		status  int
		headers map[string]string // "" value: header absent
		body    string            // substring
	}
	tests := []struct {
		name   string
		cors   string
		method string
		path   string
		body   string
		header map[string]string
		want   want
	}{
		{
			name: "preflight from the UI", cors: ui, method: http.MethodOptions, path: "/decode",
			header: map[string]string{"Origin": ui, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,x-namespace"},
			want: want{status: http.StatusOK, headers: map[string]string{
				"Access-Control-Allow-Origin":  ui,
				"Access-Control-Allow-Headers": "Content-Type, X-Namespace, Authorization",
				"Access-Control-Allow-Methods": "POST, OPTIONS",
			}},
		},
		{
			name: "decode from the UI", cors: ui, method: http.MethodPost, path: "/decode", body: `{"payloads":[]}`,
			header: map[string]string{"Origin": ui, "Content-Type": "application/json", "X-Namespace": "default"},
			want:   want{status: http.StatusOK, headers: map[string]string{"Access-Control-Allow-Origin": ui, "Content-Type": "application/json"}},
		},
		{
			name: "no CORS without an origin configured", method: http.MethodOptions, path: "/decode",
			header: map[string]string{"Origin": ui},
			want:   want{status: http.StatusMethodNotAllowed, headers: map[string]string{"Access-Control-Allow-Origin": ""}},
		},
		{
			name: "a path prefix is fine", method: http.MethodPost, path: "/default/decode", body: `{"payloads":[]}`,
			want: want{status: http.StatusOK},
		},
		{
			name: "unknown path", method: http.MethodPost, path: "/other", body: `{}`,
			want: want{status: http.StatusNotFound},
		},
		{
			name: "GET", method: http.MethodGet, path: "/decode",
			want: want{status: http.StatusMethodNotAllowed},
		},
		{
			name: "bad JSON", method: http.MethodPost, path: "/decode", body: `{`,
			want: want{status: http.StatusBadRequest},
		},
		{
			name: "unknown key ID", method: http.MethodPost, path: "/decode", body: string(unknownKey),
			want: want{status: http.StatusBadRequest, body: `unknown key ID "k9"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(Handler(c, tt.cors))
			defer srv.Close()
			req, err := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.want.status {
				t.Errorf("status = %d (%s), want %d", resp.StatusCode, body, tt.want.status)
			}
			for k, v := range tt.want.headers {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if !strings.Contains(string(body), tt.want.body) {
				t.Errorf("body = %q, want it to contain %q", body, tt.want.body)
			}
		})
	}
}
