package activities

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"

	"github.com/temporal-rollout/rollout/k8s"
	"github.com/temporal-rollout/rollout/kube"
)

// bumpGeneration makes the fake clientset raise a Deployment's generation on a spec change, as
// the apiserver does.
func bumpGeneration(f *fixture) {
	f.client.PrependReactor("update", "deployments", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "" {
			return false, nil, nil
		}
		d := action.(k8stesting.UpdateAction).GetObject().(*appsv1.Deployment)
		old, err := f.client.Tracker().Get(dGVR, d.Namespace, d.Name)
		if err != nil {
			return false, nil, nil
		}
		o := old.(*appsv1.Deployment)
		d.Generation = o.Generation
		if !equality.Semantic.DeepEqual(o.Spec, d.Spec) {
			d.Generation++
		}
		return false, nil, nil
	})
}

// releaseRS is a ReplicaSet of the test Deployment for template tpl at revision rev.
func releaseRS(d *appsv1.Deployment, tpl corev1.PodTemplateSpec, rev string, replicas int32) *appsv1.ReplicaSet {
	hash := k8s.PodTemplateHash(&tpl, nil)
	t := *tpl.DeepCopy()
	t.Labels = map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: testNS, Name: "web-" + hash, UID: types.UID("rs-" + rev),
			Labels:          t.Labels,
			Annotations:     map[string]string{k8s.RevisionAnnotation: rev},
			OwnerReferences: []metav1.OwnerReference{controllerRef(d.UID)},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr(replicas), Template: t},
	}
}

func TestReadTargets(t *testing.T) {
	web := testDeployment()
	web.Labels = map[string]string{"tier": "front"}
	api := withDeployment(testDeployment(), func(d *appsv1.Deployment) {
		d.Name, d.UID, d.Generation, d.Labels = "api", "api-uid", 5, map[string]string{"tier": "back"}
		d.Annotations[k8s.RevisionAnnotation] = "4"
		d.Spec.Paused = true
		d.Spec.Template = podTemplate("api:7", "")
	})
	db := withDeployment(testDeployment(), func(d *appsv1.Deployment) {
		d.Name, d.UID, d.Labels, d.Annotations = "db", "db-uid", map[string]string{"tier": "back"}, nil
	})
	target := func(d *appsv1.Deployment, rev int64) Target {
		return Target{Name: d.Name, UID: d.UID, Generation: d.Generation, ObservedGeneration: d.Status.ObservedGeneration,
			Revision: rev, TemplateHash: k8s.PodTemplateHash(&d.Spec.Template, nil), Paused: d.Spec.Paused}
	}
	tests := []struct {
		name    string
		give    ReadTargetsInput
		want    ReadTargetsResult
		wantErr string
	}{
		{name: "by name, one missing", give: ReadTargetsInput{Namespace: testNS, Names: []string{"web", "gone", "api"}},
			want: ReadTargetsResult{Targets: []Target{target(api, 4), target(web, 1)}, Missing: []string{"gone"}}},
		{name: "by selector", give: ReadTargetsInput{Namespace: testNS, Selector: "tier=back"},
			want: ReadTargetsResult{Targets: []Target{target(api, 4), target(db, 0)}}},
		{name: "names and selector: the union", give: ReadTargetsInput{Namespace: testNS, Names: []string{"web", "api"}, Selector: "tier=back"},
			want: ReadTargetsResult{Targets: []Target{target(api, 4), target(db, 0), target(web, 1)}}},
		{name: "selector matching nothing", give: ReadTargetsInput{Namespace: testNS, Selector: "tier=none"}, want: ReadTargetsResult{}},
		{name: "neither names nor selector", give: ReadTargetsInput{Namespace: testNS}, wantErr: ErrInvalid},
		{name: "no namespace", give: ReadTargetsInput{Names: []string{"web"}}, wantErr: ErrInvalid},
		{name: "bad selector", give: ReadTargetsInput{Namespace: testNS, Selector: "tier in (("}, wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, web, api, db)
			got, err := f.a.ReadTargets(context.Background(), tt.give)
			checkErr(t, err, tt.wantErr)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ReadTargets = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestApplyTemplateChange(t *testing.T) {
	old := testDeployment()
	oldTpl := old.Spec.Template
	oldHash := k8s.PodTemplateHash(&oldTpl, nil)
	newTpl := podTemplate("nginx:2", "")
	tests := []struct {
		name string
		give ApplyInput
		// prepare changes the fixture before the call.
		prepare     func(*fixture)
		want        ApplyResult
		wantImages  string // the Deployment's containers after, "init=... app=..."
		wantAnno    map[string]string
		wantUpdates int
		wantErr     string
		check       func(t *testing.T, d *appsv1.Deployment)
	}{
		{
			name:       "image and annotation",
			give:       ApplyInput{Namespace: testNS, Name: "web", Images: map[string]string{"app": "nginx:2"}, Annotations: map[string]string{"example.com/release": "r1"}, ExpectUID: dUID},
			want:       ApplyResult{UID: dUID, Generation: 3, TemplateHash: k8s.PodTemplateHash(&newTpl, nil), Changed: true, Revision: 1, Template: oldTpl, BeforeHash: oldHash, HasChange: true},
			wantImages: "init=busybox:1 app=nginx:2", wantAnno: map[string]string{k8s.RevisionAnnotation: "1", "example.com/release": "r1"}, wantUpdates: 1,
		},
		{
			name:       "init container image",
			give:       ApplyInput{Namespace: testNS, Name: "web", Images: map[string]string{"init": "busybox:2"}},
			want:       ApplyResult{UID: dUID, Generation: 3, TemplateHash: k8s.PodTemplateHash(ptr(withImages(oldTpl, "busybox:2", "nginx:1")), nil), Changed: true, Revision: 1, Template: oldTpl, BeforeHash: oldHash, HasChange: true},
			wantImages: "init=busybox:2 app=nginx:1", wantAnno: map[string]string{k8s.RevisionAnnotation: "1"}, wantUpdates: 1,
		},
		{
			name: "strategic-merge patch, then images",
			give: ApplyInput{Namespace: testNS, Name: "web", Images: map[string]string{"app": "nginx:2"},
				Patch: json.RawMessage(`{"metadata":{"labels":{"release":"r1"}},"spec":{"containers":[{"name":"app","env":[{"name":"MODE","value":"new"}]}]}}`)},
			wantImages: "init=busybox:1 app=nginx:2", wantAnno: map[string]string{k8s.RevisionAnnotation: "1"}, wantUpdates: 1,
			check: func(t *testing.T, d *appsv1.Deployment) {
				c := d.Spec.Template.Spec.Containers[0]
				if len(c.Env) != 1 || c.Env[0].Name != "MODE" || c.Env[0].Value != "new" || d.Spec.Template.Labels["release"] != "r1" || d.Spec.Template.Labels["app"] != "web" {
					t.Errorf("patched template: env %v, labels %v; want MODE=new, app=web and release=r1", c.Env, d.Spec.Template.Labels)
				}
			},
		},
		{
			// The first attempt wrote, its answer was lost, and the controller made the new
			// ReplicaSet: the retry writes nothing and names the old one's template.
			name: "retry after success",
			give: ApplyInput{Namespace: testNS, Name: "web", Images: map[string]string{"app": "nginx:2"}, Annotations: map[string]string{"example.com/release": "r1"}},
			prepare: func(f *fixture) {
				d := f.deployment(t)
				d.Spec.Template, d.Generation = newTpl, 3
				d.Annotations = map[string]string{k8s.RevisionAnnotation: "2", "example.com/release": "r1"}
				if err := f.client.Tracker().Update(dGVR, d, testNS); err != nil {
					t.Fatal(err)
				}
				for _, rs := range []*appsv1.ReplicaSet{releaseRS(d, oldTpl, "1", 3), releaseRS(d, newTpl, "2", 1)} {
					if err := f.client.Tracker().Add(rs); err != nil {
						t.Fatal(err)
					}
				}
			},
			want:       ApplyResult{UID: dUID, Generation: 3, TemplateHash: k8s.PodTemplateHash(&newTpl, nil), Revision: 1, Template: oldTpl, BeforeHash: oldHash, HasChange: true},
			wantImages: "init=busybox:1 app=nginx:2", wantAnno: map[string]string{k8s.RevisionAnnotation: "2", "example.com/release": "r1"},
		},
		{
			// The write landed, its answer was lost: reading back finds the change and
			// names the old ReplicaSet's template, writing nothing.
			name: "read back: the change landed",
			give: ApplyInput{Namespace: testNS, Name: "web", Images: map[string]string{"app": "nginx:2"}, Annotations: map[string]string{"example.com/release": "r2"}, ExpectUID: dUID, ReadBack: true},
			prepare: func(f *fixture) {
				d := f.deployment(t)
				d.Spec.Template, d.Generation = newTpl, 3
				d.Annotations = map[string]string{k8s.RevisionAnnotation: "2", "example.com/release": "r1"}
				if err := f.client.Tracker().Update(dGVR, d, testNS); err != nil {
					t.Fatal(err)
				}
				for _, rs := range []*appsv1.ReplicaSet{releaseRS(d, oldTpl, "1", 3), releaseRS(d, newTpl, "2", 1)} {
					if err := f.client.Tracker().Add(rs); err != nil {
						t.Fatal(err)
					}
				}
			},
			want:       ApplyResult{UID: dUID, Generation: 3, TemplateHash: k8s.PodTemplateHash(&newTpl, nil), Revision: 1, Template: oldTpl, BeforeHash: oldHash, HasChange: true},
			wantImages: "init=busybox:1 app=nginx:2", wantAnno: map[string]string{k8s.RevisionAnnotation: "2", "example.com/release": "r1"},
		},
		{
			name:       "read back: the change did not land",
			give:       ApplyInput{Namespace: testNS, Name: "web", Images: map[string]string{"app": "nginx:2"}, Annotations: map[string]string{"example.com/release": "r2"}, ReadBack: true},
			want:       ApplyResult{UID: dUID, Generation: 2, TemplateHash: k8s.PodTemplateHash(&oldTpl, nil), Revision: 1, Template: oldTpl, BeforeHash: oldHash},
			wantImages: "init=busybox:1 app=nginx:1", wantAnno: map[string]string{k8s.RevisionAnnotation: "1"},
		},
		{name: "read back: another UID", give: ApplyInput{Namespace: testNS, Name: "web", Images: map[string]string{"app": "nginx:2"}, ExpectUID: "other", ReadBack: true}, wantErr: ErrStale,
			wantImages: "init=busybox:1 app=nginx:1", wantAnno: map[string]string{k8s.RevisionAnnotation: "1"}},
		{
			name:       "annotations only; an empty value removes one",
			give:       ApplyInput{Namespace: testNS, Name: "web", Annotations: map[string]string{k8s.RevisionAnnotation: "", "example.com/release": "r2"}},
			want:       ApplyResult{UID: dUID, Generation: 2, TemplateHash: k8s.PodTemplateHash(&oldTpl, nil), Revision: 1, Template: oldTpl, BeforeHash: oldHash, HasChange: true},
			wantImages: "init=busybox:1 app=nginx:1", wantAnno: map[string]string{"example.com/release": "r2"}, wantUpdates: 1,
		},
		{
			name: "conflict: re-read and write again",
			give: ApplyInput{Namespace: testNS, Name: "web", Images: map[string]string{"app": "nginx:2"}},
			prepare: func(f *fixture) {
				f.failFirst("update", "deployments", 1, conflict(dGR, "web"))
			},
			want:       ApplyResult{UID: dUID, Generation: 3, TemplateHash: k8s.PodTemplateHash(&newTpl, nil), Changed: true, Revision: 1, Template: oldTpl, BeforeHash: oldHash, HasChange: true},
			wantImages: "init=busybox:1 app=nginx:2", wantAnno: map[string]string{k8s.RevisionAnnotation: "1"}, wantUpdates: 2,
		},
		{name: "nothing to change", give: ApplyInput{Namespace: testNS, Name: "web"}, wantErr: ErrInvalid, wantImages: "init=busybox:1 app=nginx:1", wantAnno: map[string]string{k8s.RevisionAnnotation: "1"}},
		{name: "unknown container", give: ApplyInput{Namespace: testNS, Name: "web", Images: map[string]string{"sidecar": "envoy:1"}}, wantErr: ErrInvalid, wantImages: "init=busybox:1 app=nginx:1", wantAnno: map[string]string{k8s.RevisionAnnotation: "1"}},
		{name: "empty image", give: ApplyInput{Namespace: testNS, Name: "web", Images: map[string]string{"app": " "}}, wantErr: ErrInvalid, wantImages: "init=busybox:1 app=nginx:1", wantAnno: map[string]string{k8s.RevisionAnnotation: "1"}},
		{name: "patch not JSON", give: ApplyInput{Namespace: testNS, Name: "web", Patch: json.RawMessage(`{"spec":`)}, wantErr: ErrInvalid, wantImages: "init=busybox:1 app=nginx:1", wantAnno: map[string]string{k8s.RevisionAnnotation: "1"}},
		{name: "patch with an unknown field", give: ApplyInput{Namespace: testNS, Name: "web", Patch: json.RawMessage(`{"spec":{"containerz":[]}}`)}, wantErr: ErrInvalid, wantImages: "init=busybox:1 app=nginx:1", wantAnno: map[string]string{k8s.RevisionAnnotation: "1"}},
		{name: "another UID", give: ApplyInput{Namespace: testNS, Name: "web", Images: map[string]string{"app": "nginx:2"}, ExpectUID: "other"}, wantErr: ErrStale, wantImages: "init=busybox:1 app=nginx:1", wantAnno: map[string]string{k8s.RevisionAnnotation: "1"}},
		{name: "no such Deployment", give: ApplyInput{Namespace: testNS, Name: "nope", Images: map[string]string{"app": "nginx:2"}}, wantErr: ErrNotFound, wantImages: "init=busybox:1 app=nginx:1", wantAnno: map[string]string{k8s.RevisionAnnotation: "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testDeployment())
			bumpGeneration(f)
			if tt.prepare != nil {
				tt.prepare(f)
			}
			got, err := f.a.ApplyTemplateChange(context.Background(), tt.give)
			checkErr(t, err, tt.wantErr)
			if tt.check == nil && !equality.Semantic.DeepEqual(got, tt.want) {
				t.Errorf("ApplyTemplateChange = %+v, want %+v", got, tt.want)
			}
			d := f.deployment(t)
			if images := imagesOf(d.Spec.Template); images != tt.wantImages {
				t.Errorf("images after = %s, want %s", images, tt.wantImages)
			}
			if !reflect.DeepEqual(d.Annotations, tt.wantAnno) {
				t.Errorf("annotations after = %v, want %v", d.Annotations, tt.wantAnno)
			}
			if n := len(f.actionsOf("update", "deployments")); n != tt.wantUpdates {
				t.Errorf("%d updates, want %d", n, tt.wantUpdates)
			}
			if tt.check != nil {
				tt.check(t, d)
				if got.TemplateHash != k8s.PodTemplateHash(&d.Spec.Template, nil) || !got.Changed {
					t.Errorf("ApplyTemplateChange = %+v, want the written template's hash and Changed", got)
				}
			}
			if err == nil && got.Generation != d.Generation {
				t.Errorf("result generation %d, Deployment's %d", got.Generation, d.Generation)
			}
		})
	}
}

// TestApplyTwiceWritesOnce: the same change applied twice (a retry) writes once, and both
// answers name the same template to restore (the second finds it in the revision 1
// ReplicaSet).
func TestApplyTwiceWritesOnce(t *testing.T) {
	d := testDeployment()
	f := newFixture(t, d, releaseRS(d, d.Spec.Template, "1", 3))
	bumpGeneration(f)
	in := ApplyInput{Namespace: testNS, Name: "web", Images: map[string]string{"app": "nginx:2"}}
	first, err := f.a.ApplyTemplateChange(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	second, err := f.a.ApplyTemplateChange(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.actionsOf("update", "deployments")); n != 1 {
		t.Errorf("%d updates, want 1", n)
	}
	if !first.Changed || second.Changed || first.Generation != second.Generation || first.TemplateHash != second.TemplateHash ||
		!equality.Semantic.DeepEqual(first.Template, second.Template) || first.Revision != second.Revision {
		t.Errorf("second = %+v, want first %+v but Changed false", second, first)
	}
}

func withImages(tpl corev1.PodTemplateSpec, initImage, image string) corev1.PodTemplateSpec {
	out := *tpl.DeepCopy()
	out.Spec.InitContainers[0].Image, out.Spec.Containers[0].Image = initImage, image
	return out
}

func imagesOf(tpl corev1.PodTemplateSpec) string {
	var parts []string
	for _, c := range append(append([]corev1.Container{}, tpl.Spec.InitContainers...), tpl.Spec.Containers...) {
		parts = append(parts, c.Name+"="+c.Image)
	}
	return strings.Join(parts, " ")
}

func TestRestoreTemplate(t *testing.T) {
	oldTpl := podTemplate("nginx:1", "")
	changed := withDeployment(testDeployment(), func(d *appsv1.Deployment) {
		d.Generation, d.Spec.Template = 3, podTemplate("nginx:2", "")
		d.Annotations["example.com/release"] = "r1"
	})
	tests := []struct {
		name        string
		give        RestoreInput
		want        RestoreResult
		wantImages  string
		wantAnno    map[string]string
		wantUpdates int
		wantErr     string
	}{
		{
			name:       "restores the template and drops the release's annotation",
			give:       RestoreInput{Namespace: testNS, Name: "web", Template: oldTpl, Annotations: map[string]string{"example.com/release": ""}, ExpectUID: dUID},
			want:       RestoreResult{Generation: 4, TemplateHash: k8s.PodTemplateHash(&oldTpl, nil), Changed: true},
			wantImages: "init=busybox:1 app=nginx:1", wantAnno: map[string]string{k8s.RevisionAnnotation: "1"}, wantUpdates: 1,
		},
		{
			name:       "already restored: no write",
			give:       RestoreInput{Namespace: testNS, Name: "web", Template: podTemplate("nginx:2", ""), Annotations: map[string]string{"example.com/release": "r1"}},
			want:       RestoreResult{Generation: 3, TemplateHash: k8s.PodTemplateHash(ptr(podTemplate("nginx:2", "")), nil)},
			wantImages: "init=busybox:1 app=nginx:2", wantAnno: map[string]string{k8s.RevisionAnnotation: "1", "example.com/release": "r1"},
		},
		{
			name:       "still the release's template: restored",
			give:       RestoreInput{Namespace: testNS, Name: "web", Template: oldTpl, ExpectTemplateHash: k8s.PodTemplateHash(ptr(podTemplate("nginx:2", "")), nil)},
			want:       RestoreResult{Generation: 4, TemplateHash: k8s.PodTemplateHash(&oldTpl, nil), Changed: true},
			wantImages: "init=busybox:1 app=nginx:1", wantAnno: map[string]string{k8s.RevisionAnnotation: "1", "example.com/release": "r1"}, wantUpdates: 1,
		},
		{
			name:       "already restored, retried: no write",
			give:       RestoreInput{Namespace: testNS, Name: "web", Template: podTemplate("nginx:2", ""), ExpectTemplateHash: "written"},
			want:       RestoreResult{Generation: 3, TemplateHash: k8s.PodTemplateHash(ptr(podTemplate("nginx:2", "")), nil)},
			wantImages: "init=busybox:1 app=nginx:2", wantAnno: map[string]string{k8s.RevisionAnnotation: "1", "example.com/release": "r1"},
		},
		{
			// Its template changed since the release wrote nginx:1.5 (a hotfix): left as it
			// is, and what changed is said from the release's ReplicaSet.
			name:       "changed since the release: skipped",
			give:       RestoreInput{Namespace: testNS, Name: "web", Template: oldTpl, Annotations: map[string]string{"example.com/release": ""}, ExpectTemplateHash: k8s.PodTemplateHash(ptr(podTemplate("nginx:1.5", "")), nil)},
			want:       RestoreResult{Generation: 3, TemplateHash: k8s.PodTemplateHash(&oldTpl, nil), Skipped: true, Drift: "container app: image nginx:1.5 → nginx:2"},
			wantImages: "init=busybox:1 app=nginx:2", wantAnno: map[string]string{k8s.RevisionAnnotation: "1", "example.com/release": "r1"},
		},
		{
			name:       "changed since the release, its ReplicaSet gone: the hashes",
			give:       RestoreInput{Namespace: testNS, Name: "web", Template: oldTpl, ExpectTemplateHash: "gone"},
			want:       RestoreResult{Generation: 3, TemplateHash: k8s.PodTemplateHash(&oldTpl, nil), Skipped: true, Drift: "pod-template-hash " + k8s.PodTemplateHash(ptr(podTemplate("nginx:2", "")), nil) + ", the release wrote gone"},
			wantImages: "init=busybox:1 app=nginx:2", wantAnno: map[string]string{k8s.RevisionAnnotation: "1", "example.com/release": "r1"},
		},
		{
			// The release's state carries no template: the ReplicaSet of revision 1 has it.
			name:       "from the old ReplicaSet",
			give:       RestoreInput{Namespace: testNS, Name: "web", FromHash: k8s.PodTemplateHash(&oldTpl, nil), Annotations: map[string]string{"example.com/release": ""}, ExpectUID: dUID},
			want:       RestoreResult{Generation: 4, TemplateHash: k8s.PodTemplateHash(&oldTpl, nil), Changed: true},
			wantImages: "init=busybox:1 app=nginx:1", wantAnno: map[string]string{k8s.RevisionAnnotation: "1"}, wantUpdates: 1,
		},
		{name: "the old ReplicaSet is gone", give: RestoreInput{Namespace: testNS, Name: "web", FromHash: "5d8f7b9c4"}, wantErr: ErrNotFound,
			wantImages: "init=busybox:1 app=nginx:2", wantAnno: map[string]string{k8s.RevisionAnnotation: "1", "example.com/release": "r1"}},
		{
			// From the old ReplicaSet, the template still the release's: restored.
			name:       "from the old ReplicaSet, still the release's template: restored",
			give:       RestoreInput{Namespace: testNS, Name: "web", FromHash: k8s.PodTemplateHash(&oldTpl, nil), ExpectTemplateHash: k8s.PodTemplateHash(ptr(podTemplate("nginx:2", "")), nil)},
			want:       RestoreResult{Generation: 4, TemplateHash: k8s.PodTemplateHash(&oldTpl, nil), Changed: true},
			wantImages: "init=busybox:1 app=nginx:1", wantAnno: map[string]string{k8s.RevisionAnnotation: "1", "example.com/release": "r1"}, wantUpdates: 1,
		},
		{
			name:       "from the old ReplicaSet, already restored, retried: no write",
			give:       RestoreInput{Namespace: testNS, Name: "web", FromHash: k8s.PodTemplateHash(ptr(podTemplate("nginx:2", "")), nil), ExpectTemplateHash: "written"},
			want:       RestoreResult{Generation: 3, TemplateHash: k8s.PodTemplateHash(ptr(podTemplate("nginx:2", "")), nil)},
			wantImages: "init=busybox:1 app=nginx:2", wantAnno: map[string]string{k8s.RevisionAnnotation: "1", "example.com/release": "r1"},
		},
		{
			// The state handed over carries no template, and the Deployment changed since the
			// release wrote nginx:1.5: skipped, the drift from the release's ReplicaSet.
			name:       "from the old ReplicaSet, changed since the release: skipped",
			give:       RestoreInput{Namespace: testNS, Name: "web", FromHash: k8s.PodTemplateHash(&oldTpl, nil), ExpectTemplateHash: k8s.PodTemplateHash(ptr(podTemplate("nginx:1.5", "")), nil)},
			want:       RestoreResult{Generation: 3, TemplateHash: k8s.PodTemplateHash(&oldTpl, nil), Skipped: true, Drift: "container app: image nginx:1.5 → nginx:2"},
			wantImages: "init=busybox:1 app=nginx:2", wantAnno: map[string]string{k8s.RevisionAnnotation: "1", "example.com/release": "r1"},
		},
		{
			// Changed since, and the ReplicaSet to restore from gone too: skipped all the same.
			name:       "changed since the release, the old ReplicaSet gone: skipped",
			give:       RestoreInput{Namespace: testNS, Name: "web", FromHash: "5d8f7b9c4", ExpectTemplateHash: k8s.PodTemplateHash(ptr(podTemplate("nginx:1.5", "")), nil)},
			want:       RestoreResult{Generation: 3, TemplateHash: "5d8f7b9c4", Skipped: true, Drift: "container app: image nginx:1.5 → nginx:2"},
			wantImages: "init=busybox:1 app=nginx:2", wantAnno: map[string]string{k8s.RevisionAnnotation: "1", "example.com/release": "r1"},
		},
		{name: "no containers", give: RestoreInput{Namespace: testNS, Name: "web"}, wantErr: ErrInvalid,
			wantImages: "init=busybox:1 app=nginx:2", wantAnno: map[string]string{k8s.RevisionAnnotation: "1", "example.com/release": "r1"}},
		{name: "another UID", give: RestoreInput{Namespace: testNS, Name: "web", Template: oldTpl, ExpectUID: "other"}, wantErr: ErrStale,
			wantImages: "init=busybox:1 app=nginx:2", wantAnno: map[string]string{k8s.RevisionAnnotation: "1", "example.com/release": "r1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The ReplicaSets of the template before the release (revision 1), of the release's
			// (nginx:1.5, 2) and of the current one (a hotfix, nginx:2, 3).
			f := newFixture(t, changed, releaseRS(changed, oldTpl, "1", 0), releaseRS(changed, podTemplate("nginx:1.5", ""), "2", 0), releaseRS(changed, changed.Spec.Template, "3", 3))
			bumpGeneration(f)
			got, err := f.a.RestoreTemplate(context.Background(), tt.give)
			checkErr(t, err, tt.wantErr)
			if got != tt.want {
				t.Errorf("RestoreTemplate = %+v, want %+v", got, tt.want)
			}
			d := f.deployment(t)
			if images := imagesOf(d.Spec.Template); images != tt.wantImages {
				t.Errorf("images after = %s, want %s", images, tt.wantImages)
			}
			if !reflect.DeepEqual(d.Annotations, tt.wantAnno) {
				t.Errorf("annotations after = %v, want %v", d.Annotations, tt.wantAnno)
			}
			if n := len(f.actionsOf("update", "deployments")); n != tt.wantUpdates {
				t.Errorf("%d updates, want %d", n, tt.wantUpdates)
			}
		})
	}
}

// rolledOut is the test Deployment at generation 3 with status st and Progressing progressing.
func rolledOut(st appsv1.DeploymentStatus, progressing *appsv1.DeploymentCondition) *appsv1.Deployment {
	return withDeployment(testDeployment(), func(d *appsv1.Deployment) {
		d.Generation = 3
		d.Status = st
		if progressing != nil {
			d.Status.Conditions = []appsv1.DeploymentCondition{*progressing}
		}
	})
}

func progressingCond(status corev1.ConditionStatus, reason, msg string) *appsv1.DeploymentCondition {
	return &appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: status, Reason: reason, Message: msg}
}

func abortedEvent(at time.Time, uid types.UID) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: testNS, Name: "web.abort." + at.Format("150405")},
		InvolvedObject: corev1.ObjectReference{Kind: "Deployment", Namespace: testNS, Name: "web", UID: uid},
		Reason:         RolloutAbortedReason, Type: corev1.EventTypeWarning,
		Message:       "Rollout of revision 2 aborted: error rate; returning to revision 1",
		LastTimestamp: metav1.NewTime(at), FirstTimestamp: metav1.NewTime(at),
	}
}

func TestAwaitRolloutDone(t *testing.T) {
	done := appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}
	complete := rolledOut(done, progressingCond(corev1.ConditionTrue, k8s.NewRSAvailableReason, "ReplicaSet web-x has successfully progressed."))
	hash := k8s.PodTemplateHash(&complete.Spec.Template, nil)
	heldMsg := "Held before step 2 of 4 (pause 5s): " + k8s.FleetFreezeHeldText + " 2026-12-01T08:00:00Z (black friday)"
	held := rolledOut(appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 3},
		progressingCond(corev1.ConditionUnknown, k8s.CanaryPausedReason, heldMsg))
	tests := []struct {
		name    string
		objs    []runtime.Object
		give    AwaitDoneInput
		want    AwaitDoneResult
		wantErr string
	}{
		{name: "complete", objs: []runtime.Object{complete}, give: AwaitDoneInput{Namespace: testNS, Name: "web", Generation: 3, TemplateHash: hash},
			want: AwaitDoneResult{Complete: true, Generation: 3, ObservedGeneration: 3}},
		{name: "complete at a later generation (a pause and resume since)", objs: []runtime.Object{withDeployment(complete, func(d *appsv1.Deployment) { d.Generation, d.Status.ObservedGeneration = 5, 5 })},
			give: AwaitDoneInput{Namespace: testNS, Name: "web", Generation: 3, TemplateHash: hash},
			want: AwaitDoneResult{Complete: true, Generation: 5, ObservedGeneration: 5}},
		{name: "progress deadline exceeded",
			objs: []runtime.Object{rolledOut(appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 4, UpdatedReplicas: 1, AvailableReplicas: 3},
				progressingCond(corev1.ConditionFalse, k8s.TimedOutReason, `ReplicaSet "web-x" has timed out progressing.`))},
			give: AwaitDoneInput{Namespace: testNS, Name: "web", Generation: 3},
			want: AwaitDoneResult{Failed: true, Reason: `ProgressDeadlineExceeded: ReplicaSet "web-x" has timed out progressing.`, Generation: 3, ObservedGeneration: 3}},
		{name: "aborted by the Deployment's workflow", objs: []runtime.Object{complete, abortedEvent(time.Now(), dUID)},
			give: AwaitDoneInput{Namespace: testNS, Name: "web", Generation: 3},
			want: AwaitDoneResult{Failed: true, Reason: "aborted: Rollout of revision 2 aborted: error rate; returning to revision 1", Generation: 3, ObservedGeneration: 3}},
		{name: "an abort before this wait, or of another Deployment of that name, does not count",
			objs: []runtime.Object{complete, abortedEvent(time.Now().Add(-time.Hour), dUID), withEventName(abortedEvent(time.Now(), "old-uid"), "web.other")},
			give: AwaitDoneInput{Namespace: testNS, Name: "web", Generation: 3},
			want: AwaitDoneResult{Complete: true, Generation: 3, ObservedGeneration: 3}},
		{name: "superseded: another template", objs: []runtime.Object{complete},
			give: AwaitDoneInput{Namespace: testNS, Name: "web", Generation: 3, TemplateHash: "other"},
			want: AwaitDoneResult{Failed: true, Reason: "superseded: the template changed (pod-template-hash " + hash + ", want other) at generation 3", Generation: 3, ObservedGeneration: 3}},
		{name: "held by the fleet freeze", objs: []runtime.Object{held},
			give: AwaitDoneInput{Namespace: testNS, Name: "web", Generation: 3, TemplateHash: hash, ReportHold: true},
			want: AwaitDoneResult{Held: true, HoldMessage: heldMsg, Generation: 3, ObservedGeneration: 3}},
		{name: "the hold ended", objs: []runtime.Object{complete},
			give: AwaitDoneInput{Namespace: testNS, Name: "web", Generation: 3, TemplateHash: hash, ReportHold: true, Held: true},
			want: AwaitDoneResult{Generation: 3, ObservedGeneration: 3}},
		{name: "no such Deployment", give: AwaitDoneInput{Namespace: testNS, Name: "web", Generation: 3}, wantErr: ErrNotFound},
		{name: "no generation", objs: []runtime.Object{complete}, give: AwaitDoneInput{Namespace: testNS, Name: "web"}, wantErr: ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.objs...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := f.a.AwaitRolloutDone(ctx, tt.give)
			checkErr(t, err, tt.wantErr)
			if got != tt.want {
				t.Errorf("AwaitRolloutDone = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func withEventName(e *corev1.Event, name string) *corev1.Event {
	e.Name = name
	return e
}

// TestAwaitRolloutDoneWaits: it waits through a rollout under way (observedGeneration behind,
// then replicas updating, then a paused Deployment) until it completes, and returns on
// cancellation.
func TestAwaitRolloutDoneWaits(t *testing.T) {
	f := newFixture(t, rolledOut(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 0, AvailableReplicas: 3}, nil))
	in := AwaitDoneInput{Namespace: testNS, Name: "web", Generation: 3}
	steps := []appsv1.DeploymentStatus{
		{ObservedGeneration: 3, Replicas: 4, UpdatedReplicas: 1, AvailableReplicas: 3},
		{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3},
	}
	type answer struct {
		res AwaitDoneResult
		err error
	}
	out := make(chan answer, 1)
	go func() {
		res, err := f.a.AwaitRolloutDone(context.Background(), in)
		out <- answer{res, err}
	}()
	for _, st := range steps {
		time.Sleep(1500 * time.Millisecond)
		select {
		case a := <-out:
			t.Fatalf("AwaitRolloutDone returned %+v, %v before the rollout completed", a.res, a.err)
		default:
		}
		d := f.deployment(t)
		d.Status = st
		if err := f.client.Tracker().Update(dGVR, d, testNS); err != nil {
			t.Fatal(err)
		}
	}
	// Every replica updated and available, but Progressing is not NewReplicaSetAvailable yet.
	time.Sleep(1500 * time.Millisecond)
	select {
	case a := <-out:
		t.Fatalf("AwaitRolloutDone returned %+v, %v without the Progressing condition", a.res, a.err)
	default:
	}
	d := f.deployment(t)
	d.Status.Conditions = []appsv1.DeploymentCondition{*progressingCond(corev1.ConditionTrue, k8s.NewRSAvailableReason, "done")}
	if err := f.client.Tracker().Update(dGVR, d, testNS); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-out:
		if a.err != nil || a.res != (AwaitDoneResult{Complete: true, Generation: 3, ObservedGeneration: 3}) {
			t.Errorf("AwaitRolloutDone = %+v, %v, want complete", a.res, a.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("AwaitRolloutDone did not return within 5s of the rollout completing")
	}

	// Cancellation ends a wait.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		res, err := f.a.AwaitRolloutDone(ctx, AwaitDoneInput{Namespace: testNS, Name: "web", Generation: 9})
		out <- answer{res, err}
	}()
	time.Sleep(500 * time.Millisecond)
	cancel()
	select {
	case a := <-out:
		if a.err != context.Canceled {
			t.Errorf("after cancel: %+v, %v, want context.Canceled", a.res, a.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("AwaitRolloutDone did not return within 5s of its cancellation")
	}
}

// TestReleaseWritesAreNotTheWorkflows: the release activities write as ReleaseFieldManager, not
// as the Deployment's workflow (kube.FieldManager), whose own writes the watcher does not
// signal: a release's change must wake the Deployment's workflow.
func TestReleaseWritesAreNotTheWorkflows(t *testing.T) {
	f := newFixture(t, testDeployment())
	if _, err := f.a.ApplyTemplateChange(context.Background(), ApplyInput{Namespace: testNS, Name: "web", Images: map[string]string{"app": "nginx:2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.a.RestoreTemplate(context.Background(), RestoreInput{Namespace: testNS, Name: "web", Template: podTemplate("nginx:1", "")}); err != nil {
		t.Fatal(err)
	}
	updates := f.actionsOf("update", "deployments")
	if len(updates) != 2 {
		t.Fatalf("%d updates, want 2", len(updates))
	}
	for _, u := range updates {
		if got := u.(k8stesting.UpdateActionImpl).UpdateOptions.FieldManager; got != ReleaseFieldManager || got == kube.FieldManager {
			t.Errorf("field manager %q, want %q", got, ReleaseFieldManager)
		}
	}
}

// TestPreflightChange: a container the change names but a Deployment lacks, and a patch that
// does not apply or that the apiserver rejects, are problems, found without writing anything;
// a change that applies is written as a dry run (metav1.DryRunAll). The fake clientset does
// not implement dry runs (it would store the object): a reactor answers them as the apiserver
// does, from the request, and rejects a template without containers as validation would. So
// this tests what is sent; what a real apiserver's admission says is the e2e suite's.
func TestPreflightChange(t *testing.T) {
	sidecar := withDeployment(testDeployment(), func(d *appsv1.Deployment) {
		d.Name, d.UID, d.Spec.Template = "proxy", "proxy-uid", podTemplate("envoy:1", "")
		d.Spec.Template.Spec.Containers[0].Name = "envoy"
	})
	tests := []struct {
		name       string
		give       PreflightInput
		want       []string // problems, each a prefix
		wantDryRun int
		wantErr    string
	}{
		{name: "applies", give: PreflightInput{Namespace: testNS, Names: []string{"web"}, Images: map[string]string{"app": "nginx:2"}}, wantDryRun: 1},
		{name: "a container missing in one", give: PreflightInput{Namespace: testNS, Names: []string{"web", "proxy"}, Images: map[string]string{"app": "nginx:2"}},
			want: []string{`default/proxy: no container named "app"`}, wantDryRun: 1},
		{name: "already has the change: no write", give: PreflightInput{Namespace: testNS, Names: []string{"web"}, Images: map[string]string{"app": "nginx:1"}}},
		{name: "patch that does not apply", give: PreflightInput{Namespace: testNS, Names: []string{"web"}, Patch: json.RawMessage(`{"spec":{"containerz":[]}}`)},
			want: []string{"default/web: patched template: "}},
		{name: "patch the apiserver rejects", give: PreflightInput{Namespace: testNS, Names: []string{"web"}, Patch: json.RawMessage(`{"spec":{"$setElementOrder/containers":[],"containers":[{"name":"app","$patch":"delete"}]}}`)},
			want: []string{"default/web: the apiserver rejects the changed template (dry run): "}, wantDryRun: 1},
		{name: "no such Deployment", give: PreflightInput{Namespace: testNS, Names: []string{"nope"}, Images: map[string]string{"app": "nginx:2"}}, wantErr: ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, testDeployment(), sidecar)
			dryRuns := 0
			f.client.PrependReactor("update", "deployments", func(action k8stesting.Action) (bool, runtime.Object, error) {
				u := action.(k8stesting.UpdateActionImpl)
				if !reflect.DeepEqual(u.UpdateOptions.DryRun, []string{metav1.DryRunAll}) {
					t.Errorf("update without dry run: %+v", u.UpdateOptions)
					return false, nil, nil
				}
				dryRuns++
				d := u.GetObject().(*appsv1.Deployment)
				if len(d.Spec.Template.Spec.Containers) == 0 {
					return true, nil, apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, d.Name, field.ErrorList{field.Required(field.NewPath("spec", "template", "spec", "containers"), "")})
				}
				return true, d, nil
			})
			got, err := f.a.PreflightChange(context.Background(), tt.give)
			checkErr(t, err, tt.wantErr)
			if len(got.Problems) != len(tt.want) {
				t.Fatalf("problems = %q, want %q", got.Problems, tt.want)
			}
			for i := range tt.want {
				if !strings.HasPrefix(got.Problems[i], tt.want[i]) {
					t.Errorf("problem %d = %q, want it to start with %q", i, got.Problems[i], tt.want[i])
				}
			}
			if dryRuns != tt.wantDryRun {
				t.Errorf("%d dry runs, want %d", dryRuns, tt.wantDryRun)
			}
			if images := imagesOf(f.deployment(t).Spec.Template); images != "init=busybox:1 app=nginx:1" {
				t.Errorf("web's images after = %s, want unchanged", images)
			}
		})
	}
}
