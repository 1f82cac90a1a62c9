package activities

import (
	"context"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/temporal-rollout/rollout/k8s"
)

// withSecrets is a template with what the history must not hold: an inline env value.
func withSecrets(image string) corev1.PodTemplateSpec {
	t := podTemplate(image, "")
	t.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "TOKEN", Value: "s3cr3t"}}
	return t
}

func TestRedactSnapshot(t *testing.T) {
	d := withDeployment(testDeployment(), func(d *appsv1.Deployment) {
		d.Spec.Template = withSecrets("nginx:1")
		d.Annotations[corev1.LastAppliedConfigAnnotation] = `{"spec":{"template":"s3cr3t"}}`
		d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	})
	rs := withRS(testRS("web-abc", rsUID, dUID, 3), func(rs *appsv1.ReplicaSet) {
		rs.Spec.Template = withSecrets("nginx:1")
		rs.Annotations[corev1.LastAppliedConfigAnnotation] = "{}"
	})
	orig := k8s.Snapshot{Deployment: d, ReplicaSets: []*appsv1.ReplicaSet{rs}, Pods: []k8s.PodCount{{ReplicaSetUID: rsUID, Running: 1}}}
	before := withDeployment(d, func(*appsv1.Deployment) {})
	beforeRS := withRS(rs, func(*appsv1.ReplicaSet) {})

	got := (&Activities{}).redactSnapshot(orig)

	tests := []struct {
		name string
		give any
		want any
	}{
		{name: "TemplateHash is the whole template's", give: got.TemplateHash, want: k8s.PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)},
		{name: "last-applied-configuration dropped", give: got.Deployment.Annotations[corev1.LastAppliedConfigAnnotation], want: ""},
		{name: "other annotations kept", give: got.Deployment.Annotations[k8s.RevisionAnnotation], want: "1"},
		{name: "managedFields dropped", give: len(got.Deployment.ManagedFields), want: 0},
		{name: "replicaset last-applied-configuration dropped", give: got.ReplicaSets[0].Annotations[corev1.LastAppliedConfigAnnotation], want: ""},
		{name: "pod counts kept", give: got.Pods, want: orig.Pods},
		{name: "template labels kept", give: got.Deployment.Spec.Template.Labels, want: d.Spec.Template.Labels},
		{name: "the input is not changed", give: reflect.DeepEqual(d, before) && reflect.DeepEqual(rs, beforeRS), want: true},
		// Decide compares templates: equal whole, equal redacted.
		{name: "equal templates stay equal", give: reflect.DeepEqual(got.Deployment.Spec.Template.Spec, got.ReplicaSets[0].Spec.Template.Spec), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !reflect.DeepEqual(tt.give, tt.want) {
				t.Errorf("got %v, want %v", tt.give, tt.want)
			}
		})
	}
	for _, spec := range []corev1.PodSpec{got.Deployment.Spec.Template.Spec, got.ReplicaSets[0].Spec.Template.Spec} {
		if s := spec.String(); strings.Contains(s, "s3cr3t") || strings.Contains(s, "nginx:1") {
			t.Errorf("recorded pod spec = %s, want a placeholder", s)
		}
		if len(spec.Containers) != 1 || !strings.HasPrefix(spec.Containers[0].Image, redactedImagePrefix) {
			t.Errorf("recorded pod spec = %+v, want one container with image %s<digest>", spec, redactedImagePrefix)
		}
	}
	// Another template gets another placeholder; redacting twice changes nothing.
	other := withSecrets("nginx:2")
	specDigester{}.redactTemplate(&other)
	if reflect.DeepEqual(other.Spec, got.Deployment.Spec.Template.Spec) {
		t.Errorf("templates of nginx:1 and nginx:2 redact alike: %+v", other.Spec)
	}
	twice := got.Deployment.Spec.Template
	specDigester{}.redactTemplate(&twice)
	if !reflect.DeepEqual(twice, got.Deployment.Spec.Template) {
		t.Errorf("redacting twice = %+v, want %+v", twice, got.Deployment.Spec.Template)
	}
}

// Observe records the redacted snapshot, from the cache as live.
func TestObserveRedacts(t *testing.T) {
	d := withDeployment(testDeployment(), func(d *appsv1.Deployment) { d.Spec.Template = withSecrets("nginx:1") })
	for _, live := range []bool{false, true} {
		f := newFixture(t, d, testRS("web-abc", rsUID, dUID, 3))
		f.a.Cache = startCache(t, f, testNS)
		got, err := f.a.Observe(context.Background(), ObserveInput{Namespace: testNS, Name: "web", Live: live})
		checkErr(t, err, "")
		if _, ok := redactedPlaceholder(&got.Snapshot.Deployment.Spec.Template); !ok || got.Snapshot.TemplateHash == "" {
			t.Errorf("live %t: template %+v, hash %q, want a placeholder and the whole template's hash", live, got.Snapshot.Deployment.Spec.Template.Spec, got.Snapshot.TemplateHash)
		}
		if cached, _ := f.a.Cache.Deployment(testNS, "web"); cached.Spec.Template.Spec.Containers[0].Env == nil {
			t.Errorf("live %t: the cache's Deployment was redacted in place", live)
		}
	}
}

// The writes put the real template back, from the object the decision was made on.
func TestWritesRestoreRedactedTemplates(t *testing.T) {
	ctx := context.Background()
	d := withDeployment(testDeployment(), func(d *appsv1.Deployment) { d.Spec.Template = withSecrets("nginx:2") })
	stored := withRS(testRS("web-abc", rsUID, dUID, 1), func(rs *appsv1.ReplicaSet) { rs.Spec.Template = withSecrets("nginx:1") })
	redactedRS := func(rs *appsv1.ReplicaSet, replicas int32) *appsv1.ReplicaSet {
		return withRS(rs, func(rs *appsv1.ReplicaSet) {
			rs.Spec.Replicas = ptr(replicas)
			specDigester{}.redactTemplate(&rs.Spec.Template)
		})
	}
	newRS := withRS(testRS("web-new", "", "", 1), func(rs *appsv1.ReplicaSet) {
		rs.OwnerReferences = []metav1.OwnerReference{controllerRef(dUID)}
		rs.Spec.Template = withSecrets("nginx:2")
		specDigester{}.redactTemplate(&rs.Spec.Template)
	})

	tests := []struct {
		name     string
		giveObjs []*appsv1.ReplicaSet
		giveD    *appsv1.Deployment // the stored Deployment
		give     func(a *Activities) error
		giveName string // the ReplicaSet to check
		want     string // its stored image; "" when it must be absent
		wantErr  string
	}{
		{
			name:     "scale: the ReplicaSet's own template",
			giveObjs: []*appsv1.ReplicaSet{stored},
			giveD:    d,
			give: func(a *Activities) error {
				_, err := a.ScaleUpReplicaSet(ctx, WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: redactedRS(stored, 3), FromReplicas: *stored.Spec.Replicas})
				return err
			},
			giveName: "web-abc",
			want:     "nginx:1",
		},
		{
			name:     "scale: a template changed since the decision is stale",
			giveObjs: []*appsv1.ReplicaSet{withRS(stored, func(rs *appsv1.ReplicaSet) { rs.Spec.Template = withSecrets("nginx:9"); rs.Generation++ })},
			giveD:    d,
			give: func(a *Activities) error {
				_, err := a.ScaleUpReplicaSet(ctx, WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: redactedRS(stored, 3), FromReplicas: *stored.Spec.Replicas})
				return err
			},
			giveName: "web-abc",
			want:     "nginx:9",
			wantErr:  ErrStale,
		},
		{
			name:     "scale: a ReplicaSet replaced since the decision is stale",
			giveObjs: []*appsv1.ReplicaSet{withRS(stored, func(rs *appsv1.ReplicaSet) { rs.UID = "rs-uid-2" })},
			giveD:    d,
			give: func(a *Activities) error {
				_, err := a.ScaleUpReplicaSet(ctx, WriteReplicaSetInput{Deployment: testRef(), ReplicaSet: redactedRS(stored, 3), FromReplicas: *stored.Spec.Replicas})
				return err
			},
			giveName: "web-abc",
			want:     "nginx:1",
			wantErr:  ErrStale,
		},
		{
			name:  "create: the Deployment's template",
			giveD: d,
			give: func(a *Activities) error {
				_, err := a.CreateReplicaSet(ctx, CreateInput{Deployment: testRef(), ReplicaSet: newRS})
				return err
			},
			giveName: "web-new",
			want:     "nginx:2",
		},
		{
			name:  "create: a Deployment template changed since the decision is stale",
			giveD: withDeployment(d, func(d *appsv1.Deployment) { d.Spec.Template = withSecrets("nginx:3") }),
			give: func(a *Activities) error {
				_, err := a.CreateReplicaSet(ctx, CreateInput{Deployment: testRef(), ReplicaSet: newRS})
				return err
			},
			giveName: "web-new",
			wantErr:  ErrStale,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.giveD)
			for _, rs := range tt.giveObjs {
				if err := f.client.Tracker().Add(rs); err != nil {
					t.Fatal(err)
				}
			}
			checkErr(t, tt.give(f.a), tt.wantErr)
			rs := f.rs(t, tt.giveName)
			if tt.want == "" {
				if rs != nil {
					t.Errorf("replicaset %s = %+v, want none", tt.giveName, rs.Spec.Template.Spec)
				}
				return
			}
			if rs == nil {
				t.Fatalf("replicaset %s absent, want one running %s", tt.giveName, tt.want)
			}
			c := rs.Spec.Template.Spec.Containers[0]
			if c.Image != tt.want || len(c.Env) != 1 || c.Env[0].Value != "s3cr3t" {
				t.Errorf("stored container = %+v, want image %s with its env", c, tt.want)
			}
		})
	}
}

// With a codec key, placeholders are HMACs under it: not the spec's SHA-256, which anyone
// reading the history could check guesses against.
func TestKeyedPlaceholders(t *testing.T) {
	k1, k2 := []byte("digest-key-one-32-bytes-long-xx1"), []byte("digest-key-two-32-bytes-long-xx2")
	spec := withSecrets("nginx:1").Spec
	other := withSecrets("nginx:2").Spec
	plain := specDigester{}.placeholder(&spec)
	keyed := specDigester{key: k1}.placeholder(&spec)

	if !strings.HasPrefix(plain, redactedImagePrefix) {
		t.Errorf("unkeyed placeholder = %s, want prefix %s", plain, redactedImagePrefix)
	}
	if !strings.HasPrefix(keyed, keyedImagePrefix) || strings.Contains(keyed, strings.TrimPrefix(plain, redactedImagePrefix)) {
		t.Errorf("keyed placeholder = %s, want prefix %s and not the SHA-256 %s", keyed, keyedImagePrefix, plain)
	}
	if again := (specDigester{key: k1}).placeholder(spec.DeepCopy()); again != keyed {
		t.Errorf("keyed placeholder of an equal spec = %s, want %s", again, keyed)
	}
	if k2p := (specDigester{key: k2}).placeholder(&spec); k2p == keyed {
		t.Errorf("placeholders under two keys are equal: %s", k2p)
	}

	tests := []struct {
		name string
		key  []byte // the worker's
		give string // the recorded placeholder
		spec corev1.PodSpec
		want bool
	}{
		{name: "unkeyed, no key", give: plain, spec: spec, want: true},
		{name: "keyed, its key", key: k1, give: keyed, spec: spec, want: true},
		{name: "keyed, another spec", key: k1, give: keyed, spec: other, want: false},
		{name: "unkeyed, recorded before the key was configured", key: k1, give: plain, spec: spec, want: true},
		{name: "keyed, after a rotation: stale", key: k2, give: keyed, spec: spec, want: false},
		{name: "keyed, the key removed: stale", give: keyed, spec: spec, want: false},
		{name: "not a placeholder", key: k1, give: "nginx:1", spec: spec, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (specDigester{key: tt.key}).standsFor(tt.give, &tt.spec); got != tt.want {
				t.Errorf("standsFor(%s) = %t, want %t", tt.give, got, tt.want)
			}
		})
	}
}

// A worker with a codec key records keyed placeholders, and its writes restore them; a worker
// restarted with another key finds such a decision stale, and the workflow observes again.
func TestKeyedRedactionRoundTrip(t *testing.T) {
	ctx := context.Background()
	key := []byte("digest-key-one-32-bytes-long-xx1")
	d := withDeployment(testDeployment(), func(d *appsv1.Deployment) { d.Spec.Template = withSecrets("nginx:2") })
	stored := withRS(testRS("web-abc", rsUID, dUID, 1), func(rs *appsv1.ReplicaSet) { rs.Spec.Template = withSecrets("nginx:1") })
	f := newFixture(t, d, stored)
	f.a.SpecDigestKey = key

	got, err := f.a.Observe(ctx, ObserveInput{Namespace: testNS, Name: "web", Live: true})
	checkErr(t, err, "")
	recorded := got.Snapshot.Deployment.Spec.Template
	for _, tmpl := range []corev1.PodTemplateSpec{recorded, got.Snapshot.ReplicaSets[0].Spec.Template} {
		if image, ok := redactedPlaceholder(&tmpl); !ok || !strings.HasPrefix(image, keyedImagePrefix) {
			t.Fatalf("recorded template %+v, want a keyed placeholder", tmpl.Spec)
		}
	}
	newRS := func(name string) *appsv1.ReplicaSet {
		return withRS(testRS(name, "", "", 1), func(rs *appsv1.ReplicaSet) {
			rs.OwnerReferences = []metav1.OwnerReference{controllerRef(dUID)}
			rs.Spec.Template = *recorded.DeepCopy()
		})
	}

	tests := []struct {
		name    string
		key     []byte
		give    string // the ReplicaSet created
		want    string // its stored image; "" when it must be absent
		wantErr string
	}{
		{name: "the key it was recorded with", key: key, give: "web-new", want: "nginx:2"},
		{name: "another key", key: []byte("digest-key-two-32-bytes-long-xx2"), give: "web-other", wantErr: ErrStale},
		{name: "no key", give: "web-none", wantErr: ErrStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.a.SpecDigestKey = tt.key
			_, err := f.a.CreateReplicaSet(ctx, CreateInput{Deployment: testRef(), ReplicaSet: newRS(tt.give)})
			checkErr(t, err, tt.wantErr)
			rs := f.rs(t, tt.give)
			if tt.want == "" {
				if rs != nil {
					t.Errorf("replicaset %s = %+v, want none", tt.give, rs.Spec.Template.Spec)
				}
				return
			}
			if rs == nil {
				t.Fatalf("replicaset %s absent, want one running %s", tt.give, tt.want)
			}
			if c := rs.Spec.Template.Spec.Containers[0]; c.Image != tt.want || len(c.Env) != 1 || c.Env[0].Value != "s3cr3t" {
				t.Errorf("stored container = %+v, want image %s with its env", c, tt.want)
			}
		})
	}
}
