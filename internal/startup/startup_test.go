package startup

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"google.golang.org/grpc"

	"github.com/temporal-rollout/rollout/contract"
	"github.com/temporal-rollout/rollout/internal/lifecycle"
)

// registeredAttrs answers ListSearchAttributes with a fixed set.
type registeredAttrs map[string]enumspb.IndexedValueType

func (r registeredAttrs) ListSearchAttributes(context.Context, *operatorservice.ListSearchAttributesRequest, ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error) {
	return &operatorservice.ListSearchAttributesResponse{CustomAttributes: r}, nil
}

// TestReleasesChecksSearchAttributes: `worker --releases` (without --search-attributes) on a
// namespace without ReleaseName fails at start-up naming the command that creates it; with it
// registered, or with neither flag, nothing fails.
func TestReleasesChecksSearchAttributes(t *testing.T) {
	all := registeredAttrs{}
	for _, sa := range contract.SearchAttributes() {
		all[sa.Name] = sa.Type
	}
	none := registeredAttrs{}
	tests := []struct {
		name             string
		searchAttributes bool
		releases         bool
		give             registeredAttrs
		want             string // in the error; empty: no error
	}{
		{name: "releases, not registered", releases: true, give: none,
			want: "--releases needs ReleaseName (Keyword) registered; run: temporal operator search-attribute create --namespace default --name ReleaseName --type Keyword"},
		{name: "releases, registered", releases: true, give: all},
		{name: "both, not registered", searchAttributes: true, releases: true, give: none, want: "--search-attributes needs K8sNamespace (Keyword)"},
		{name: "neither", give: none},
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			for _, c := range searchAttributeChecks(tt.searchAttributes, tt.releases) {
				if err = lifecycle.CheckSearchAttributes(context.Background(), logger, tt.give, "default", c.flag, c.want, time.Second); err != nil {
					break
				}
			}
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("err = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
