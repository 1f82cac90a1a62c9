package release

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// realisticTemplate is a pod template as production Deployments have them, about 3.4 KB of
// JSON: labels and annotations, an app container with its environment, ports, resources,
// probes, mounts and security context, a sidecar and volumes.
func realisticTemplate(image string) corev1.PodTemplateSpec {
	var env []corev1.EnvVar
	for i, name := range []string{"LOG_LEVEL", "LOG_FORMAT", "HTTP_PORT", "GRPC_PORT", "DB_HOST", "DB_PORT", "DB_NAME", "DB_POOL_SIZE",
		"CACHE_URL", "CACHE_TTL", "FEATURE_FLAGS_URL", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME", "TZ", "GOMAXPROCS", "GOMEMLIMIT",
		"SESSION_TTL", "RATE_LIMIT_RPS", "RATE_LIMIT_BURST", "UPSTREAM_TIMEOUT", "PAYMENTS_URL", "SEARCH_URL", "ASSETS_CDN", "REGION", "ZONE", "SHUTDOWN_GRACE", "MAX_BODY_BYTES", "CORS_ORIGINS"} {
		env = append(env, corev1.EnvVar{Name: name, Value: fmt.Sprintf("value-%02d-for-%s", i, strings.ToLower(name))})
	}
	env = append(env, corev1.EnvVar{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "web-db"}, Key: "password"}}})
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}},
			InitialDelaySeconds: 5, PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3}
	}
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
	no, yes, uid := false, true, int64(10001)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"app": "web", "tier": "front", "team": "shop", "app.kubernetes.io/name": "web", "app.kubernetes.io/version": "1.26"},
			Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9100", "kubectl.kubernetes.io/default-container": "app"},
		},
		Spec: corev1.PodSpec{
			ServiceAccountName: "web", TerminationGracePeriodSeconds: ptrTo(int64(45)),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, FSGroup: &uid},
			Containers: []corev1.Container{{
				Name: "app", Image: image, Args: []string{"--config=/etc/web/config.yaml", "--listen=:8080"}, Env: env,
				Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "grpc", ContainerPort: 9090}, {Name: "metrics", ContainerPort: 9100}},
				Resources: res, LivenessProbe: probe("/healthz"), ReadinessProbe: probe("/readyz"),
				VolumeMounts:    []corev1.VolumeMount{{Name: "config", MountPath: "/etc/web"}, {Name: "tmp", MountPath: "/tmp"}},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes, Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}, {
				Name: "proxy", Image: "envoyproxy/envoy:v1.31.2", Args: []string{"-c", "/etc/envoy/envoy.yaml", "--log-level", "warn"},
				Ports:     []corev1.ContainerPort{{Name: "proxy", ContainerPort: 15001}},
				Resources: res, VolumeMounts: []corev1.VolumeMount{{Name: "envoy", MountPath: "/etc/envoy"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}},
				{Name: "envoy", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-envoy"}}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestThousandTargetsContinueAsNewAndRollBack: a release of 1,000 Deployments (the most one
// may name) with realistic pod templates (3.4 KB each), 999 in wave 1, continues as new before
// wave 2 with a state well under Temporal's 2 MB payload limit (carrying the templates, it was
// 3.4 MiB and the run could not continue), and when wave 2 fails the next run rolls all 1,000
// back: wave 1's 999 from their old ReplicaSets (by pod-template-hash), wave 2's from the
// template its run read.
func TestThousandTargetsContinueAsNewAndRollBack(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 activities: about 20s")
	}
	const n = MaxTargets - 1
	var names, keys []string
	for i := range n {
		names = append(names, fmt.Sprintf("web-%04d", i))
		keys = append(keys, fmt.Sprintf("/shop/web-%04d", i))
	}
	spec := twoWaves(t, func(s *Spec) {
		s.Targets = []TargetGroup{{Name: "big", Namespace: "shop", Names: names}, {Name: "last", Namespace: "shop", Names: []string{"z"}}}
		s.Waves = []Wave{{Name: "first", Targets: []string{"big"}, MaxConcurrent: n}, {Name: "second", Targets: []string{"last"}}}
	})
	if b, _ := json.Marshal(realisticTemplate("nginx:1.26")); len(b) < 3300 || len(b) > 3500 {
		t.Fatalf("a realistic template is %d bytes of JSON, want about 3.4 KB", len(b))
	}

	// Run 1: wave 1, then continue as new.
	env := newEnv(t, spec)
	f := newFleet(env, append(keys, "/shop/z")...)
	f.realistic = true
	env.SetCurrentHistoryLength(continueAfterEvents + 1)
	env.ExecuteWorkflow(ReleaseWorkflow, spec)
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("error = %v, want continue-as-new", err)
	}
	size := proto.Size(can.Input)
	const limit = 2 << 20
	if size > limit/4 {
		t.Fatalf("continue-as-new input is %d bytes, want at most a quarter of Temporal's %d-byte limit", size, limit)
	}
	t.Logf("continue-as-new input: %d bytes for %d targets", size, n+1)
	var next Spec
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if p := next.Resume.Points[0]; !p.Changed || p.Before != nil || p.BeforeHash != "h-nginx:1.26" {
		t.Fatalf("handed over point %+v, want changed, no template, hash h-nginx:1.26", p)
	}

	// Run 2: wave 2 fails; everything goes back.
	env2 := newEnv(t, next)
	env2.SetContinuedExecutionRunID("run-1")
	f2 := newFleet(env2, append(keys, "/shop/z")...)
	f2.realistic = true
	for _, k := range keys {
		f2.deps[k].image = "nginx:1.27"
	}
	f2.failRollout["z"] = "nginx:1.27"
	env2.ExecuteWorkflow(ReleaseWorkflow, next)
	if r := result(t, env2); r.Phase != PhaseRolledBack {
		t.Fatalf("result = %+v, want RolledBack", r)
	}
	if got := len(f2.lines("restore")); got != n+1 {
		t.Errorf("%d restores, want %d", got, n+1)
	}
	if f2.fromHash != n {
		t.Errorf("%d restores from a ReplicaSet's hash, want %d", f2.fromHash, n)
	}
	for k, d := range f2.deps {
		if d.image != "nginx:1.26" {
			t.Errorf("%s image %s, want nginx:1.26", k, d.image)
		}
	}
	st := query(t, env2)
	for _, tg := range st.Targets {
		if tg.State != TargetRolledBack {
			t.Errorf("%s: %s, want RolledBack", tg.Name, tg.State)
			break
		}
	}
}
