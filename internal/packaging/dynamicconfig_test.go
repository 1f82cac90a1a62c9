package packaging

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/temporal-rollout/rollout/internal/stack"
)

// TestComposeTemporalDynamicConfig: docker-compose.yml's Temporal server loads
// deploy/temporal/dynamicconfig.yaml, and that file sets exactly what the local stack and the
// tests run with (stack.ServerDynamicConfig), with the same values.
func TestComposeTemporalDynamicConfig(t *testing.T) {
	const file, mounted = "deploy/temporal/dynamicconfig.yaml", "/etc/temporal/config/dynamicconfig/rollout.yaml"
	s := loadCompose(t).Services["temporal"]
	if got := s.Environment["DYNAMIC_CONFIG_FILE_PATH"]; got != mounted {
		t.Errorf("temporal: DYNAMIC_CONFIG_FILE_PATH = %q, want %q", got, mounted)
	}
	want := "./" + file + ":" + mounted + ":ro"
	found := false
	for _, v := range s.Volumes {
		found = found || v == want
	}
	if !found {
		t.Errorf("temporal: volumes %q, want %q among them", s.Volumes, want)
	}

	b, err := os.ReadFile("../../" + file)
	if err != nil {
		t.Fatal(err)
	}
	var dc map[string][]struct {
		Value       any            `json:"value"`
		Constraints map[string]any `json:"constraints"`
	}
	if err := yaml.UnmarshalStrict(b, &dc); err != nil {
		t.Fatalf("%s does not parse: %v", file, err)
	}
	got := map[string]string{}
	for k, vs := range dc {
		if len(vs) != 1 || vs[0].Constraints != nil {
			t.Errorf("%s: %s has %d values (constraints %v), want one value for the whole server", file, k, len(vs), vs)
			continue
		}
		got[k] = strings.ToLower(fmt.Sprint(vs[0].Value))
	}
	for _, kv := range stack.ServerDynamicConfig {
		if v, ok := got[kv.Key]; !ok || v != kv.Value {
			t.Errorf("%s: %s = %q (set: %v), want %q as the stack runs", file, kv.Key, v, ok, kv.Value)
		}
		delete(got, kv.Key)
	}
	for k, v := range got {
		t.Errorf("%s: %s = %s, which the stack does not run with", file, k, v)
	}
}
