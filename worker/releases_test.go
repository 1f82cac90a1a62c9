package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"google.golang.org/grpc"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/lifecycle"
)

// registeredAttrs answers ListSearchAttributes with a fixed set.
type registeredAttrs map[string]enumspb.IndexedValueType

func (r registeredAttrs) ListSearchAttributes(context.Context, *operatorservice.ListSearchAttributesRequest, ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error) {
	return &operatorservice.ListSearchAttributesResponse{CustomAttributes: r}, nil
}

// TestReleasesChecksSearchAttributes: `worker --releases` (without --search-attributes) on a
// namespace without ReleaseName fails at start-up naming the command that creates it; with it
// registered, or with neither flag, nothing fails.
func TestReleasesChecksSearchAttributes(t *testing.T) {
	all := registeredAttrs{}
	for _, sa := range contract.SearchAttributes() {
		all[sa.Name] = sa.Type
	}
	none := registeredAttrs{}
	tests := []struct {
		name             string
		searchAttributes bool
		releases         bool
		give             registeredAttrs
		want             string // in the error; empty: no error
	}{
		{name: "releases, not registered", releases: true, give: none,
			want: "--releases needs ReleaseName (Keyword) registered; run: temporal operator search-attribute create --namespace default --name ReleaseName --type Keyword"},
		{name: "releases, registered", releases: true, give: all},
		{name: "both, not registered", searchAttributes: true, releases: true, give: none, want: "--search-attributes needs K8sNamespace (Keyword)"},
		{name: "neither", give: none},
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			for _, c := range searchAttributeChecks(tt.searchAttributes, tt.releases) {
				if err = lifecycle.CheckSearchAttributes(context.Background(), logger, tt.give, "default", c.flag, c.want, time.Second); err != nil {
					break
				}
			}
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("err = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestReadPolicy: --release-policy reads a policy file, and a file that does not say who signs
// starts (authors or unsigned: true), names a bad key list, or does not exist stops the worker
// with the reason.
func TestReadPolicy(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, give, wantErr string
	}{
		{"valid", "unsigned: true\nrules: [{namespace: shop, approvers: 2}]\n", ""},
		{"neither authors nor unsigned", "rules: [{namespace: shop, approvers: 1}]\n", "neither authors nor unsigned: true is set"},
		{"bad signers", "unsigned: true\nrules: [{namespace: shop, approvers: 1, signers: \"bob ssh-ed25519 nope\"}]\n", "rules[0]: signers"},
		{"unknown field", "unsigned: true\napprovers: 2\n", "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(tt.give), 0o600); err != nil {
				t.Fatal(err)
			}
			p, err := readPolicy(path)
			if tt.wantErr == "" {
				if err != nil || len(p.Rules) != 1 || p.Rules[0].Approvers != 2 {
					t.Fatalf("readPolicy = %+v, %v; want the rule", p, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
				t.Errorf("readPolicy error = %v, want one naming %s and %q", err, path, tt.wantErr)
			}
		})
	}
	if _, err := readPolicy(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "--release-policy") {
		t.Errorf("a missing file: %v, want an error naming --release-policy", err)
	}
}
