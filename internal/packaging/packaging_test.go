package packaging

import (
	"net"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/temporal-rollout/rollout/internal/config"
)

type composeFile struct {
	Name     string                    `json:"name"`
	Services map[string]composeService `json:"services"`
	Volumes  map[string]any            `json:"volumes"`
}

type composeService struct {
	Image       string                       `json:"image"`
	Build       any                          `json:"build"`
	Command     []string                     `json:"command"`
	Entrypoint  []string                     `json:"entrypoint"`
	Environment map[string]string            `json:"environment"`
	Ports       []string                     `json:"ports"`
	Volumes     []string                     `json:"volumes"`
	DependsOn   map[string]map[string]string `json:"depends_on"`
	Healthcheck *struct {
		Test        []string `json:"test"`
		Interval    string   `json:"interval"`
		Timeout     string   `json:"timeout"`
		Retries     int      `json:"retries"`
		StartPeriod string   `json:"start_period"`
	} `json:"healthcheck"`
	ReadOnly bool   `json:"read_only"`
	User     string `json:"user"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	return c
}

func TestComposeServices(t *testing.T) {
	c := loadCompose(t)
	var got []string
	for name := range c.Services {
		got = append(got, name)
	}
	sort.Strings(got)
	want := "kubeconfig postgresql temporal temporal-admin-tools temporal-ui worker"
	if strings.Join(got, " ") != want {
		t.Fatalf("services = %v, want %s", got, want)
	}
	// No watcher service: the worker runs it.
	if cmd := strings.Join(c.Services["worker"].Command, " "); !strings.Contains(cmd, "--watch") {
		t.Errorf("worker command %q lacks --watch: nothing would start the workflows", cmd)
	}
}

var pinned = regexp.MustCompile(`^[a-z0-9./-]+:[0-9][A-Za-z0-9._-]*$`)

func TestComposeImagesPinned(t *testing.T) {
	for name, s := range loadCompose(t).Services {
		if s.Build != nil {
			if s.Image == "" {
				t.Errorf("service %s builds without naming its image", name)
			}
			continue
		}
		if s.Image == "temporal-rollout:dev" {
			continue
		}
		if !pinned.MatchString(s.Image) {
			t.Errorf("service %s image %q is not pinned to a version", name, s.Image)
		}
	}
}

func TestComposeDependsOn(t *testing.T) {
	c := loadCompose(t)
	for name, s := range c.Services {
		for dep, cond := range s.DependsOn {
			target, ok := c.Services[dep]
			if !ok {
				t.Errorf("service %s depends on unknown service %s", name, dep)
				continue
			}
			switch cond["condition"] {
			case "service_healthy":
				if target.Healthcheck == nil {
					t.Errorf("service %s waits for %s to be healthy, but %s has no healthcheck", name, dep, dep)
				}
			case "service_completed_successfully", "service_started":
			default:
				t.Errorf("service %s depends on %s with condition %q", name, dep, cond["condition"])
			}
		}
	}
	for _, name := range []string{"postgresql", "temporal", "worker"} {
		if c.Services[name].Healthcheck == nil {
			t.Errorf("service %s has no healthcheck", name)
		}
	}
}

// TestComposeEnvMatchesConfig: every ROLLOUT_* variable is a real setting, and the
// addresses and ports agree across services.
func TestComposeEnvMatchesConfig(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	config.Flags(fs)
	known := map[string]bool{"ROLLOUT_KUBECONFIG": true}
	fs.VisitAll(func(f *pflag.Flag) {
		known[config.EnvPrefix+"_"+strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))] = true
	})
	c := loadCompose(t)
	published := map[string]string{}
	for name, s := range c.Services {
		for _, p := range s.Ports {
			host, ctr, _ := strings.Cut(p, ":")
			published[name+":"+ctr] = host
		}
	}
	for _, name := range []string{"worker"} {
		s := c.Services[name]
		for k := range s.Environment {
			if strings.HasPrefix(k, config.EnvPrefix+"_") && !known[k] {
				t.Errorf("service %s sets %s, which is no setting of ours", name, k)
			}
		}
		addr := s.Environment["ROLLOUT_TEMPORAL_ADDRESS"]
		host, port, err := net.SplitHostPort(addr)
		if err != nil || c.Services[host].Image == "" || published[host+":"+port] == "" {
			t.Errorf("service %s ROLLOUT_TEMPORAL_ADDRESS=%q does not name a service port", name, addr)
		}
		// The metrics address, the published port and the healthcheck agree.
		args := strings.Join(s.Command, " ")
		m := regexp.MustCompile(`--metrics-address :(\d+)`).FindStringSubmatch(args)
		if m == nil {
			t.Errorf("service %s sets no --metrics-address", name)
			continue
		}
		if published[name+":"+m[1]] == "" {
			t.Errorf("service %s serves metrics on %s but does not publish it (%v)", name, m[1], s.Ports)
		}
		if s.Healthcheck == nil || !strings.Contains(strings.Join(s.Healthcheck.Test, " "), "127.0.0.1:"+m[1]+"/readyz") {
			t.Errorf("service %s healthcheck does not probe /readyz on %s", name, m[1])
		}
		if !s.ReadOnly || s.User == "" || strings.HasPrefix(s.User, "0") {
			t.Errorf("service %s: read_only=%t user=%q, want a read-only root filesystem and a non-root user", name, s.ReadOnly, s.User)
		}
		if len(s.Volumes) == 0 || s.Volumes[0] != "kubeconfig:/kube:ro" || s.Environment["ROLLOUT_KUBECONFIG"] != "/kube/config" {
			t.Errorf("service %s must mount the kubeconfig volume read-only at /kube and point ROLLOUT_KUBECONFIG at /kube/config (TestComposeKubeconfig)", name)
		}
	}
	if got := c.Services["temporal-ui"].Environment["TEMPORAL_ADDRESS"]; got != "temporal:7233" {
		t.Errorf("temporal-ui TEMPORAL_ADDRESS = %q, want temporal:7233", got)
	}
	if published["temporal:7233"] == "" {
		t.Errorf("temporal does not publish 7233")
	}
}

// TestDockerfileStages: a golang builder at go.mod's Go version, and a distroless static base
// running as the non-root user. TestDockerfileBuilds replays the build itself.
func TestDockerfileStages(t *testing.T) {
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stages, err := parseDockerfile(f)
	if err != nil {
		t.Fatal(err)
	}
	build, _ := buildStage(t, stages)
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(gomod))[1]
	if !strings.HasPrefix(build.image, "golang:"+goVersion) {
		t.Errorf("build stage image %s, want golang:%s (go.mod)", build.image, goVersion)
	}
	final := stages[len(stages)-1]
	if !strings.Contains(final.image, "distroless/static") {
		t.Errorf("final image %s, want distroless/static", final.image)
	}
	var user string
	for _, in := range final.ins {
		if in.cmd == "USER" {
			user = in.args
		}
	}
	if user != "65532:65532" {
		t.Errorf("final stage USER %q, want 65532:65532", user)
	}
}
