package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
