package lifecycle

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/temporal-rollout/rollout/contract"
)

// fakeOperator answers ListSearchAttributes with errs, one per call, then with attrs.
type fakeOperator struct {
	attrs map[string]enumspb.IndexedValueType
	errs  []error
	calls int
	ns    string
}

func (f *fakeOperator) ListSearchAttributes(_ context.Context, in *operatorservice.ListSearchAttributesRequest, _ ...grpc.CallOption) (*operatorservice.ListSearchAttributesResponse, error) {
	f.calls++
	f.ns = in.GetNamespace()
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	return &operatorservice.ListSearchAttributesResponse{CustomAttributes: f.attrs}, nil
}

func registered(except ...string) map[string]enumspb.IndexedValueType {
	m := map[string]enumspb.IndexedValueType{"SomeoneElses": enumspb.INDEXED_VALUE_TYPE_TEXT}
	for _, sa := range contract.SearchAttributes() {
		m[sa.Name] = sa.Type
	}
	for _, e := range except {
		delete(m, e)
	}
	return m
}

func TestCheckSearchAttributes(t *testing.T) {
	wrongType := registered()
	wrongType[contract.SearchAttrRevision] = enumspb.INDEXED_VALUE_TYPE_KEYWORD
	tests := []struct {
		name      string
		give      *fakeOperator
		wantErr   []string // each in the error; none: no error
		wantCalls int
	}{
		{name: "all registered", give: &fakeOperator{attrs: registered()}, wantCalls: 1},
		{
			name: "one missing",
			give: &fakeOperator{attrs: registered(contract.SearchAttrWaitingFor)},
			wantErr: []string{
				"the search attributes of Temporal namespace team-a: --search-attributes needs RolloutWaitingFor (Keyword) registered; run: ",
				"temporal operator search-attribute create --namespace team-a --name RolloutWaitingFor --type Keyword",
			},
			wantCalls: 1,
		},
		{
			name: "none registered",
			give: &fakeOperator{},
			wantErr: []string{
				"needs K8sNamespace (Keyword), K8sDeployment (Keyword), K8sRevision (Int), RolloutOutcome (Keyword), RolloutWaitingFor (Keyword), RolloutCluster (Keyword), ReleaseName (Keyword) registered",
				"--name K8sNamespace --type Keyword && ",
				"temporal operator search-attribute create --namespace team-a --name K8sRevision --type Int",
			},
			wantCalls: 1,
		},
		{
			name: "wrong type",
			give: &fakeOperator{attrs: wrongType},
			wantErr: []string{
				"needs K8sRevision (Int, registered as Keyword) registered; run: temporal operator search-attribute remove --namespace team-a --name K8sRevision --yes && temporal operator search-attribute create --namespace team-a --name K8sRevision --type Int",
			},
			wantCalls: 1,
		},
		{
			name:      "unavailable, then registered",
			give:      &fakeOperator{attrs: registered(), errs: []error{status.Error(codes.Unavailable, "connection refused")}},
			wantCalls: 2,
		},
		{
			name:      "not allowed to list: not checked",
			give:      &fakeOperator{errs: []error{status.Error(codes.PermissionDenied, "no")}},
			wantCalls: 1,
		},
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			err := CheckSearchAttributes(context.Background(), logger, tt.give, "team-a", "--search-attributes", contract.SearchAttributes(), 10*time.Second)
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("took %s", took)
			}
			if tt.give.ns != "team-a" {
				t.Errorf("listed namespace %q, want team-a", tt.give.ns)
			}
			if tt.give.calls != tt.wantCalls {
				t.Errorf("calls = %d, want %d", tt.give.calls, tt.wantCalls)
			}
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("err = nil, want %q", tt.wantErr)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines (the process's last line must hold it): %q", err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// TestCheckSearchAttributesUnreachable: a server that never answers fails after the timeout,
// naming the last error.
func TestCheckSearchAttributesUnreachable(t *testing.T) {
	f := &fakeOperator{errs: make([]error, 100)}
	for i := range f.errs {
		f.errs[i] = status.Error(codes.Unavailable, "connection refused")
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	err := CheckSearchAttributes(context.Background(), logger, f, "default", "--search-attributes", contract.SearchAttributes(), 1500*time.Millisecond)
	var st interface{ GRPCStatus() *status.Status }
	if err == nil || !strings.Contains(err.Error(), "still failing after 1.5s") || !errors.As(err, &st) {
		t.Fatalf("err = %v, want a timeout naming the Unavailable error", err)
	}
}
