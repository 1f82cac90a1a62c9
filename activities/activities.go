// Package activities carries out the writes the workflow decides on. Each activity is thin and
// idempotent: it takes one XxxInput, writes absolute targets with UID and resourceVersion
// preconditions, retries conflicts by re-reading, and returns one XxxResult. Invalid input and
// stale decisions are non-retryable errors, so the workflow re-observes instead of repeating a
// write that no longer fits.
package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/temporal-rollout/rollout/k8s"
	"github.com/temporal-rollout/rollout/kube"
)

// Error types returned as non-retryable application errors. The workflow reacts to each.
const (
	// ErrStale: the object changed under the decision (UID, generation, ownership). Re-observe.
	ErrStale = "Stale"
	// ErrNotFound: the Deployment is gone.
	ErrNotFound = "NotFound"
	// ErrInvalid: the input cannot be carried out (unknown container, bad object).
	ErrInvalid = "Invalid"
	// ErrCreateFailed: the apiserver refused the new ReplicaSet; the condition and event are
	// recorded.
	ErrCreateFailed = "ReplicaSetCreateError"
	// ErrBusy: a sync's write found the client budget saturated (see busy); nothing was
	// written. The workflow ends its task and syncs again once the budget admits it.
	ErrBusy = "Busy"
)

// fieldManager names our writes in managedFields; see kube.FieldManager.
const fieldManager = kube.FieldManager

// Activities holds the dependencies of every activity. Register it whole with the worker.
type Activities struct {
	Client kubernetes.Interface
	// Dynamic reads and writes the Gateway API's HTTPRoutes (traffic routing); nil: no
	// traffic routing (SyncTraffic fails).
	Dynamic dynamic.Interface
	// CommandClient, when set, makes the writes a user asked for through Temporal (pause,
	// resume, a rollback's template, an image set by the starter) and the reads they need,
	// under a client budget of their own: like `kubectl rollout pause`, they do not queue
	// behind the controller's own writes on a saturated budget.
	CommandClient kubernetes.Interface
	Cache         *kube.Cache
	Recorder      record.EventRecorder
	Metrics       *Metrics
	// LocalWaits bounds the AwaitChange waits run as local activities, each of which holds a
	// workflow task open (a buffered channel, one element per wait); nil is no bound.
	LocalWaits chan struct{}
	// RestWatched: this worker runs the watcher on the same informer cache, which signals a
	// rollout held at rest when its Deployment or ReplicaSets change (watcher.heldAtRest), so
	// AwaitChange may return AwaitRest (AwaitInput.Rest).
	RestWatched bool
	// Prometheus answers analysis steps' queries; nil when the worker has no
	// --prometheus-address.
	Prometheus Prometheus
	// HTTP sends web analyses' requests and notifications; nil is http.DefaultClient (each
	// request is bounded by its own timeout).
	HTTP *http.Client
	// JobPoll is how often RunAnalysisJob reads its Job; 0 is defaultJobPoll.
	JobPoll time.Duration
	// UIURL is --ui-url, the Temporal UI's address. Observe reports it, so the workflow links
	// its notifications to itself (and a replay decides on the value the run saw).
	UIURL string
	// Managed: the worker runs in managed mode (--mode managed), beside kube-controller-manager's
	// own Deployment controller. Observe reports it, so the workflow decides with
	// k8s.Request.Managed.
	Managed bool
	// ManagedGuard: --managed-guard (see k8s.Request.ManagedGuard).
	ManagedGuard bool
	// Admission paces the moves AwaitChange hands to the workflow while the client budget is
	// saturated; nil hands every move over at once.
	Admission *Admission
	// LocalWait is --local-wait. Observe reports it, so the workflow decides (and a replay
	// decides again) on the value the run saw.
	LocalWait time.Duration
	// SpecDigestKey keys the digests that stand for pod specs in the recorded snapshots
	// (HMAC-SHA256; see redact.go), derived from the codec key (codec.Codec.DigestKey); nil
	// without --codec-key-file: plain SHA-256, as before.
	SpecDigestKey []byte
	// Freeze answers FleetFreeze (freeze.go); nil: no fleet freeze is known.
	Freeze *FreezeSource
}

// DeploymentRef names a Deployment and pins its UID.
type DeploymentRef struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid,omitempty"`
}

func (r DeploymentRef) String() string { return r.Namespace + "/" + r.Name }

type commandKey struct{}

// asCommand marks ctx as carrying out a user's command (see Activities.CommandClient).
func asCommand(ctx context.Context) context.Context {
	return context.WithValue(ctx, commandKey{}, true)
}

// client is the clientset for ctx: CommandClient for a user's command, Client otherwise.
func (a *Activities) client(ctx context.Context) kubernetes.Interface {
	if cmd, _ := ctx.Value(commandKey{}).(bool); cmd && a.CommandClient != nil {
		return a.CommandClient
	}
	return a.Client
}

// busy refuses a sync's write, before it is sent, while the client budget is saturated: a write
// that would wait longer than busyBacklog for its token. A sync's writes run as local
// activities inside its workflow task, and a task waiting on the budget holds a task slot and
// everything sent to its workflow (a user's signal, update or query): at QPS 20, with 100
// rollouts, a trigger's task waited 2 s for a slot behind syncs each waiting 2 s for tokens,
// and a status query sent meanwhile 3.5 s. Refused, the sync ends its task at once and waits
// in AwaitChange (AwaitInput.Retry) until Admission admits it; the budget stays as busy.
// A user's command (CommandClient) and writes outside a workflow task are never refused.
//
// The bound is the task's, not each write's: spent is how long the sync has run in its task
// before this write (the workflow's clock), and a write is refused while spent plus its wait
// would pass busyBacklog. A sync of four writes on a saturated budget held its task (and a
// status query sent meanwhile) 3.1 s when each write could wait 750 ms; now its first writes
// go, and the rest go in the next task, once the budget admits them.
//
// The check before the write reads the budget's queue as it is; syncs running at once all
// read it before any of them queues, so the write itself carries the bound too (the context
// returned, kube.IfBudgetWithin): its token is taken only if it comes within what is left of
// busyBacklog, or the write is not sent (writeRefused). At QPS 20, with 20 syncs running at
// once, a task whose checks had all passed held a status query 1.77 s.
func (a *Activities) busy(ctx context.Context, command bool, spent time.Duration) (context.Context, error) {
	if command || a.Admission == nil || !activity.IsActivity(ctx) || !activity.GetInfo(ctx).IsLocalActivity {
		return ctx, nil
	}
	if backlog := a.Admission.budget.Backlog(); backlog > 0 && backlog+max(spent, 0) > busyBacklog {
		return ctx, nonRetryable(ErrBusy, "client budget saturated: the write would wait %s for its token, the sync has run %s in its task; the sync goes on once the budget admits it",
			backlog.Round(time.Millisecond), max(spent, 0).Round(time.Millisecond))
	}
	return kube.IfBudgetWithin(ctx, busyBacklog-max(spent, 0)), nil
}

// writeRefused turns a write that the bound busy set refused (not sent) into ErrBusy.
func writeRefused(what string, err error) error {
	if errors.Is(err, kube.ErrBudgetBusy) {
		return nonRetryable(ErrBusy, "%s: client budget saturated, the write would have waited past the sync's bound; the sync goes on once the budget admits it", what)
	}
	return nil
}

func refOf(d *appsv1.Deployment) DeploymentRef {
	return DeploymentRef{Namespace: d.Namespace, Name: d.Name, UID: d.UID}
}

func nonRetryable(kind string, format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), kind, nil)
}

// classify turns an apiserver error into a non-retryable error where retrying cannot help.
func classify(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", what, err), ErrNotFound, err)
	case apierrors.IsConflict(err):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", what, err), ErrStale, err)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsForbidden(err):
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s: %v", what, err), ErrInvalid, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// IsKind reports whether err is an application error of the given type.
func IsKind(err error, kind string) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == kind
}

// record emits events on the Deployment once the write they describe has succeeded.
func (a *Activities) record(ref DeploymentRef, events []k8s.Event) {
	if a.Recorder == nil || len(events) == 0 {
		return
	}
	obj := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID},
	}
	for _, e := range events {
		typ := e.Type
		if typ != corev1.EventTypeWarning {
			typ = corev1.EventTypeNormal
		}
		a.Recorder.Event(obj, typ, e.Reason, e.Message)
	}
}

func (a *Activities) countWrite(verb, resource string, err error) {
	if a.Metrics != nil {
		a.Metrics.APIWrite(verb, resource, err)
	}
}
