package contract

import "testing"

func TestTaskQueueFor(t *testing.T) {
	tests := []struct{ give, want string }{
		{give: "", want: "deployment-controller"},
		{give: "eu", want: "deployment-controller.eu"},
	}
	for _, tt := range tests {
		if got := TaskQueueFor(tt.give); got != tt.want {
			t.Errorf("TaskQueueFor(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestWorkflowIDIn(t *testing.T) {
	tests := []struct {
		name                string
		cluster, ns, deploy string
		want                string
	}{
		{name: "no cluster: the single-cluster ID", ns: "shop", deploy: "web", want: "deployment/shop/web"},
		{name: "named cluster", cluster: "eu", ns: "shop", deploy: "web", want: "deployment/eu/shop/web"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := WorkflowIDIn(tt.cluster, tt.ns, tt.deploy)
			if got != tt.want {
				t.Fatalf("WorkflowIDIn = %q, want %q", got, tt.want)
			}
			if in := (Input{Cluster: tt.cluster, Namespace: tt.ns, Name: tt.deploy}); in.WorkflowID() != tt.want {
				t.Errorf("Input.WorkflowID() = %q, want %q", in.WorkflowID(), tt.want)
			}
			cluster, ns, name, ok := ParseWorkflowIDIn(got)
			if !ok || cluster != tt.cluster || ns != tt.ns || name != tt.deploy {
				t.Errorf("ParseWorkflowIDIn(%q) = %q, %q, %q, %t, want %q, %q, %q, true", got, cluster, ns, name, ok, tt.cluster, tt.ns, tt.deploy)
			}
			ns, name, ok = ParseWorkflowID(got)
			if !ok || ns != tt.ns || name != tt.deploy {
				t.Errorf("ParseWorkflowID(%q) = %q, %q, %t, want %q, %q, true", got, ns, name, ok, tt.ns, tt.deploy)
			}
		})
	}
	if WorkflowIDIn("", "shop", "web") != WorkflowID("shop", "web") {
		t.Errorf("WorkflowIDIn(\"\", ...) = %q, want WorkflowID's %q", WorkflowIDIn("", "shop", "web"), WorkflowID("shop", "web"))
	}
}

func TestParseWorkflowIDInRejects(t *testing.T) {
	for _, give := range []string{"", "deployment", "deployment/web", "deployment//web", "deployment/eu//web",
		"deployment/eu/shop/web/x", "release/shop/web", "deployment/shop/"} {
		if c, ns, name, ok := ParseWorkflowIDIn(give); ok {
			t.Errorf("ParseWorkflowIDIn(%q) = %q, %q, %q, true, want not ok", give, c, ns, name)
		}
	}
}

func TestValidateCluster(t *testing.T) {
	tests := []struct {
		give    string
		wantErr bool
	}{
		{give: ""}, {give: "eu"}, {give: "us-east-1"},
		{give: "EU", wantErr: true}, {give: "eu/west", wantErr: true}, {give: "-eu", wantErr: true}, {give: "eu.west", wantErr: true},
	}
	for _, tt := range tests {
		err := ValidateCluster(tt.give)
		if (err != nil) != tt.wantErr {
			t.Errorf("ValidateCluster(%q) = %v, want error %t", tt.give, err, tt.wantErr)
		}
		in := Input{Namespace: "shop", Name: "web", Cluster: tt.give}
		if err := in.Validate(); (err != nil) != tt.wantErr {
			t.Errorf("Input{Cluster: %q}.Validate() = %v, want error %t", tt.give, err, tt.wantErr)
		}
	}
}

func TestSearchAttributesHasCluster(t *testing.T) {
	for _, sa := range SearchAttributes() {
		if sa.Name == SearchAttrCluster {
			if sa.Type.String() != "Keyword" {
				t.Errorf("%s type = %s, want Keyword", sa.Name, sa.Type)
			}
			return
		}
	}
	t.Errorf("SearchAttributes() lacks %s", SearchAttrCluster)
}
