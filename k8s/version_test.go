package k8s

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestObjectVersionConstructors(t *testing.T) {
	d := webDeployment(1, "nginx:1")
	d.ResourceVersion = "42"
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: "prod", ResourceVersion: "7"}}
	tests := []struct {
		name string
		give ObjectVersion
		want ObjectVersion
	}{
		{
			name: "DeploymentVersion",
			give: DeploymentVersion(d),
			want: ObjectVersion{Kind: "Deployment", Name: "web", ResourceVersion: "42"},
		},
		{
			name: "ReplicaSetVersion",
			give: ReplicaSetVersion(rs),
			want: ObjectVersion{Kind: "ReplicaSet", Name: "web-abc", ResourceVersion: "7"},
		},
		{
			name: "ReplicaSetGone",
			give: ReplicaSetGone("web-old"),
			want: ObjectVersion{Kind: "ReplicaSet", Name: "web-old", Gone: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.give != tt.want {
				t.Errorf("got %+v, want %+v", tt.give, tt.want)
			}
		})
	}
	if KindDeployment != "Deployment" || KindReplicaSet != "ReplicaSet" {
		t.Errorf("kinds = %q, %q, want the API kinds Deployment, ReplicaSet", KindDeployment, KindReplicaSet)
	}
}

func TestObjectVersionSeenBy(t *testing.T) {
	tests := []struct {
		name     string
		give     string // the version wanted
		giveHave string // the version held
		want     bool
	}{
		{name: "no version wanted is always seen", give: "", giveHave: "", want: true},
		{name: "no version wanted, any held", give: "", giveHave: "x", want: true},
		{name: "same version", give: "10", giveHave: "10", want: true},
		{name: "newer held", give: "10", giveHave: "11", want: true},
		{name: "older held", give: "10", giveHave: "9", want: false},
		{name: "compared as numbers, not strings", give: "9", giveHave: "10", want: true},
		{name: "compared as numbers, older with more digits is not", give: "100", giveHave: "99", want: false},
		{name: "nothing held", give: "10", giveHave: "", want: false},
		{name: "held does not parse", give: "10", giveHave: "abc", want: false},
		{name: "wanted does not parse", give: "abc", giveHave: "10", want: false},
		{name: "negative does not parse", give: "-1", giveHave: "10", want: false},
		{name: "largest etcd revision", give: "18446744073709551615", giveHave: "18446744073709551615", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := ObjectVersion{Kind: KindDeployment, Name: "web", ResourceVersion: tt.give}
			if got := v.SeenBy(tt.giveHave); got != tt.want {
				t.Errorf("ObjectVersion{rv %q}.SeenBy(%q) = %t, want %t", tt.give, tt.giveHave, got, tt.want)
			}
		})
	}
}
