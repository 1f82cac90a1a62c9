package main

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/temporal-rollout/rollout/codec"
	"github.com/temporal-rollout/rollout/internal/config"
)

func TestCodecHandler(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "codec.keys")
	secret := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	if err := os.WriteFile(keyFile, []byte("k1="+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		give    string // --codec-key-file
		wantErr string
	}{
		{name: "key file", give: keyFile},
		{name: "no key file", wantErr: "codec-server needs --codec-key-file"},
		{name: "unreadable key file", give: keyFile + ".absent", wantErr: "codec-key-file: read codec key file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := codecHandler(config.Config{CodecKeyFile: tt.give}, "http://localhost:8233")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("codecHandler error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()

			// The UI's preflight.
			req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/decode", nil)
			req.Header.Set("Origin", "http://localhost:8233")
			req.Header.Set("Access-Control-Request-Method", "POST")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:8233" ||
				!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "X-Namespace") {
				t.Errorf("preflight = %d %v, want 200 allowing the UI's origin and X-Namespace", resp.StatusCode, resp.Header)
			}

			// What the worker encrypted, the server decrypts.
			cd, err := codec.Load(keyFile)
			if err != nil {
				t.Fatal(err)
			}
			p, err := cd.DataConverter().ToPayload("registry.example/app:v2")
			if err != nil {
				t.Fatal(err)
			}
			remote := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{Endpoint: srv.URL})
			got, err := remote.Decode([]*commonpb.Payload{p})
			if err != nil {
				t.Fatalf("decode through the codec server: %v", err)
			}
			if string(got[0].Data) != `"registry.example/app:v2"` {
				t.Errorf("decoded %s, want the image", got[0].Data)
			}
		})
	}
}
