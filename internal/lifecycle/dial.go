package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
)

// The attempts of the start-up waits: each is cut off after attemptTimeout, the next comes
// retryInterval later.
const (
	attemptTimeout = 5 * time.Second
	retryInterval  = time.Second
)

// WaitAPIServer waits until the Kubernetes API server at host answers GET /version, for at most
// timeout. Bad credentials (401) and a refusal (403) end the wait at once: retrying cannot fix
// them. A refusal by an API server whose RBAC has not loaded its own bootstrap roles yet (just
// started: "clusterrole ... "system:discovery" not found") is retried: it passes within seconds.
func WaitAPIServer(ctx context.Context, logger *slog.Logger, kc kubernetes.Interface, host string, timeout time.Duration) error {
	var firstRefusal time.Time
	return Wait(ctx, logger, "the Kubernetes API server at "+host, timeout, attemptTimeout, retryInterval, func(ctx context.Context) error {
		err := kc.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error()
		if apierrors.IsForbidden(err) {
			if firstRefusal.IsZero() {
				firstRefusal = time.Now()
			}
			if rbacStarting(err) || time.Since(firstRefusal) < forbiddenGrace {
				return fmt.Errorf("GET /version: %w (retried for %s: an API server just started refuses until its RBAC has loaded)", err, forbiddenGrace)
			}
		}
		if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
			return Permanent(fmt.Errorf("GET /version: %w (check the kubeconfig's credentials)", err))
		}
		return err
	})
}

// forbiddenGrace is how long the start-up wait retries a refusal (403) before it takes it for
// a real one: an API server that has just started refuses every request its RBAC caches have
// not caught up with, for a second or two (seen in e2e TestChaos, a watcher started as the
// kube-apiserver restarted). A kubeconfig without the permission still ends the wait within
// seconds.
const forbiddenGrace = 8 * time.Second

// rbacStarting reports whether a refusal names one of the API server's own bootstrap cluster
// roles as missing (system:discovery, system:basic-user, system:public-info-viewer): they
// always exist once its RBAC is loaded, so the server has just started.
func rbacStarting(err error) bool {
	msg := err.Error()
	for _, role := range []string{"system:discovery", "system:basic-user", "system:public-info-viewer"} {
		if strings.Contains(msg, `clusterrole.rbac.authorization.k8s.io "`+role+`" not found`) {
			return true
		}
	}
	return false
}

// DialTemporal connects to the Temporal frontend at opts.HostPort (client.DialContext checks
// its health), retrying for at most timeout. Refused credentials end the wait at once.
func DialTemporal(ctx context.Context, logger *slog.Logger, opts client.Options, timeout time.Duration) (client.Client, error) {
	var tc client.Client
	err := Wait(ctx, logger, "Temporal at "+opts.HostPort, timeout, attemptTimeout, retryInterval, func(ctx context.Context) error {
		c, err := client.DialContext(ctx, opts)
		if err != nil {
			if s, ok := status.FromError(err); ok && (s.Code() == codes.Unauthenticated || s.Code() == codes.PermissionDenied) {
				return Permanent(err)
			}
			return err
		}
		tc = c
		return nil
	})
	return tc, err
}
