package lifecycle

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A refusal right after the API server started (its RBAC has not loaded the bootstrap roles:
// seen in e2e TestChaos after a kube-apiserver restart) is retried; a refusal of a server whose
// RBAC is loaded is not.
func TestRBACStarting(t *testing.T) {
	forbidden := func(msg string) error {
		return apierrors.NewForbidden(schema.GroupResource{}, "", errors.New(msg))
	}
	tests := []struct {
		name string
		give error
		want bool
	}{
		{name: "bootstrap roles not found: starting", give: forbidden(`RBAC: [clusterrole.rbac.authorization.k8s.io "system:service-account-issuer-discovery" not found, clusterrole.rbac.authorization.k8s.io "system:public-info-viewer" not found, clusterrole.rbac.authorization.k8s.io "system:basic-user" not found, clusterrole.rbac.authorization.k8s.io "system:discovery" not found, clusterrole.rbac.authorization.k8s.io "temporal-rollout" not found]`), want: true},
		{name: "only our role not found: a real refusal", give: forbidden(`RBAC: clusterrole.rbac.authorization.k8s.io "temporal-rollout" not found`)},
		{name: "no RBAC detail", give: forbidden(`User "x" cannot get path "/version"`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rbacStarting(tt.give); got != tt.want {
				t.Errorf("rbacStarting(%v) = %v, want %v", tt.give, got, tt.want)
			}
		})
	}
}

// An API server that refuses GET /version for its first answers (RBAC loading after a start)
// is waited for; one that keeps refusing ends the wait once forbiddenGrace has passed, naming
// the credentials.
func TestWaitAPIServerForbiddenGrace(t *testing.T) {
	serve := func(refusals int) *httptest.Server {
		var n atomic.Int32
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if int(n.Add(1)) <= refusals {
				w.WriteHeader(http.StatusForbidden)
				_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden: User \"x\" cannot get path \"/version\"","reason":"Forbidden","code":403}`))
				return
			}
			_, _ = w.Write([]byte(`{"major":"1","minor":"36","gitVersion":"v1.36.3"}`))
		}))
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Run("refused twice, then answers", func(t *testing.T) {
		srv := serve(2)
		defer srv.Close()
		kc := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
		if err := WaitAPIServer(context.Background(), logger, kc, srv.URL, 30*time.Second); err != nil {
			t.Fatalf("WaitAPIServer: %v, want it to wait through the refusals", err)
		}
	})
	t.Run("always refused", func(t *testing.T) {
		srv := serve(1 << 30)
		defer srv.Close()
		kc := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
		start := time.Now()
		err := WaitAPIServer(context.Background(), logger, kc, srv.URL, 60*time.Second)
		if err == nil || !strings.Contains(err.Error(), "check the kubeconfig's credentials") {
			t.Fatalf("WaitAPIServer: %v, want a refusal naming the credentials", err)
		}
		if took := time.Since(start); took < forbiddenGrace || took > forbiddenGrace+10*time.Second {
			t.Errorf("refused after %s, want after the %s grace and within seconds of it", took, forbiddenGrace)
		}
	})
}
