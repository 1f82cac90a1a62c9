package activities

import (
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Metrics are the controller's own Prometheus metrics. Rollout counts and durations come
// from the workflow through the SDK's replay-safe metrics handler.
type Metrics struct {
	writes *prometheus.CounterVec
	// ActivityErrors counts failed activity attempts, by activity type.
	ActivityErrors *prometheus.CounterVec
}

// NewMetrics registers the metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollout_apiserver_writes_total",
			Help: "Writes to the Kubernetes API server, by verb, resource and result.",
		}, []string{"verb", "resource", "code"}),
		ActivityErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollout_activity_errors_total",
			Help: "Activity attempts that failed, by activity.",
		}, []string{"activity"}),
	}
	reg.MustRegister(m.writes, m.ActivityErrors)
	return m
}

// APIWrite counts one write to the API server.
func (m *Metrics) APIWrite(verb, resource string, err error) {
	code := "ok"
	if err != nil {
		code = string(apierrors.ReasonForError(err))
		if code == "" {
			code = "error"
		}
	}
	m.writes.WithLabelValues(verb, resource, code).Inc()
}
