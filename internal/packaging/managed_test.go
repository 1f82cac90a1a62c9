package packaging

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/temporal-rollout/rollout/internal/config"
)

// The policies of deploy/managed/guard.yaml.
const (
	parkedDeploymentsPolicy = "temporal-rollout-parked-deployments"
	replicaSetGuardPolicy   = "temporal-rollout-parked-replicasets"
)

// TestManagedKustomization: deploy/managed/ installs the ReplicaSet guard exactly when its
// config sets managed-guard: true (a worker with the flag and no policy fails open; a policy
// without the flag leaves Recreate and maxSurge 0 with kube-controller-manager for nothing),
// and its config is base's with mode: managed, every key a setting.
func TestManagedKustomization(t *testing.T) {
	var k struct {
		Resources []string `json:"resources"`
		Patches   []struct {
			Target struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"target"`
			Patch string `json:"patch"`
		} `json:"patches"`
	}
	readYAML(t, "deploy/managed/kustomization.yaml", &k)

	// The policies (and their bindings) the kustomization installs.
	installed := map[string]bool{}
	for _, r := range k.Resources {
		if !strings.HasSuffix(r, ".yaml") {
			continue
		}
		b, err := os.ReadFile("../../deploy/managed/" + r)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(b), "\n---\n") {
			var obj struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("%s: %v", r, err)
			}
			installed[obj.Kind+"/"+obj.Metadata.Name] = true
		}
	}
	for _, p := range []string{parkedDeploymentsPolicy, replicaSetGuardPolicy} {
		if installed["ValidatingAdmissionPolicy/"+p] != installed["ValidatingAdmissionPolicyBinding/"+p] {
			t.Errorf("deploy/managed installs the policy %s or its binding without the other", p)
		}
	}
	if !installed["ValidatingAdmissionPolicy/"+parkedDeploymentsPolicy] {
		t.Errorf("deploy/managed does not install %s", parkedDeploymentsPolicy)
	}

	// The config the patch puts in place of base's.
	var managed map[string]any
	for _, p := range k.Patches {
		if p.Target.Kind != "ConfigMap" || p.Target.Name != "temporal-rollout" {
			continue
		}
		var ops []struct {
			Op    string `json:"op"`
			Path  string `json:"path"`
			Value string `json:"value"`
		}
		if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
			t.Fatal(err)
		}
		for _, op := range ops {
			if op.Op == "replace" && op.Path == "/data/config.yaml" {
				if err := yaml.Unmarshal([]byte(op.Value), &managed); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if managed == nil {
		t.Fatal("deploy/managed/kustomization.yaml does not replace the config's config.yaml")
	}
	guard, _ := managed["managed-guard"].(bool)
	if policy := installed["ValidatingAdmissionPolicy/"+replicaSetGuardPolicy]; guard != policy {
		t.Errorf("deploy/managed: config managed-guard: %t, but the ReplicaSet guard %s installed: %t", guard, replicaSetGuardPolicy, policy)
	}
	if managed["mode"] != config.ModeManaged {
		t.Errorf("deploy/managed: config mode %v, want %s", managed["mode"], config.ModeManaged)
	}

	// Every key is a setting, and the rest is base's.
	var base struct {
		Data map[string]string `json:"data"`
	}
	readYAML(t, "deploy/base/config.yaml", &base)
	var baseCfg map[string]any
	if err := yaml.Unmarshal([]byte(base.Data["config.yaml"]), &baseCfg); err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	config.Flags(fs)
	for key, v := range managed {
		if fs.Lookup(key) == nil {
			t.Errorf("deploy/managed: config key %s is no setting", key)
		}
		if key != "mode" && key != "managed-guard" && baseCfg[key] != v {
			t.Errorf("deploy/managed: config %s: %v, base's %v", key, v, baseCfg[key])
		}
	}
	for key := range baseCfg {
		if _, ok := managed[key]; !ok {
			t.Errorf("deploy/managed: config lacks base's %s", key)
		}
	}
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile("../../" + file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}
