// Package config loads the settings shared by the worker and the starter: flags, ROLLOUT_*
// environment variables and an optional config file, in that order of precedence, into one
// typed and validated struct.
package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.temporal.io/sdk/client"

	"github.com/temporal-rollout/rollout/codec"
	"github.com/temporal-rollout/rollout/contract"
)

// EnvPrefix prefixes every environment variable: --kube-qps is ROLLOUT_KUBE_QPS.
const EnvPrefix = "ROLLOUT"

// The default metrics addresses differ, so a worker and a watcher started on one host with
// their defaults do not fight over a port.
const (
	// WorkerMetricsAddress is the worker's default --metrics-address.
	WorkerMetricsAddress = ":9090"
	// WatcherMetricsAddress is the default --metrics-address of `starter watch`.
	WatcherMetricsAddress = ":9091"
)

// Config is every setting, typed.
type Config struct {
	Kubeconfig     string  `mapstructure:"kubeconfig"`
	KubeQPS        float32 `mapstructure:"kube-qps"`
	KubeBurst      int     `mapstructure:"kube-burst"`
	WatchNamespace string  `mapstructure:"watch-namespace"`

	TemporalAddress   string `mapstructure:"temporal-address"`
	TemporalNamespace string `mapstructure:"temporal-namespace"`
	TaskQueue         string `mapstructure:"task-queue"`
	TLSCert           string `mapstructure:"temporal-tls-cert"`
	TLSKey            string `mapstructure:"temporal-tls-key"`
	TLSCA             string `mapstructure:"temporal-tls-ca"`
	TLSServerName     string `mapstructure:"temporal-tls-server-name"`
	APIKey            string `mapstructure:"temporal-api-key"`
	// Compression is the gRPC compression of requests to Temporal: "none" (also when empty)
	// or "gzip".
	Compression string `mapstructure:"temporal-compression"`
	// Cluster names the Kubernetes cluster of a worker or watcher among several on one
	// Temporal namespace; the starter's commands address that cluster's workflows. Empty: one
	// cluster. It picks the workflow IDs (contract.WorkflowIDIn) and, unless --task-queue is
	// set, the task queue (contract.TaskQueueFor).
	Cluster string `mapstructure:"cluster"`

	MetricsAddress string `mapstructure:"metrics-address"`
	LogLevel       string `mapstructure:"log-level"`
	LogFormat      string `mapstructure:"log-format"`
	// Resync is how often the watcher reconciles open workflows with the cluster.
	Resync           time.Duration `mapstructure:"resync"`
	SearchAttributes bool          `mapstructure:"search-attributes"`
	MaxSyncs         int           `mapstructure:"max-concurrent-syncs"`
	// LocalWait (worker): how long a rollout's wait for its next move runs first inside the
	// workflow task that synced it; 0 waits in the AwaitChange activity only.
	LocalWait time.Duration `mapstructure:"local-wait"`
	// WorkflowCacheSize bounds the worker's sticky cache of workflow executions (worker).
	WorkflowCacheSize int `mapstructure:"workflow-cache-size"`
	// Pprof serves /debug/pprof/ beside /metrics (worker and watcher).
	Pprof bool `mapstructure:"pprof"`
	// PrometheusAddress is the Prometheus server analysis steps query (worker).
	PrometheusAddress string `mapstructure:"prometheus-address"`
	// UIURL is the Temporal UI's address (worker), e.g. http://localhost:8233: notifications
	// link to <ui-url>/namespaces/<namespace>/workflows/<workflow-id>. Empty: no link.
	UIURL string `mapstructure:"ui-url"`
	// Mode is "full" (our worker is the cluster's Deployment controller: kube-controller-manager
	// runs with --controllers=*,-deployment; also when empty) or "managed" (beside the built-in controller, only
	// Deployments annotated temporal-rollout.io/managed: "true"). Worker and watcher alike.
	Mode string `mapstructure:"mode"`
	// ManagedGuard: deploy/managed/guard.yaml's ReplicaSet policy is installed (managed mode).
	ManagedGuard bool `mapstructure:"managed-guard"`
	// Watch: the worker runs the watcher too, on its own informer cache and Temporal client,
	// and starts new Deployments' workflows eagerly (worker).
	Watch bool `mapstructure:"watch"`
	// HeldAtRest: a watcher runs for this worker's cluster and task queue (this worker's
	// --watch, or `starter watch` beside it), so a rollout held at rest waits with no activity
	// and the watcher signals what would move it (worker; on with Watch).
	HeldAtRest bool `mapstructure:"held-at-rest"`
	// Releases: the worker also runs the release and fleet freeze workflows (package release)
	// on the "releases" task queue (worker).
	Releases bool `mapstructure:"releases"`
	// ReleasePolicy is the file of the releases' approval policy (release.Policy: who may
	// start a release, which waves need whose approval, the trusted keys), read at start-up
	// with --releases; empty: unsigned starts, no approval beyond the release files' (worker).
	ReleasePolicy string `mapstructure:"release-policy"`
	// StartupTimeout bounds each start-up wait: for the API server, for Temporal and for the
	// informer caches' first lists (worker and watcher).
	StartupTimeout time.Duration `mapstructure:"startup-timeout"`
	// ShutdownTimeout bounds the stop after SIGTERM (or a failure); past it the process exits
	// non-zero naming what did not stop (worker and watcher).
	ShutdownTimeout time.Duration `mapstructure:"shutdown-timeout"`
	// CodecKeyFile holds the keys that encrypt every payload sent to Temporal (see package
	// codec and docs/codec.md); empty sends them in clear. Every process: worker, watcher,
	// the starter's commands and its codec server.
	CodecKeyFile string `mapstructure:"codec-key-file"`
}

// The modes of --mode.
const (
	ModeFull    = "full"
	ModeManaged = "managed"
)

// Managed reports whether the process runs in managed mode.
func (c Config) Managed() bool { return c.Mode == ModeManaged }

// The flags come in groups, so that each binary and each starter command registers only the
// settings it uses: the worker all of them (Flags), `starter watch` all but the worker's
// (WatcherFlags), `starter status`, promote and abort CommonFlags and TemporalFlags, the
// starter's commands that may start a workflow (sync, pause, resume, rollback) StartFlags too,
// `starter codec-server` CommonFlags and ShutdownFlags. Load gives every setting
// whose flag is not registered its default, whatever the environment or the config file say,
// so a command is never stopped by a setting it has no use for (a shared config file with
// max-concurrent-syncs, or a $KUBECONFIG that does not exist, leave `starter status` alone).

// Flags registers the worker's settings: every group, metrics on WorkerMetricsAddress.
func Flags(fs *pflag.FlagSet) {
	controllerGroups(fs, WorkerMetricsAddress)
	WorkerFlags(fs)
}

// WatcherFlags registers the settings of `starter watch`: every group but WorkerFlags, metrics
// on WatcherMetricsAddress.
func WatcherFlags(fs *pflag.FlagSet) { controllerGroups(fs, WatcherMetricsAddress) }

// controllerGroups are the groups the worker and the watcher share.
func controllerGroups(fs *pflag.FlagSet, metricsAddress string) {
	CommonFlags(fs)
	TemporalFlags(fs)
	KubeFlags(fs)
	ControllerFlags(fs, metricsAddress)
	ShutdownFlags(fs)
}

// CommonFlags registers what every command that loads the config uses: the config file, the
// log's level and format, and the payload codec's keys.
func CommonFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "config file (YAML, JSON or TOML) with the same keys as the flags")
	fs.String("log-level", "info", "debug, info, warn or error")
	fs.String("log-format", "json", "json or text")
	fs.String("codec-key-file", "", "file of AES-256 keys, one ID=BASE64KEY a line, the first encrypting and every one decrypting (docs/codec.md), that encrypt every payload sent to Temporal: inputs, results, signals, queries, memos, failures; the same file on the worker, the watcher and the starter; empty (the default) sends payloads in clear")
}

// TemporalFlags registers the connection to Temporal: address, namespace, task queue, TLS, API
// key, compression, and how long the first dial may retry.
func TemporalFlags(fs *pflag.FlagSet) {
	fs.String("temporal-address", "localhost:7233", "Temporal frontend host:port")
	fs.String("temporal-namespace", "default", "Temporal namespace")
	fs.String("task-queue", contract.DefaultTaskQueue, "Temporal task queue; when not set, "+contract.DefaultTaskQueue+".<cluster> with --cluster")
	fs.String("cluster", "", "the Kubernetes cluster's name when several share one Temporal namespace (docs/multi-cluster.md): the worker and watcher of that cluster, and the starter's commands on its Deployments, use workflow IDs deployment/<cluster>/<namespace>/<name> and the task queue "+contract.DefaultTaskQueue+".<cluster>; empty: one cluster")
	fs.String("temporal-tls-cert", "", "client certificate file for mTLS to Temporal")
	fs.String("temporal-tls-key", "", "client key file for mTLS to Temporal")
	fs.String("temporal-tls-ca", "", "CA bundle to verify the Temporal server")
	fs.String("temporal-tls-server-name", "", "server name to verify on the Temporal TLS connection")
	fs.String("temporal-api-key", "", "API key for Temporal Cloud (implies TLS)")
	fs.String("temporal-compression", CompressionNone, "gRPC compression of requests to Temporal (and so of its answers): none, or gzip (the SDK's default) where bandwidth to Temporal costs more than CPU")
	fs.Duration("startup-timeout", 30*time.Second, "how long each start-up wait (Temporal; for the worker and watcher also the Kubernetes API server and the informer caches) retries, logging progress, before the process exits non-zero")
}

// KubeFlags registers the connection to the Kubernetes API server and the namespace watched.
func KubeFlags(fs *pflag.FlagSet) {
	fs.String("kubeconfig", "", "kubeconfig path; in-cluster config when empty (also $KUBECONFIG)")
	fs.Float32("kube-qps", 20, "client-side QPS limit towards the Kubernetes API server")
	fs.Int("kube-burst", 30, "client-side burst towards the Kubernetes API server")
	fs.String("watch-namespace", "", "only manage Deployments in this namespace (all when empty)")
}

// ControllerFlags registers what the long-running controllers, the worker and the watcher,
// share: their metrics server (on metricsAddress by default), the mode, and the watcher's
// resync and StartFlags (the worker runs the watcher with --watch).
func ControllerFlags(fs *pflag.FlagSet, metricsAddress string) {
	fs.String("metrics-address", metricsAddress, "listen address for /metrics, /healthz and /readyz; empty disables (defaults: worker "+WorkerMetricsAddress+", starter watch "+WatcherMetricsAddress+")")
	fs.Bool("pprof", false, "serve Go's /debug/pprof/ on the metrics address (worker and watcher)")
	fs.String("mode", ModeFull, "worker and watcher: full (every Deployment; kube-controller-manager runs with --controllers=*,-deployment) or managed (only Deployments annotated temporal-rollout.io/managed: \"true\", beside kube-controller-manager's Deployment controller); both must agree")
	fs.Bool("managed-guard", false, "worker and watcher, managed mode: deploy/managed/guard.yaml's ReplicaSet policy is installed (it denies kube-controller-manager's deployment-controller any scale of a parked Deployment's ReplicaSets; needs --use-service-account-credentials on kube-controller-manager), so Recreate and maxSurge 0 are driven too")
	StartFlags(fs)
	fs.Duration("resync", 10*time.Minute, "watcher: how often to reconcile open workflows with the cluster (workflows of deleted Deployments end, Deployments without one get one, missed changes are signalled); 0 reconciles at start only")
}

// StartFlags registers what a process that starts workflows uses: the watcher, the worker
// with --watch, and the starter's commands that signal-with-start (sync, pause, resume,
// rollback).
func StartFlags(fs *pflag.FlagSet) {
	fs.Bool("search-attributes", false, "set the K8sNamespace/K8sDeployment search attributes on the workflows this process starts (watcher, worker --watch, starter sync, pause, resume and rollback); the worker and watcher check at start-up that all of contract.SearchAttributes are registered and exit naming the missing ones")
}

// ShutdownFlags registers the bound on a long-running process's stop (worker, watcher, codec
// server).
func ShutdownFlags(fs *pflag.FlagSet) {
	fs.Duration("shutdown-timeout", 15*time.Second, "how long the stop after SIGTERM or a failure may take before the process exits non-zero naming what did not stop")
}

// WorkerFlags registers the worker's own settings.
func WorkerFlags(fs *pflag.FlagSet) {
	fs.Int("workflow-cache-size", 2000, "worker: workflow executions kept in memory between their tasks (the SDK's sticky cache); one evicted replays its short history on its next task")
	fs.Int("max-concurrent-syncs", 20, "worker: workflow tasks (syncs) run at once; more wait in the task queue, not on the client rate limiter")
	fs.Duration("local-wait", 0, "worker: how long a rollout's wait for its next move runs first inside the workflow task that made the last move (a local activity), so a move within it costs no round trip through Temporal; signals, updates and queries to that workflow wait for it to end, so keep it at most 500ms; 0 (the default) always waits in the AwaitChange activity")
	fs.String("prometheus-address", "", "worker: Prometheus server (http://host:port) that analysis steps query; empty: analysis steps wait for promote")
	fs.String("ui-url", "", "worker: the Temporal UI's address (http://localhost:8233), which rollout notifications (the temporal-rollout.io/notify annotation) link to as <ui-url>/namespaces/<namespace>/workflows/<workflow-id>; empty: no link")
	fs.Bool("watch", false, "worker: run the watcher in this process too, on the worker's informer cache, so a created Deployment's workflow starts eagerly (its first workflow task comes back in the start's answer, to this worker, with no trip through matching); starter watch is then not needed")
	fs.Bool("held-at-rest", false, "worker: a watcher (starter watch) runs for this cluster and task queue beside the worker: a rollout held at a step with its pods settled waits with no activity and no heartbeats, woken by the watcher's signals (docs/capacity.md); always on with --watch")
	fs.Bool("releases", false, "worker: also run the release and fleet freeze workflows, on the \"releases\" task queue (docs/releases.md)")
	fs.String("release-policy", "", "worker: with --releases, the approval policy file (who may start a release, which waves need whose approval, the trusted keys; docs/releases.md#the-workers-policy); empty: unsigned starts, and no approval beyond the release files'")
}

// MaxLocalWait bounds --local-wait: a user's pause, promote or status query waits for a local
// wait to end, and must take effect within a second.
const MaxLocalWait = 500 * time.Millisecond

// Values of --temporal-compression.
const (
	CompressionNone = "none"
	CompressionGzip = "gzip"
)

// Load reads flags (already parsed on fs), environment and config file into a Config. Settings
// whose flags fs does not register keep their defaults (see CommonFlags and the other groups).
func Load(fs *pflag.FlagSet) (Config, error) {
	v := viper.New()
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_", ".", "_"))
	v.AutomaticEnv()
	if err := v.BindPFlags(fs); err != nil {
		return Config{}, fmt.Errorf("bind flags: %w", err)
	}
	// A setting whose flag fs lacks is not this command's: its default, over env and file.
	all := pflag.NewFlagSet("defaults", pflag.ContinueOnError)
	Flags(all)
	all.VisitAll(func(f *pflag.Flag) {
		if fs.Lookup(f.Name) == nil {
			v.Set(f.Name, f.DefValue)
		}
	})
	if err := v.BindEnv("kubeconfig", EnvPrefix+"_KUBECONFIG", "KUBECONFIG"); err != nil {
		return Config{}, fmt.Errorf("bind kubeconfig env: %w", err)
	}
	if path := v.GetString("config"); path != "" {
		v.SetConfigFile(path)
		if err := v.ReadInConfig(); err != nil {
			return Config{}, fmt.Errorf("read config file %s: %w", path, err)
		}
	}
	var c Config
	if err := v.Unmarshal(&c); err != nil {
		return Config{}, fmt.Errorf("decode config: %w", err)
	}
	// A named cluster's task queue, unless one is set (flag, environment or file).
	if c.Cluster != "" && !v.IsSet("task-queue") {
		c.TaskQueue = contract.TaskQueueFor(c.Cluster)
	}
	return c, c.Validate()
}

// Validate reports every bad setting at once.
func (c Config) Validate() error {
	var errs []error
	if c.KubeQPS <= 0 {
		errs = append(errs, fmt.Errorf("kube-qps must be > 0, got %v", c.KubeQPS))
	}
	if c.KubeBurst <= 0 {
		errs = append(errs, fmt.Errorf("kube-burst must be > 0, got %d", c.KubeBurst))
	}
	if c.TemporalAddress == "" || !strings.Contains(c.TemporalAddress, ":") {
		errs = append(errs, fmt.Errorf("temporal-address must be host:port, got %q", c.TemporalAddress))
	}
	if c.TemporalNamespace == "" {
		errs = append(errs, errors.New("temporal-namespace must not be empty"))
	}
	if c.TaskQueue == "" {
		errs = append(errs, errors.New("task-queue must not be empty"))
	}
	if err := contract.ValidateCluster(c.Cluster); err != nil {
		errs = append(errs, fmt.Errorf("cluster: %w", err))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("temporal-tls-cert and temporal-tls-key go together"))
	}
	type file struct{ flag, path string }
	var files []file
	for _, f := range filepath.SplitList(c.Kubeconfig) {
		files = append(files, file{"kubeconfig", f})
	}
	files = append(files, file{"temporal-tls-cert", c.TLSCert}, file{"temporal-tls-key", c.TLSKey}, file{"temporal-tls-ca", c.TLSCA})
	for _, f := range files {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: file %s: %w", f.flag, f.path, err))
		}
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if c.Compression != "" && c.Compression != CompressionNone && c.Compression != CompressionGzip {
		errs = append(errs, fmt.Errorf("temporal-compression must be %s or %s, got %q", CompressionNone, CompressionGzip, c.Compression))
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		errs = append(errs, fmt.Errorf("log-format must be json or text, got %q", c.LogFormat))
	}
	if c.Mode != "" && c.Mode != ModeFull && c.Mode != ModeManaged {
		errs = append(errs, fmt.Errorf("mode must be %s or %s, got %q", ModeFull, ModeManaged, c.Mode))
	}
	if c.Resync < 0 {
		errs = append(errs, fmt.Errorf("resync must be >= 0, got %s", c.Resync))
	}
	if c.WorkflowCacheSize <= 0 {
		errs = append(errs, fmt.Errorf("workflow-cache-size must be > 0, got %d", c.WorkflowCacheSize))
	}
	if c.LocalWait < 0 || c.LocalWait > MaxLocalWait {
		errs = append(errs, fmt.Errorf("local-wait must be between 0 and %s (signals, updates and queries wait for it), got %s", MaxLocalWait, c.LocalWait))
	}
	if c.MaxSyncs <= 0 {
		errs = append(errs, fmt.Errorf("max-concurrent-syncs must be > 0, got %d", c.MaxSyncs))
	}
	if c.StartupTimeout <= 0 {
		errs = append(errs, fmt.Errorf("startup-timeout must be > 0, got %s", c.StartupTimeout))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("shutdown-timeout must be > 0, got %s", c.ShutdownTimeout))
	}
	if c.UIURL != "" {
		if u, err := url.Parse(c.UIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("ui-url must be an http(s) URL like http://localhost:8233, got %q", c.UIURL))
		}
	}
	if c.CodecKeyFile != "" {
		if _, err := codec.Load(c.CodecKeyFile); err != nil {
			errs = append(errs, fmt.Errorf("codec-key-file: %w", err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid configuration: %w", errors.Join(errs...))
	}
	return nil
}

// ParseLevel maps a level name to slog.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("log-level must be debug, info, warn or error, got %q", s)
	}
	return l, nil
}

// Logger builds the process logger.
func (c Config) Logger() *slog.Logger {
	level, _ := ParseLevel(c.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts))
}

// Codec is the payload codec of --codec-key-file; nil when it is empty.
func (c Config) Codec() (*codec.Codec, error) {
	if c.CodecKeyFile == "" {
		return nil, nil
	}
	cd, err := codec.Load(c.CodecKeyFile)
	if err != nil {
		return nil, fmt.Errorf("codec-key-file: %w", err)
	}
	return cd, nil
}

// ClientOptions builds the Temporal client options, with TLS and API key when configured, and
// the payload codec with --codec-key-file. Secrets never go to logs.
func (c Config) ClientOptions() (client.Options, error) {
	opts := client.Options{HostPort: c.TemporalAddress, Namespace: c.TemporalNamespace}
	cd, err := c.Codec()
	if err != nil {
		return opts, err
	}
	if cd != nil {
		opts.DataConverter = cd.DataConverter()
		opts.FailureConverter = codec.FailureConverter(opts.DataConverter)
	}
	if c.Compression == CompressionGzip {
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionGzip{}
	} else {
		// Our payloads are a few KiB: gzip on every task poll, completion and heartbeat cost
		// the worker about 6% of its CPU, and the Temporal server as much again.
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	if c.TLSCert != "" || c.TLSCA != "" || c.APIKey != "" || c.TLSServerName != "" {
		tlsCfg := &tls.Config{ServerName: c.TLSServerName, MinVersion: tls.VersionTLS12}
		if c.TLSCert != "" {
			cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
			if err != nil {
				return opts, fmt.Errorf("load temporal client certificate: %w", err)
			}
			tlsCfg.Certificates = []tls.Certificate{cert}
		}
		if c.TLSCA != "" {
			pem, err := os.ReadFile(c.TLSCA)
			if err != nil {
				return opts, fmt.Errorf("read temporal CA %s: %w", c.TLSCA, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return opts, fmt.Errorf("temporal CA %s holds no PEM certificate", c.TLSCA)
			}
			tlsCfg.RootCAs = pool
		}
		opts.ConnectionOptions.TLS = tlsCfg
	}
	if c.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(c.APIKey)
	}
	return opts, nil
}

// Redacted is the config as it may be logged: secrets masked.
func (c Config) Redacted() Config {
	if c.APIKey != "" {
		c.APIKey = "***"
	}
	return c
}
