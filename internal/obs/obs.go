// Package obs serves /metrics, /healthz and /readyz, and bridges the Temporal SDK's metrics
// into the same Prometheus registry.
package obs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// NewRegistry returns a registry with the Go and process collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// SDKMetrics returns a Temporal metrics handler that reports into reg, and a closer.
func SDKMetrics(reg *prometheus.Registry) (client.MetricsHandler, func()) {
	reporter := tallyprom.NewReporter(tallyprom.Options{Registerer: reg})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)
	scope = sdktally.NewPrometheusNamingScope(scope)
	return sdktally.NewMetricsHandler(scope), func() { _ = closer.Close() }
}

// TemporalReady is a readiness check: the Temporal frontend answers a health check.
func TemporalReady(ctx context.Context, tc client.Client) func() error {
	return func() error {
		_, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{})
		return err
	}
}

// ReadyAfter is a /readyz check set once start-up is done: until Set, /readyz answers 503
// "starting". The zero value is ready to use.
type ReadyAfter struct{ check atomic.Pointer[func() error] }

// Set installs the check /readyz runs from now on.
func (r *ReadyAfter) Set(check func() error) { r.check.Store(&check) }

// Check is the Server's Ready.
func (r *ReadyAfter) Check() error {
	c := r.check.Load()
	if c == nil {
		return errors.New("starting")
	}
	return (*c)()
}

// Server serves the endpoints until ctx ends. ready is called by /readyz.
type Server struct {
	// Pprof adds Go's /debug/pprof/ handlers.
	Pprof  bool
	Addr   string
	Reg    *prometheus.Registry
	Ready  func() error
	Logger *slog.Logger
}

// Start listens and serves in the background; the returned func shuts it down.
func (s Server) Start(ctx context.Context) (func(), error) {
	if s.Addr == "" {
		return func() {}, nil
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.Reg, promhttp.HandlerOpts{}))
	if s.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if s.Ready != nil {
			if err := s.Ready(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s for metrics: %w", s.Addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.Logger.Error("Metrics server stopped", "error", err)
		}
	}()
	s.Logger.Info("Serving metrics and health", "address", ln.Addr().String())
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}
