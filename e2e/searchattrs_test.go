//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/stack"
)

// TestSearchAttributesMissing: on a Temporal dev server without our search attributes, the
// worker and `starter watch` with --search-attributes exit non-zero within 10s, their last
// line naming each missing attribute and the command that creates it. With the four that
// docker-compose.yml used to register, they name the later ones (RolloutWaitingFor,
// RolloutCluster) alone; with all of
// contract.SearchAttributes registered, they start.
func TestSearchAttributesMissing(t *testing.T) {
	ns := newNamespace(t)
	port, err := stack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	// A bare dev server: the default namespace, no --search-attribute.
	if _, err := env.stack.StartProcess("temporal-bare", stack.ToolPath(env.tools, "temporal"),
		"server", "start-dev", "--ip", "127.0.0.1", "--port", strconv.Itoa(port), "--headless",
		"--log-level", "warn", "--db-filename", filepath.Join(t.TempDir(), "bare.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.stack.StopProcess("temporal-bare") })
	eventually(t, 60*time.Second, func() string {
		c, err := client.Dial(client.Options{HostPort: addr, Logger: quiet{}})
		if err != nil {
			return err.Error()
		}
		defer c.Close()
		if _, err := c.CheckHealth(context.Background(), &client.CheckHealthRequest{}); err != nil {
			return err.Error()
		}
		return ""
	})
	create := func(names ...string) {
		t.Helper()
		for _, sa := range contract.SearchAttributes() {
			for _, n := range names {
				if sa.Name != n {
					continue
				}
				cmd := exec.Command(stack.ToolPath(env.tools, "temporal"), "operator", "search-attribute", "create",
					"--address", addr, "--namespace", "default", "--name", sa.Name, "--type", sa.Type.String())
				cmd.Env = append(os.Environ(), "TEMPORAL_CLI_SHOW_STACKS=0")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("create %s: %v\n%s", sa.Name, err, out)
				}
			}
		}
	}
	command := func(name, typ string) string {
		return fmt.Sprintf("temporal operator search-attribute create --namespace default --name %s --type %s", name, typ)
	}
	all := contract.SearchAttributes()
	var allNames []string
	for _, sa := range all {
		allNames = append(allNames, sa.Name)
	}

	// A worker with --releases upserts ReleaseName: without it registered, a release's workflow
	// task would fail for ever. It exits at start, naming the attribute and its command, with or
	// without --search-attributes.
	t.Run("releases without ReleaseName", func(t *testing.T) {
		args := append(append([]string{}, isolatedArgs(t, ns)...), "--temporal-address", addr, "--releases")
		start := time.Now()
		p := startOurs(t, "worker", args...)
		code := p.wait(10 * time.Second)
		out := p.output()
		if code == -1 {
			t.Fatalf("still running after 10s; output:\n%s", out)
		}
		last := lastLine(out)
		t.Logf("exit %d after %s: %s", code, time.Since(start).Round(time.Millisecond), last)
		if code == 0 {
			t.Errorf("exit code 0, want non-zero")
		}
		for _, w := range []string{"ReleaseName (Keyword)", command("ReleaseName", "Keyword")} {
			if !strings.Contains(last, w) {
				t.Errorf("last line %q does not name %q", last, w)
			}
		}
	})

	for _, step := range []struct {
		name    string
		create  []string // registered before the runs
		missing []contract.SearchAttribute
	}{
		{name: "none registered", missing: all},
		{name: "the four compose registered", create: allNames[:4], missing: all[4:]},
		{name: "all registered", create: allNames[4:]},
	} {
		create(step.create...)
		for _, b := range binaries {
			t.Run(step.name+"/"+b.name, func(t *testing.T) {
				// Later flags win: the bare server replaces the suite's.
				args := append(append(append([]string{}, b.args...), isolatedArgs(t, ns)...), "--temporal-address", addr, "--search-attributes")
				if b.name == "worker" {
					args = append(args, "--watch")
				}
				start := time.Now()
				p := startOurs(t, b.name, args...)
				if len(step.missing) == 0 {
					if code := p.wait(5 * time.Second); code != -1 {
						t.Fatalf("exit %d with every search attribute registered; output:\n%s", code, p.output())
					}
					return
				}
				code := p.wait(10 * time.Second)
				out := p.output()
				if code == -1 {
					t.Fatalf("still running after 10s; output:\n%s", out)
				}
				last := lastLine(out)
				t.Logf("exit %d after %s: %s", code, time.Since(start).Round(time.Millisecond), last)
				if code == 0 {
					t.Errorf("exit code 0, want non-zero")
				}
				if !strings.HasPrefix(last, b.name+": ") {
					t.Errorf("last line %q does not start with %q", last, b.name+": ")
				}
				missing := map[string]bool{}
				for _, sa := range step.missing {
					missing[sa.Name] = true
					for _, w := range []string{sa.Name + " (" + sa.Type.String() + ")", command(sa.Name, sa.Type.String())} {
						if !strings.Contains(last, w) {
							t.Errorf("last line %q does not name %q", last, w)
						}
					}
				}
				for _, sa := range all {
					if !missing[sa.Name] && strings.Contains(last, "--name "+sa.Name+" ") {
						t.Errorf("last line %q names %s, which is registered", last, sa.Name)
					}
				}
			})
		}
	}
}
