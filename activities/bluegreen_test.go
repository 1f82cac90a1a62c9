package activities

import (
	"context"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/temporal-rollout/rollout/k8s"
)

func TestSyncBlueGreen(t *testing.T) {
	ref := DeploymentRef{Namespace: "default", Name: "web", UID: "u1"}
	ev := func(reason string) k8s.Event {
		return k8s.Event{Type: "Normal", Reason: reason, Message: reason + " message"}
	}
	tests := []struct {
		name         string
		give         []ServiceSwitch
		wantSelects  map[string]string
		wantSwitched []string
		wantEvents   []string
		wantErrKind  string
	}{
		{
			name: "active first, then preview",
			give: []ServiceSwitch{
				{Service: "web", Hash: "b", Event: ev("ActiveSwitched")},
				{Service: "web-preview", Hash: "b", Event: ev("PreviewSwitched")},
			},
			wantSelects: map[string]string{"web": "b", "web-preview": "b"}, wantSwitched: []string{"web"},
			wantEvents: []string{"Normal ActiveSwitched ActiveSwitched message"},
		},
		{
			// No hash: the Service keeps what it selects (its target is not fully available).
			name:        "left as it is",
			give:        []ServiceSwitch{{Service: "web"}, {Service: "web-preview", Hash: "b", Event: ev("PreviewSwitched")}},
			wantSelects: map[string]string{"web": "a", "web-preview": "b"},
		},
		{
			name:        "missing service",
			give:        []ServiceSwitch{{Service: "nope", Hash: "b"}},
			wantSelects: map[string]string{}, wantErrKind: ErrBlueGreen,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kc := fake.NewSimpleClientset(service("web", "a"), service("web-preview", "b"))
			rec := record.NewFakeRecorder(10)
			a := &Activities{Client: kc, Recorder: rec}
			res, err := a.SyncBlueGreen(context.Background(), SyncBlueGreenInput{Deployment: ref, Switches: tt.give})
			if tt.wantErrKind != "" {
				if !IsKind(err, tt.wantErrKind) {
					t.Fatalf("err = %v, want kind %s", err, tt.wantErrKind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.Selects, tt.wantSelects) || !reflect.DeepEqual(res.Switched, tt.wantSwitched) {
				t.Errorf("selects %v switched %v, want %v %v", res.Selects, res.Switched, tt.wantSelects, tt.wantSwitched)
			}
			for name, hash := range tt.wantSelects {
				svc, _ := kc.CoreV1().Services("default").Get(context.Background(), name, metav1.GetOptions{})
				if svc.Spec.Selector[appsv1.DefaultDeploymentUniqueLabelKey] != hash || svc.Spec.Selector["app"] != "web" {
					t.Errorf("service %s selector %v, want app=web and hash %s", name, svc.Spec.Selector, hash)
				}
			}
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if !reflect.DeepEqual(got, tt.wantEvents) {
				t.Errorf("events %q, want %q", got, tt.wantEvents)
			}
		})
	}
}

// A conflict on the write is a stale decision: the workflow syncs again from a live read.
func TestSyncBlueGreenConflict(t *testing.T) {
	kc := fake.NewSimpleClientset(service("web", "a"))
	kc.PrependReactor("update", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, conflict(schema.GroupResource{Resource: "services"}, "web")
	})
	a := &Activities{Client: kc}
	_, err := a.SyncBlueGreen(context.Background(), SyncBlueGreenInput{
		Deployment: DeploymentRef{Namespace: "default", Name: "web"}, Switches: []ServiceSwitch{{Service: "web", Hash: "b"}},
	})
	if !IsKind(err, ErrStale) {
		t.Errorf("err = %v, want %s", err, ErrStale)
	}
}
