package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/temporal-rollout/rollout/contract"
)

// A production-like Temporal: the Temporal server (not the dev server) on PostgreSQL, with
// SQL visibility and several history shards, all four services (frontend, history, matching,
// worker) in one process, the way a small self-hosted cluster runs. hack/tools.sh builds the
// server and temporal-sql-tool from go.temporal.io/server and unpacks Debian's postgresql-15.
const (
	TemporalServerVersion = "v1.29.1"
	// PostgreSQLVersion is the version of Debian's postgresql-15 a tools cache that records
	// none holds (see DebianVersion).
	PostgreSQLVersion = "15.20-0+deb12u1"
	// DefaultHistoryShards is the shard count of a cluster stack (fixed at schema setup).
	DefaultHistoryShards = 4
)

// TemporalMode picks the Temporal under the stack.
type TemporalMode string

const (
	// TemporalDev is the Temporal CLI's dev server on SQLite, one history shard (the default).
	TemporalDev TemporalMode = "dev"
	// TemporalCluster is the Temporal server on PostgreSQL with Options.HistoryShards shards.
	TemporalCluster TemporalMode = "cluster"
)

// ParseTemporalMode reads E2E_TEMPORAL-style values: "" and "dev" are the dev server,
// "cluster" (or "postgres") the server on PostgreSQL.
func ParseTemporalMode(s string) (TemporalMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "dev":
		return TemporalDev, nil
	case "cluster", "postgres", "postgresql":
		return TemporalCluster, nil
	}
	return "", fmt.Errorf("temporal mode %q: want dev or cluster", s)
}

func pgBin(tools, name string) string {
	return filepath.Join(tools, "postgresql-"+DebianVersion(tools, "postgresql-15", PostgreSQLVersion), "usr", "lib", "postgresql", "15", "bin", name)
}

func serverTool(tools, name string) string {
	return filepath.Join(tools, "temporal-server-"+TemporalServerVersion, name)
}

// cluster is the state of a cluster-mode Temporal: PostgreSQL's folder and port and the
// server's configuration, kept across StopTemporal/StartTemporal.
type cluster struct {
	// root is a world-readable folder outside Opts.Dir when PostgreSQL must run as another
	// user (it refuses to run as root): the installation is copied there.
	root     string
	pgPort   int
	pgEnv    []string
	pgCred   *syscall.Credential
	confRoot string
}

// startCluster starts PostgreSQL, creates and migrates Temporal's two databases with
// temporal-sql-tool, writes the server's configuration, then starts the server (as
// StartTemporal does on restarts) and registers the default namespace and search attributes.
func (s *Stack) startCluster(ctx context.Context) error {
	o := s.Opts
	for _, p := range []string{pgBin(o.Tools, "postgres"), pgBin(o.Tools, "initdb"),
		serverTool(o.Tools, "temporal-server"), serverTool(o.Tools, "temporal-sql-tool")} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("tool %s missing (run `make tools`): %w", p, err)
		}
	}
	c := &cluster{}
	s.cluster = c
	root, err := os.MkdirTemp("", "rollout-pg-")
	if err != nil {
		return err
	}
	c.root = root
	install := filepath.Join(o.Tools, "postgresql-"+DebianVersion(o.Tools, "postgresql-15", PostgreSQLVersion))
	if os.Geteuid() == 0 {
		// postgres and initdb refuse to run as root: run them as nobody, from a copy of the
		// installation it can read (the tools cache is usually under root's 0700 home).
		u, err := user.Lookup("nobody")
		if err != nil {
			return fmt.Errorf("postgres cannot run as root and there is no user nobody: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.pgCred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		if err := os.Chmod(root, 0o755); err != nil {
			return err
		}
		if out, err := exec.Command("cp", "-a", install, filepath.Join(root, "install")).CombinedOutput(); err != nil {
			return fmt.Errorf("copy postgresql: %v: %s", err, out)
		}
		install = filepath.Join(root, "install")
	}
	bin := filepath.Join(install, "usr", "lib", "postgresql", "15", "bin")
	// Libraries the machine lacked, unpacked beside it by hack/tools.sh.
	c.pgEnv = []string{"LD_LIBRARY_PATH=" + filepath.Join(install, "usr", "lib", "x86_64-linux-gnu")}
	data := filepath.Join(root, "data")
	sock := filepath.Join(root, "sock")
	for _, d := range []string{data, sock} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		if c.pgCred != nil {
			if err := os.Chown(d, int(c.pgCred.Uid), int(c.pgCred.Gid)); err != nil {
				return err
			}
		}
	}
	s.progress("postgresql %s: initdb in %s", DebianVersion(o.Tools, "postgresql-15", PostgreSQLVersion), data)
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "temporal",
		"--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync")
	initdb.Env = append(os.Environ(), c.pgEnv...)
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: c.pgCred}
	initdb.Dir = root
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v: %s", err, tail(out, 2000))
	}
	if c.pgPort, err = FreePort(); err != nil {
		return err
	}
	// synchronous_commit=off: a commit survives a crash of the server process (the WAL is
	// written), not of the machine; fsync stays on.
	pgArgs := []string{"-D", data, "-p", strconv.Itoa(c.pgPort), "-k", sock,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", "synchronous_commit=off",
		"-c", "shared_buffers=128MB"}
	s.progress("postgresql on 127.0.0.1:%d", c.pgPort)
	p, err := startProc(o.Dir, "postgres", filepath.Join(bin, "postgres"), pgArgs, c.pgEnv, c.pgCred)
	if err != nil {
		return err
	}
	s.procs["postgres"] = p
	s.order = append(s.order, "postgres")
	if err := s.sqlSetup(ctx); err != nil {
		return err
	}
	if err := s.writeServerConfig(); err != nil {
		return err
	}
	if err := s.startServer(ctx); err != nil {
		return err
	}
	return s.registerNamespace(ctx)
}

// sqlSetup creates the temporal and temporal_visibility databases and brings their schemas to
// the server's version with temporal-sql-tool, retrying while PostgreSQL starts.
func (s *Stack) sqlSetup(ctx context.Context) error {
	tool := serverTool(s.Opts.Tools, "temporal-sql-tool")
	schema := filepath.Join(s.Opts.Tools, "temporal-server-"+TemporalServerVersion, "schema", "postgresql", "v12")
	base := []string{"--plugin", "postgres12", "--endpoint", "127.0.0.1", "--port", strconv.Itoa(s.cluster.pgPort),
		"--user", "temporal", "--password", "temporal"}
	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, tool, append(append([]string{}, base...), args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("temporal-sql-tool %s: %v: %s", strings.Join(args, " "), err, tail(out, 2000))
		}
		return nil
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if ok, err := s.procs["postgres"].Exited(); ok {
			return fmt.Errorf("postgres exited (%v); log tail:\n%s", err, s.procs["postgres"].Tail(2000))
		}
		err := run("--database", "temporal", "create-database")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgresql not ready after 60s: %w", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	s.progress("temporal-sql-tool: schemas for %s, %d history shards", TemporalServerVersion, s.Opts.HistoryShards)
	steps := [][]string{
		{"--database", "temporal", "setup-schema", "-v", "0.0"},
		{"--database", "temporal", "update-schema", "-d", filepath.Join(schema, "temporal", "versioned")},
		{"--database", "temporal_visibility", "create-database"},
		{"--database", "temporal_visibility", "setup-schema", "-v", "0.0"},
		{"--database", "temporal_visibility", "update-schema", "-d", filepath.Join(schema, "visibility", "versioned")},
	}
	for _, st := range steps {
		if err := run(st...); err != nil {
			return err
		}
	}
	return nil
}

// writeServerConfig writes ROOT/config/development.yaml and the dynamic configuration: free
// loopback ports for the four services, PostgreSQL for persistence and visibility.
func (s *Stack) writeServerConfig() error {
	c := s.cluster
	ports := make([]int, 10)
	for i := range ports {
		// Ports are stored as PostgreSQL smallint (cluster_membership.rpc_port): they must
		// be below 32768, under the kernel's ephemeral range.
		p, err := freeLowPort(ports[:i])
		if err != nil {
			return err
		}
		ports[i] = p
	}
	if s.Opts.TemporalPort != 0 {
		ports[0] = s.Opts.TemporalPort
	}
	s.TemporalAddress = fmt.Sprintf("127.0.0.1:%d", ports[0])
	s.UIAddress = ""
	// The server's Prometheus endpoint, as the dev server's (--metrics-port): its heartbeat and
	// persistence counters, which make bench reads.
	s.TemporalMetrics = fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[9])
	c.confRoot = filepath.Join(s.Opts.Dir, "temporal-server")
	if err := os.MkdirAll(filepath.Join(c.confRoot, "config", "dynamicconfig"), 0o755); err != nil {
		return err
	}
	store := func(db string, conns int) string {
		return fmt.Sprintf(`      sql:
        pluginName: "postgres12"
        databaseName: "%s"
        connectAddr: "127.0.0.1:%d"
        connectProtocol: "tcp"
        user: "temporal"
        password: "temporal"
        maxConns: %d
        maxIdleConns: %d
        maxConnLifetime: "1h"
`, db, c.pgPort, conns, conns)
	}
	pprof := ""
	if s.Opts.ServerPprofPort != 0 {
		pprof = fmt.Sprintf("  pprof:\n    port: %d\n    host: \"127.0.0.1\"\n", s.Opts.ServerPprofPort)
	}
	conf := fmt.Sprintf(`log:
  stdout: true
  level: warn
persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: %d
  datastores:
    postgres-default:
%s    postgres-visibility:
%sglobal:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: "127.0.0.1"
  metrics:
    prometheus:
      listenAddress: "127.0.0.1:%d"
      handlerPath: "/metrics"
%sservices:
  frontend:
    rpc: {grpcPort: %d, membershipPort: %d, httpPort: %d, bindOnLocalHost: true}
  history:
    rpc: {grpcPort: %d, membershipPort: %d, bindOnLocalHost: true}
  matching:
    rpc: {grpcPort: %d, membershipPort: %d, bindOnLocalHost: true}
  worker:
    rpc: {grpcPort: %d, membershipPort: %d, bindOnLocalHost: true}
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: "active"
  currentClusterName: "active"
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: "frontend"
      rpcAddress: "127.0.0.1:%d"
dcRedirectionPolicy:
  policy: "noop"
dynamicConfigClient:
  filepath: "%s"
  pollInterval: "10s"
`, s.Opts.HistoryShards, store("temporal", 40), store("temporal_visibility", 10), ports[9], pprof,
		ports[0], ports[1], ports[2], ports[3], ports[4], ports[5], ports[6], ports[7], ports[8], ports[0],
		filepath.Join(c.confRoot, "config", "dynamicconfig", "dynamic.yaml"))
	var dyn strings.Builder
	for _, kv := range ServerDynamicConfig {
		fmt.Fprintf(&dyn, "%s:\n  - value: %s\n", kv.Key, kv.Value)
	}
	if err := os.WriteFile(filepath.Join(c.confRoot, "config", "development.yaml"), []byte(conf), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.confRoot, "config", "dynamicconfig", "dynamic.yaml"), []byte(dyn.String()), 0o644)
}

// startServer starts the Temporal server on the written configuration and waits until its
// frontend answers.
func (s *Stack) startServer(ctx context.Context) error {
	s.progress("temporal server %s on %s (PostgreSQL, %d history shards)", TemporalServerVersion, s.TemporalAddress, s.Opts.HistoryShards)
	if _, err := s.start("temporal", serverTool(s.Opts.Tools, "temporal-server"),
		"--root", s.cluster.confRoot, "--config", "config", "--env", "development", "--allow-no-auth", "start"); err != nil {
		return err
	}
	return s.waitTemporal(ctx, 120*time.Second)
}

// registerNamespace registers the default namespace (the dev server has it built in) and our
// search attributes on it, then waits until the frontend sees both: a fresh cluster caches
// namespaces for up to 10s.
func (s *Stack) registerNamespace(ctx context.Context) error {
	c, err := client.Dial(client.Options{HostPort: s.TemporalAddress, Logger: quietLogger{}})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        "default",
		WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace default: %w", err)
	}
	attrs := map[string]enumspb.IndexedValueType{}
	for _, sa := range contract.SearchAttributes() {
		attrs[sa.Name] = sa.Type
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace: "default", SearchAttributes: attrs,
		})
		var already *serviceerror.AlreadyExists
		if err == nil || errors.As(err, &already) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("add search attributes: %w", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for {
		resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
		if err == nil && len(resp.GetCustomAttributes()) >= len(attrs) {
			_, err = c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"})
			if err == nil {
				// Start a no-op list to make sure the frontend's namespace cache has it.
				_, err = c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", PageSize: 1})
			}
			if err == nil {
				s.progress("temporal namespace default and %d search attributes registered", len(attrs))
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace default not ready after 60s: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// stopCluster removes the PostgreSQL folder outside Opts.Dir (Stop has stopped postgres).
func (s *Stack) stopCluster() {
	if s.cluster != nil && s.cluster.root != "" {
		os.RemoveAll(s.cluster.root)
		s.cluster.root = ""
	}
}

// freeLowPort returns a free loopback port in [20000, 32768), not one of taken.
func freeLowPort(taken []int) (int, error) {
	start := 20000 + int(time.Now().UnixNano()%12000)
	for i := 0; i < 12768; i++ {
		p := 20000 + (start-20000+i)%12768
		if slices.Contains(taken, p) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			l.Close()
			return p, nil
		}
	}
	return 0, errors.New("no free loopback port below 32768")
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
