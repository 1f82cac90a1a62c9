package config

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/temporal-rollout/rollout/codec"
	"github.com/temporal-rollout/rollout/contract"
)

// clearEnv blanks every variable Load reads, so the caller's environment cannot leak in.
// Viper treats an empty variable as unset.
func clearEnv(t *testing.T) {
	t.Helper()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	Flags(fs)
	fs.VisitAll(func(f *pflag.Flag) {
		t.Setenv(EnvPrefix+"_"+strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")), "")
	})
	t.Setenv("KUBECONFIG", "")
}

// load parses args with Flags and runs Load.
func load(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return Load(fs)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// defaults is what Load returns with no flags, environment or file.
func defaults() Config {
	return Config{
		KubeQPS: 20, KubeBurst: 30,
		TemporalAddress: "localhost:7233", TemporalNamespace: "default", TaskQueue: contract.DefaultTaskQueue, Compression: CompressionNone,
		MetricsAddress: ":9090", LogLevel: "info", LogFormat: "json",
		Resync: 10 * time.Minute, MaxSyncs: 20,
		StartupTimeout: 30 * time.Second, ShutdownTimeout: 15 * time.Second, WorkflowCacheSize: 2000, Mode: ModeFull,
	}
}

func TestLoadPrecedence(t *testing.T) {
	file := `
kube-qps: 5
kube-burst: 50
watch-namespace: from-file
temporal-address: file:7233
log-level: debug
resync: 1m
search-attributes: true
watch: true
`
	tests := []struct {
		name     string
		giveArgs []string // --config is added when giveFile is set
		giveEnv  map[string]string
		giveFile string // YAML config file content; "" for none
		want     func(*Config)
	}{
		{
			name: "defaults",
			want: func(*Config) {},
		},
		{
			name:     "file beats defaults",
			giveFile: file,
			want: func(c *Config) {
				c.KubeQPS, c.KubeBurst, c.WatchNamespace, c.TemporalAddress = 5, 50, "from-file", "file:7233"
				c.LogLevel, c.Resync, c.SearchAttributes, c.Watch = "debug", time.Minute, true, true
			},
		},
		{
			name:     "env beats file",
			giveFile: file,
			giveEnv: map[string]string{
				"ROLLOUT_KUBE_QPS": "7", "ROLLOUT_TEMPORAL_ADDRESS": "env:7233",
				"ROLLOUT_RESYNC": "3s", "ROLLOUT_SEARCH_ATTRIBUTES": "false", "ROLLOUT_LOG_LEVEL": "warn",
			},
			want: func(c *Config) {
				c.KubeQPS, c.KubeBurst, c.WatchNamespace, c.TemporalAddress = 7, 50, "from-file", "env:7233"
				c.LogLevel, c.Resync, c.SearchAttributes, c.Watch = "warn", 3*time.Second, false, true
			},
		},
		{
			name:     "flags beat env and file",
			giveArgs: []string{"--kube-qps=9", "--temporal-address=flag:7233", "--resync=0s", "--log-format=text", "--log-level=error", "--watch=false"},
			giveFile: file,
			giveEnv: map[string]string{
				"ROLLOUT_KUBE_QPS": "7", "ROLLOUT_TEMPORAL_ADDRESS": "env:7233", "ROLLOUT_LOG_FORMAT": "json",
				"ROLLOUT_RESYNC": "3s", "ROLLOUT_LOG_LEVEL": "warn",
			},
			want: func(c *Config) {
				c.KubeQPS, c.KubeBurst, c.WatchNamespace, c.TemporalAddress = 9, 50, "from-file", "flag:7233"
				c.LogLevel, c.LogFormat, c.Resync, c.SearchAttributes = "error", "text", 0, true
			},
		},
		{
			name:    "env alone beats defaults",
			giveEnv: map[string]string{"ROLLOUT_TASK_QUEUE": "tq", "ROLLOUT_TEMPORAL_API_KEY": "secret", "ROLLOUT_KUBE_BURST": "3"},
			want: func(c *Config) {
				c.TaskQueue, c.APIKey, c.KubeBurst = "tq", "secret", 3
			},
		},
		{
			name:     "cluster picks its task queue",
			giveArgs: []string{"--cluster=eu"},
			want:     func(c *Config) { c.Cluster, c.TaskQueue = "eu", "deployment-controller.eu" },
		},
		{
			name:    "cluster from env",
			giveEnv: map[string]string{"ROLLOUT_CLUSTER": "us-east"},
			want:    func(c *Config) { c.Cluster, c.TaskQueue = "us-east", "deployment-controller.us-east" },
		},
		{
			name:     "a task queue set by flag wins over the cluster's",
			giveArgs: []string{"--cluster=eu", "--task-queue=mine"},
			want:     func(c *Config) { c.Cluster, c.TaskQueue = "eu", "mine" },
		},
		{
			name:     "a task queue set in the file wins over the cluster's",
			giveArgs: []string{"--cluster=eu"},
			giveFile: "task-queue: from-file\n",
			want:     func(c *Config) { c.Cluster, c.TaskQueue = "eu", "from-file" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.giveEnv {
				t.Setenv(k, v)
			}
			args := tt.giveArgs
			if tt.giveFile != "" {
				args = append([]string{"--config", writeFile(t, "rollout.yaml", tt.giveFile)}, args...)
			}

			got, err := load(t, args...)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := defaults()
			tt.want(&want)
			if got != want {
				t.Errorf("Load(%q) = %+v, want %+v", args, got, want)
			}
		})
	}
}

// The config file can itself come from the environment.
func TestLoadConfigFileFromEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv("ROLLOUT_CONFIG", writeFile(t, "rollout.yaml", "temporal-namespace: from-file\n"))
	got, err := load(t)
	if err != nil {
		t.Fatal(err)
	}
	if got.TemporalNamespace != "from-file" {
		t.Errorf("TemporalNamespace = %q, want %q", got.TemporalNamespace, "from-file")
	}
}

func TestLoadKubeconfig(t *testing.T) {
	dir := t.TempDir()
	path := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flagPath, prefixed, plain := path("flag"), path("prefixed"), path("plain")

	tests := []struct {
		name     string
		giveArgs []string
		giveEnv  map[string]string
		want     string
	}{
		{name: "none: in-cluster", want: ""},
		{name: "KUBECONFIG when nothing else is set", giveEnv: map[string]string{"KUBECONFIG": plain}, want: plain},
		{name: "ROLLOUT_KUBECONFIG beats KUBECONFIG", giveEnv: map[string]string{"KUBECONFIG": plain, "ROLLOUT_KUBECONFIG": prefixed}, want: prefixed},
		{
			name:     "--kubeconfig beats both",
			giveArgs: []string{"--kubeconfig", flagPath},
			giveEnv:  map[string]string{"KUBECONFIG": plain, "ROLLOUT_KUBECONFIG": prefixed},
			want:     flagPath,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.giveEnv {
				t.Setenv(k, v)
			}
			got, err := load(t, tt.giveArgs...)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got.Kubeconfig != tt.want {
				t.Errorf("Kubeconfig = %q, want %q", got.Kubeconfig, tt.want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name     string
		giveArgs []string
		giveEnv  map[string]string
		want     []string // substrings of the error
	}{
		{
			name:     "missing config file",
			giveArgs: []string{"--config", filepath.Join(t.TempDir(), "absent.yaml")},
			want:     []string{"read config file"},
		},
		{
			name:     "malformed config file",
			giveArgs: []string{"--config", writeFile(t, "bad.yaml", "kube-qps: [1, 2\n")},
			want:     []string{"read config file"},
		},
		{
			name:    "undecodable env value",
			giveEnv: map[string]string{"ROLLOUT_RESYNC": "soon"},
			want:    []string{"decode config"},
		},
		{
			name:    "codec key file from the environment, unreadable",
			giveEnv: map[string]string{"ROLLOUT_CODEC_KEY_FILE": filepath.Join(t.TempDir(), "absent.keys")},
			want:    []string{"invalid configuration", "codec-key-file: read codec key file", "absent.keys"},
		},
		{
			name:     "codec key file of the wrong length",
			giveArgs: []string{"--codec-key-file", writeFile(t, "short.keys", "k1="+base64.StdEncoding.EncodeToString(make([]byte, 16))+"\n")},
			want:     []string{"codec-key-file: codec key file", "short.keys", `line 1: key "k1" is 16 bytes, want 32`},
		},
		{
			name:    "invalid values are validated",
			giveEnv: map[string]string{"ROLLOUT_KUBE_QPS": "-1", "ROLLOUT_LOG_FORMAT": "xml"},
			want:    []string{"invalid configuration", "kube-qps must be > 0", "log-format must be json or text"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.giveEnv {
				t.Setenv(k, v)
			}
			_, err := load(t, tt.giveArgs...)
			if err == nil {
				t.Fatalf("Load(%q) error = nil, want one containing %q", tt.giveArgs, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Load error = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	existing := writeFile(t, "exists", "x")
	keyFile := writeFile(t, "codec.keys", testKeyLine)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := []struct {
		name string
		give func(*Config)
		want []string // substrings, one per expected error; nil for valid
	}{
		{name: "defaults are valid", give: func(*Config) {}},
		{
			name: "TLS files that exist are valid",
			give: func(c *Config) { c.TLSCert, c.TLSKey, c.TLSCA, c.Kubeconfig = existing, existing, existing, existing },
		},
		{
			name: "several errors at once",
			give: func(c *Config) {
				c.KubeQPS = 0
				c.LogLevel = "loud"
				c.TLSCert = existing
				c.Kubeconfig = missing
			},
			want: []string{
				"kube-qps must be > 0, got 0",
				`log-level must be debug, info, warn or error, got "loud"`,
				"temporal-tls-cert and temporal-tls-key go together",
				"file " + missing + ":",
			},
		},
		{name: "key without cert", give: func(c *Config) { c.TLSKey = existing }, want: []string{"go together"}},
		{name: "unreadable CA", give: func(c *Config) { c.TLSCA = missing }, want: []string{"file " + missing}},
		{name: "burst", give: func(c *Config) { c.KubeBurst = 0 }, want: []string{"kube-burst must be > 0"}},
		{name: "no workflow cache", give: func(c *Config) { c.WorkflowCacheSize = 0 }, want: []string{"workflow-cache-size must be > 0, got 0"}},
		{name: "no start-up wait", give: func(c *Config) { c.StartupTimeout = 0 }, want: []string{"startup-timeout must be > 0, got 0s"}},
		{name: "negative shutdown bound", give: func(c *Config) { c.ShutdownTimeout = -time.Second }, want: []string{"shutdown-timeout must be > 0, got -1s"}},
		{name: "address without port", give: func(c *Config) { c.TemporalAddress = "localhost" }, want: []string{"temporal-address must be host:port"}},
		{name: "empty namespace and queue", give: func(c *Config) { c.TemporalNamespace, c.TaskQueue = "", "" }, want: []string{"temporal-namespace", "task-queue"}},
		{name: "cluster with a slash", give: func(c *Config) { c.Cluster = "eu/west" }, want: []string{`cluster: invalid cluster name "eu/west"`}},
		{name: "cluster in capitals", give: func(c *Config) { c.Cluster = "EU" }, want: []string{`cluster: invalid cluster name "EU"`}},
		{name: "log format", give: func(c *Config) { c.LogFormat = "xml" }, want: []string{"log-format"}},
		{name: "negative resync", give: func(c *Config) { c.Resync = -time.Second }, want: []string{"resync must be >= 0, got -1s"}},
		{name: "zero resync reconciles at start only", give: func(c *Config) { c.Resync = 0 }},
		{name: "no concurrent syncs", give: func(c *Config) { c.MaxSyncs = 0 }, want: []string{"max-concurrent-syncs must be > 0, got 0"}},
		{name: "gzip", give: func(c *Config) { c.Compression = CompressionGzip }},
		{name: "unknown compression", give: func(c *Config) { c.Compression = "zstd" }, want: []string{`temporal-compression must be none or gzip, got "zstd"`}},
		{name: "codec key file", give: func(c *Config) { c.CodecKeyFile = keyFile }},
		{name: "ui url", give: func(c *Config) { c.UIURL = "http://localhost:8233" }},
		{name: "ui url without scheme", give: func(c *Config) { c.UIURL = "localhost:8233" }, want: []string{`ui-url must be an http(s) URL like http://localhost:8233, got "localhost:8233"`}},
		{name: "codec key file missing", give: func(c *Config) { c.CodecKeyFile = missing }, want: []string{"codec-key-file: read codec key file: open " + missing}},
		{name: "not a codec key file", give: func(c *Config) { c.CodecKeyFile = existing }, want: []string{"codec-key-file: codec key file " + existing + ": line 1: want ID=BASE64KEY"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaults()
			tt.give(&c)
			err := c.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %d errors", len(tt.want))
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
			// errors.Join puts one error per line after the "invalid configuration:" prefix.
			if got := len(strings.Split(err.Error(), "\n")); got != len(tt.want) {
				t.Errorf("Validate() reported %d errors, want %d: %q", got, len(tt.want), err)
			}
		})
	}
}

func TestParseLevel(t *testing.T) {
	tests := []struct {
		give    string
		want    slog.Level
		wantErr bool
	}{
		{give: "debug", want: slog.LevelDebug},
		{give: "info", want: slog.LevelInfo},
		{give: "WARN", want: slog.LevelWarn},
		{give: "error", want: slog.LevelError},
		{give: "loud", wantErr: true},
		{give: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := ParseLevel(tt.give)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseLevel(%q) error = %v, want error %t", tt.give, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseLevel(%q) = %v, want %v", tt.give, got, tt.want)
			}
		})
	}
}

func TestLogger(t *testing.T) {
	tests := []struct {
		name      string
		give      Config
		wantDebug bool
	}{
		{name: "debug text", give: Config{LogLevel: "debug", LogFormat: "text"}, wantDebug: true},
		{name: "info json", give: Config{LogLevel: "info", LogFormat: "json"}, wantDebug: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.give.Logger().Enabled(context.Background(), slog.LevelDebug); got != tt.wantDebug {
				t.Errorf("debug enabled = %t, want %t", got, tt.wantDebug)
			}
		})
	}
}

func TestRedacted(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string
	}{
		{name: "API key is masked", give: "tc-secret-key", want: "***"},
		{name: "no API key stays empty", give: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaults()
			c.APIKey = tt.give
			got := c.Redacted()
			if got.APIKey != tt.want {
				t.Errorf("Redacted().APIKey = %q, want %q", got.APIKey, tt.want)
			}
			if c.APIKey != tt.give {
				t.Errorf("original APIKey = %q after Redacted, want %q", c.APIKey, tt.give)
			}
			got.APIKey = c.APIKey
			if got != c {
				t.Errorf("Redacted() = %+v, want only the API key changed from %+v", got, c)
			}
		})
	}
}

// selfSigned writes a throwaway self-signed certificate and its key as PEM files.
func selfSigned(t *testing.T, dir, name string) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		DNSNames:              []string{name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = filepath.Join(dir, name+".crt")
	keyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert
}

// TestClientOptionsCompression: --temporal-compression gzip turns the SDK's gzip back on.
func TestClientOptionsCompression(t *testing.T) {
	for give, wantGzip := range map[string]bool{"": false, CompressionNone: false, CompressionGzip: true} {
		c := defaults()
		c.Compression = give
		got, err := c.ClientOptions()
		if err != nil {
			t.Fatal(err)
		}
		_, none := got.ConnectionOptions.GrpcCompression.(*client.GrpcCompressionNone)
		_, gzip := got.ConnectionOptions.GrpcCompression.(*client.GrpcCompressionGzip)
		if gzip != wantGzip || none == wantGzip {
			t.Errorf("compression %q: GrpcCompression = %T, want gzip %t", give, got.ConnectionOptions.GrpcCompression, wantGzip)
		}
	}
}

func TestClientOptions(t *testing.T) {
	dir := t.TempDir()
	caFile, _, caCert := selfSigned(t, dir, "ca")
	certFile, keyFile, clientCert := selfSigned(t, dir, "client")
	_, otherKey, _ := selfSigned(t, dir, "other")
	notPEM := writeFile(t, "ca.txt", "not a certificate")
	caPool := x509.NewCertPool()
	caPool.AddCert(caCert)

	type want struct {
		tls         bool
		serverName  string
		certs       int
		rootCAs     *x509.CertPool
		credentials bool
		err         string // substring; "" for none
	}
	tests := []struct {
		name string
		give func(*Config)
		want want
	}{
		{name: "plain", give: func(*Config) {}, want: want{}},
		{
			name: "CA and server name",
			give: func(c *Config) { c.TLSCA, c.TLSServerName = caFile, "temporal.example" },
			want: want{tls: true, serverName: "temporal.example", rootCAs: caPool},
		},
		{
			name: "mTLS",
			give: func(c *Config) { c.TLSCert, c.TLSKey, c.TLSCA = certFile, keyFile, caFile },
			want: want{tls: true, certs: 1, rootCAs: caPool},
		},
		{
			name: "API key implies TLS",
			give: func(c *Config) { c.APIKey = "tc-secret-key" },
			want: want{tls: true, credentials: true},
		},
		{
			name: "server name alone turns TLS on",
			give: func(c *Config) { c.TLSServerName = "temporal.example" },
			want: want{tls: true, serverName: "temporal.example"},
		},
		{
			name: "key that does not match the certificate",
			give: func(c *Config) { c.TLSCert, c.TLSKey = certFile, otherKey },
			want: want{err: "load temporal client certificate"},
		},
		{
			name: "CA file without a certificate",
			give: func(c *Config) { c.TLSCA = notPEM },
			want: want{err: "holds no PEM certificate"},
		},
		{
			name: "CA file that cannot be read",
			give: func(c *Config) { c.TLSCA = filepath.Join(dir, "absent.pem") },
			want: want{err: "read temporal CA"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaults()
			c.TemporalAddress, c.TemporalNamespace = "temporal.example:7233", "prod"
			tt.give(&c)

			got, err := c.ClientOptions()
			if _, ok := got.ConnectionOptions.GrpcCompression.(*client.GrpcCompressionNone); err == nil && !ok {
				t.Errorf("GrpcCompression = %T, want none by default", got.ConnectionOptions.GrpcCompression)
			}
			if tt.want.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want.err) {
					t.Fatalf("ClientOptions() error = %v, want one containing %q", err, tt.want.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ClientOptions() error = %v", err)
			}
			if got.HostPort != "temporal.example:7233" || got.Namespace != "prod" {
				t.Errorf("HostPort, Namespace = %q, %q, want %q, %q", got.HostPort, got.Namespace, "temporal.example:7233", "prod")
			}
			tlsCfg := got.ConnectionOptions.TLS
			if (tlsCfg != nil) != tt.want.tls {
				t.Fatalf("TLS = %v, want enabled %t", tlsCfg, tt.want.tls)
			}
			if (got.Credentials != nil) != tt.want.credentials {
				t.Errorf("Credentials = %v, want set %t", got.Credentials, tt.want.credentials)
			}
			if tlsCfg == nil {
				return
			}
			if tlsCfg.MinVersion != tls.VersionTLS12 {
				t.Errorf("MinVersion = %x, want %x", tlsCfg.MinVersion, tls.VersionTLS12)
			}
			if tlsCfg.ServerName != tt.want.serverName {
				t.Errorf("ServerName = %q, want %q", tlsCfg.ServerName, tt.want.serverName)
			}
			if len(tlsCfg.Certificates) != tt.want.certs {
				t.Fatalf("Certificates = %d, want %d", len(tlsCfg.Certificates), tt.want.certs)
			}
			if tt.want.certs > 0 && !reflect.DeepEqual(tlsCfg.Certificates[0].Certificate[0], clientCert.Raw) {
				t.Errorf("client certificate is not the configured one")
			}
			switch {
			case tt.want.rootCAs == nil && tlsCfg.RootCAs != nil:
				t.Errorf("RootCAs set, want the system pool (nil)")
			case tt.want.rootCAs != nil && (tlsCfg.RootCAs == nil || !tlsCfg.RootCAs.Equal(tt.want.rootCAs)):
				t.Errorf("RootCAs is not the configured CA")
			}
		})
	}
}

// TestKubeconfigList: KUBECONFIG may hold several files, as kubectl allows.
func TestKubeconfigList(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, f := range []string{a, b} {
		if err := os.WriteFile(f, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := Config{Kubeconfig: a + string(os.PathListSeparator) + b, KubeQPS: 1, KubeBurst: 1, TemporalAddress: "h:1",
		TemporalNamespace: "default", TaskQueue: "q", LogLevel: "info", LogFormat: "json", MaxSyncs: 1,
		StartupTimeout: time.Second, ShutdownTimeout: time.Second, WorkflowCacheSize: 1}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() with a kubeconfig list = %v, want nil", err)
	}
	c.Kubeconfig = a + string(os.PathListSeparator) + filepath.Join(dir, "missing")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Validate() with a missing file in the list = %v, want an error naming it", err)
	}
}

// TestWatcherFlags: the watcher's pacing flags are gone (the worker's AwaitChange paces
// rollouts now); resync is the watcher's one knob, 10m by default.
func TestWatcherFlags(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	Flags(fs)
	tests := []struct {
		give        string
		want        bool   // registered
		wantDefault string // checked when registered
	}{
		{give: "resync", want: true, wantDefault: "10m0s"},
		{give: "search-attributes", want: true, wantDefault: "false"},
		{give: "watch", want: true, wantDefault: "false"},
		{give: "coalesce"},
		{give: "min-signal-interval"},
		{give: "max-signal-interval"},
		{give: "status-signal-interval"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			f := fs.Lookup(tt.give)
			if got := f != nil; got != tt.want {
				t.Fatalf("flag --%s registered = %t, want %t", tt.give, got, tt.want)
			}
			if f != nil && f.DefValue != tt.wantDefault {
				t.Errorf("--%s default = %q, want %q", tt.give, f.DefValue, tt.wantDefault)
			}
		})
	}
	if err := fs.Parse([]string{"--coalesce=1s"}); err == nil {
		t.Errorf("parse --coalesce=1s error = nil, want unknown flag")
	}
}

// The worker and the watcher started on one host with their defaults serve metrics on
// different ports (issue 10: both took :9090 and the second one hung).
func TestMetricsAddressDefaultsDiffer(t *testing.T) {
	for _, tt := range []struct {
		name  string
		flags func(*pflag.FlagSet)
		want  string
	}{
		{"worker", Flags, ":9090"},
		{"starter watch", WatcherFlags, ":9091"},
	} {
		fs := pflag.NewFlagSet(tt.name, pflag.ContinueOnError)
		tt.flags(fs)
		c, err := Load(fs)
		if err != nil {
			t.Fatal(err)
		}
		if c.MetricsAddress != tt.want {
			t.Errorf("%s: default metrics address %q, want %q", tt.name, c.MetricsAddress, tt.want)
		}
	}
}

// testKeyLine is a valid codec key file.
var testKeyLine = "k1=" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")) + "\n"

// TestClientOptionsCodec: --codec-key-file puts the codec on every client: payloads and
// failures leave encrypted.
func TestClientOptionsCodec(t *testing.T) {
	tests := []struct {
		name string
		give string // codec-key-file
		want bool   // payloads encrypted
	}{
		{name: "off by default"},
		{name: "on with a key file", give: writeFile(t, "codec.keys", testKeyLine), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaults()
			c.CodecKeyFile = tt.give
			got, err := c.ClientOptions()
			if err != nil {
				t.Fatal(err)
			}
			if (got.DataConverter != nil) != tt.want || (got.FailureConverter != nil) != tt.want {
				t.Fatalf("DataConverter, FailureConverter = %v, %v, want set %t", got.DataConverter, got.FailureConverter, tt.want)
			}
			if !tt.want {
				return
			}
			p, err := got.DataConverter.ToPayload("kubernetes.io/change-cause")
			if err != nil {
				t.Fatal(err)
			}
			if enc := string(p.Metadata[converter.MetadataEncoding]); enc != codec.MetadataEncodingEncrypted || strings.Contains(string(p.Data), "change-cause") {
				t.Errorf("payload encoding %q, data %q, want it encrypted", enc, p.Data)
			}
			f := got.FailureConverter.ErrorToFailure(errors.New("scale replicaset web-abc: secret"))
			if strings.Contains(f.GetMessage(), "secret") || f.GetEncodedAttributes() == nil {
				t.Errorf("failure message %q, want it moved into the encrypted attributes", f.GetMessage())
			}
		})
	}
}

// workerFlagNames is every flag the worker has had since the flags were split into groups: the
// split must keep each one.
var workerFlagNames = []string{
	"cluster", "codec-key-file", "config", "held-at-rest", "kube-burst", "kube-qps", "kubeconfig", "local-wait", "log-format", "log-level",
	"managed-guard", "max-concurrent-syncs", "metrics-address", "mode", "pprof", "prometheus-address", "release-policy", "releases", "resync",
	"search-attributes", "shutdown-timeout", "startup-timeout", "task-queue", "temporal-address", "temporal-api-key",
	"temporal-compression", "temporal-namespace", "temporal-tls-ca", "temporal-tls-cert", "temporal-tls-key",
	"temporal-tls-server-name", "ui-url", "watch", "watch-namespace", "workflow-cache-size",
}

func flagNames(register func(*pflag.FlagSet)) []string {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	register(fs)
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return names
}

// TestFlagGroups: each binary and starter command registers the groups it uses; the worker
// keeps every flag, and no worker-only flag reaches the starter.
func TestFlagGroups(t *testing.T) {
	minus := func(all []string, drop ...string) []string {
		var out []string
		for _, n := range all {
			if !strings.Contains(" "+strings.Join(drop, " ")+" ", " "+n+" ") {
				out = append(out, n)
			}
		}
		return out
	}
	workerOnly := []string{"held-at-rest", "local-wait", "max-concurrent-syncs", "prometheus-address", "release-policy", "releases", "ui-url", "watch", "workflow-cache-size"}
	tests := []struct {
		name string
		give func(*pflag.FlagSet)
		want []string
	}{
		{name: "worker", give: Flags, want: workerFlagNames},
		{name: "starter watch", give: WatcherFlags, want: minus(workerFlagNames, workerOnly...)},
		{name: "worker only", give: WorkerFlags, want: workerOnly},
		{name: "starter status", give: func(fs *pflag.FlagSet) { CommonFlags(fs); TemporalFlags(fs) }, want: []string{
			"cluster", "codec-key-file", "config", "log-format", "log-level", "startup-timeout", "task-queue", "temporal-address",
			"temporal-api-key", "temporal-compression", "temporal-namespace", "temporal-tls-ca", "temporal-tls-cert",
			"temporal-tls-key", "temporal-tls-server-name",
		}},
		{name: "starter sync", give: func(fs *pflag.FlagSet) { CommonFlags(fs); TemporalFlags(fs); StartFlags(fs) }, want: []string{
			"cluster", "codec-key-file", "config", "log-format", "log-level", "search-attributes", "startup-timeout", "task-queue",
			"temporal-address", "temporal-api-key", "temporal-compression", "temporal-namespace", "temporal-tls-ca",
			"temporal-tls-cert", "temporal-tls-key", "temporal-tls-server-name",
		}},
		{name: "starter codec-server", give: func(fs *pflag.FlagSet) { CommonFlags(fs); ShutdownFlags(fs) }, want: []string{
			"codec-key-file", "config", "log-format", "log-level", "shutdown-timeout",
		}},
		{name: "kube", give: KubeFlags, want: []string{"kube-burst", "kube-qps", "kubeconfig", "watch-namespace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := flagNames(tt.give); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("flags = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestLoadUnregisteredKeepDefaults: a setting whose flag a command does not register keeps its
// default, whatever the environment and the config file say, and is not validated; the
// registered ones still read both.
func TestLoadUnregisteredKeepDefaults(t *testing.T) {
	clearEnv(t)
	t.Setenv("ROLLOUT_MAX_CONCURRENT_SYNCS", "0")
	t.Setenv("ROLLOUT_KUBECONFIG", "/nonexistent/kubeconfig")
	t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig")
	t.Setenv("ROLLOUT_TEMPORAL_NAMESPACE", "from-env")
	file := writeFile(t, "c.yaml", "workflow-cache-size: -1\nkube-qps: 0\nlog-level: debug\n")
	fs := pflag.NewFlagSet("status", pflag.ContinueOnError)
	CommonFlags(fs)
	TemporalFlags(fs)
	if err := fs.Parse([]string{"--config", file}); err != nil {
		t.Fatal(err)
	}
	got, err := Load(fs)
	if err != nil {
		t.Fatalf("Load() error = %v, want nil", err)
	}
	want := defaults()
	want.TemporalNamespace = "from-env"
	want.LogLevel = "debug"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load() = %+v, want %+v", got, want)
	}

	// The worker registers them all: the same environment and file are errors.
	fs = pflag.NewFlagSet("worker", pflag.ContinueOnError)
	Flags(fs)
	if err := fs.Parse([]string{"--config", file}); err != nil {
		t.Fatal(err)
	}
	_, err = Load(fs)
	for _, want := range []string{"max-concurrent-syncs must be > 0", "workflow-cache-size must be > 0", "kube-qps must be > 0", "/nonexistent/kubeconfig"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("worker Load() error = %v, want one naming %q", err, want)
		}
	}
}
