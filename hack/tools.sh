#!/usr/bin/env bash
# Builds the pinned local-stack tools into a cache folder outside the clone and reuses them.
# Prints the folder on the last line of stdout. Progress goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# ROLLOUT_TOOLS moves the cache (ROLLOUT_TOOLS_CACHE, its old name, is still read).
cache=${ROLLOUT_TOOLS:-${ROLLOUT_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/temporal-rollout/tools}}

TEMPORAL_CLI_VERSION=v1.5.1
ETCD_VERSION=v3.6.8
KUBE_VERSION=v1.36.3
KWOK_VERSION=v0.8.0
# Debian's packages (bookworm) for the tests: Prometheus (the analysis-step tests) and
# PostgreSQL 15 (`make test-cluster`). No exact pin: the versions the machine's apt lists offer,
# within the ranges of hack/debian-versions.sh, recorded in $cache/debian-versions.txt.
# shellcheck source=hack/debian-versions.sh
source "$here/debian-versions.sh"
# A production-like Temporal for `make test-cluster`: the Temporal server and its SQL schema tool
# (the server inside Temporal CLI v1.5.1), built from Go modules, on Debian's PostgreSQL.
TEMPORAL_SERVER_VERSION=v1.29.1
# A real Gateway API data plane for the traffic tests: Traefik's kubernetesGateway provider.
# v3.6.12 requires sigs.k8s.io/gateway-api v1.4.0 (the tests install v1.4.1's CRDs). v3.7.x
# does not build here: the module proxy refuses 15 of its dependencies (lego v5's DNS
# providers, the go-http-auth fork it replaces abbot/go-http-auth with).
TRAEFIK_VERSION=v3.6.12

# Scratch folders, removed on exit.
scratch=()
trap 'rm -rf "${scratch[@]}"' EXIT
log() { printf '[tools %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# build NAME DIR CMD...: runs CMD with GOBIN=DIR unless DIR/NAME exists.
build() {
	local name=$1 dir=$2
	shift 2
	if [ -x "$dir/$name" ]; then
		log "$name: cached at $dir/$name"
		return
	fi
	mkdir -p "$dir"
	log "$name: building (first build only; this can take several minutes)"
	local start=$SECONDS
	"$@"
	log "$name: built in $((SECONDS - start))s"
}

export CGO_ENABLED=0

build temporal "$cache/temporal-$TEMPORAL_CLI_VERSION" \
	env GOBIN="$cache/temporal-$TEMPORAL_CLI_VERSION" go install "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_CLI_VERSION"

build kwok "$cache/kwok-$KWOK_VERSION" \
	env GOBIN="$cache/kwok-$KWOK_VERSION" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"

stages="$cache/kwok-$KWOK_VERSION/stages"
if [ ! -f "$stages/pod-ready.yaml" ]; then
	log "kwok stages: copying from the module"
	moddir=$(cd "$here/tools/etcd" && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
	mkdir -p "$stages"
	cp "$moddir/kustomize/stage/node/fast/node-initialize.yaml" \
		"$moddir/kustomize/stage/node/heartbeat/node-heartbeat.yaml" \
		"$moddir/kustomize/stage/pod/fast/pod-ready.yaml" \
		"$moddir/kustomize/stage/pod/fast/pod-complete.yaml" \
		"$moddir/kustomize/stage/pod/fast/pod-delete.yaml" "$stages/"
	chmod -R u+w "$stages"
fi

build etcd "$cache/etcd-$ETCD_VERSION" \
	bash -c "cd '$here/tools/etcd' && go mod tidy >/dev/null 2>&1 && GOBIN='$cache/etcd-$ETCD_VERSION' go install ./etcd"

kube="$cache/kube-$KUBE_VERSION"
for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
	build "$c" "$kube" bash -c "cd '$here/tools/kube' && { [ -f go.sum ] || go mod tidy; } && GOBIN='$kube' go install -ldflags='-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION' ./$c"
done

# `hack/tools.sh core` stops here: the local stack of `make dev` (Temporal CLI dev server,
# kwok, etcd, Kubernetes) needs nothing below, which only the tests use.
if [ "${1:-}" = core ]; then
	log "core tools ready in $cache"
	echo "$cache"
	exit 0
fi

# pick_debian PACKAGE MIN BELOW: sets picked to the version of PACKAGE the apt lists offer
# (MIN <= version < BELOW). Lists that offer none are updated once (apt-get update); a cache
# that recorded a version is used as it is when the lists still offer none (offline).
pick_debian() {
	local pkg=$1 min=$2 below=$3 rc=0
	picked=$(debian_version "$pkg" "$min" "$below") || rc=$?
	if [ "$rc" = 1 ]; then
		log "$pkg: the apt lists offer no version; running apt-get update"
		apt-get update >/dev/null 2>&1 || true
		rc=0
		picked=$(debian_version "$pkg" "$min" "$below") || rc=$?
		if [ "$rc" = 1 ]; then
			picked=$(debian_recorded "$cache" "$pkg")
		fi
	fi
	if [ -z "$picked" ]; then
		log "$pkg: no version at least $min and below $below to download (apt-cache policy $pkg)"
		exit 1
	fi
}

# refresh_debian PACKAGE MIN BELOW: after a failed download (lists older than the mirror),
# apt-get update and pick again.
refresh_debian() {
	log "$1: apt-get download of $1=$picked failed; updating the package lists and picking again"
	apt-get update >/dev/null 2>&1 || true
	pick_debian "$@"
}

# Prometheus: Debian's package, unpacked into the cache (no service is installed or started).
pick_debian "$PROMETHEUS_PACKAGE" "$PROMETHEUS_MIN" "$PROMETHEUS_BELOW"
PROMETHEUS_VERSION=$picked
prom="$cache/prometheus-$PROMETHEUS_VERSION"
if [ ! -x "$prom/prometheus" ]; then
	log "prometheus: fetching Debian's prometheus=$PROMETHEUS_VERSION"
	tmp=$(mktemp -d)
	scratch+=("$tmp")
	if ! (cd "$tmp" && apt-get download "prometheus=$PROMETHEUS_VERSION" >/dev/null 2>&1); then
		refresh_debian "$PROMETHEUS_PACKAGE" "$PROMETHEUS_MIN" "$PROMETHEUS_BELOW"
		PROMETHEUS_VERSION=$picked
		prom="$cache/prometheus-$PROMETHEUS_VERSION"
		if ! (cd "$tmp" && apt-get download "prometheus=$PROMETHEUS_VERSION" >&2); then
			log "prometheus: cannot download Debian's prometheus=$PROMETHEUS_VERSION (apt-get download failed)"
			exit 1
		fi
	fi
	dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
	mkdir -p "$prom"
	cp "$tmp/x/usr/bin/prometheus" "$prom/prometheus.tmp"
	mv "$prom/prometheus.tmp" "$prom/prometheus"
	"$prom/prometheus" --version >/dev/null 2>&1 || { log "prometheus: the unpacked binary does not run"; exit 1; }
	log "prometheus: ready at $prom/prometheus"
else
	log "prometheus: cached at $prom/prometheus"
fi
debian_record "$cache" "$PROMETHEUS_PACKAGE" "$PROMETHEUS_VERSION"
log "prometheus: the tests run Debian's prometheus $PROMETHEUS_VERSION (recorded in $cache/debian-versions.txt)"

# The Temporal server and temporal-sql-tool, and the PostgreSQL schemas from the same module.
tserver="$cache/temporal-server-$TEMPORAL_SERVER_VERSION"
if [ ! -x "$tserver/temporal-server" ] || [ ! -x "$tserver/temporal-sql-tool" ]; then
	log "temporal-server, temporal-sql-tool: building $TEMPORAL_SERVER_VERSION (first build only; several minutes)"
	start=$SECONDS
	mkdir -p "$tserver/gobin"
	GOBIN="$tserver/gobin" go install "go.temporal.io/server/cmd/server@$TEMPORAL_SERVER_VERSION" "go.temporal.io/server/cmd/tools/sql@$TEMPORAL_SERVER_VERSION"
	mv "$tserver/gobin/sql" "$tserver/temporal-sql-tool"
	mv "$tserver/gobin/server" "$tserver/temporal-server"
	rmdir "$tserver/gobin"
	log "temporal-server: built in $((SECONDS - start))s"
else
	log "temporal-server: cached at $tserver"
fi
if [ ! -f "$tserver/schema/postgresql/v12/temporal/versioned/v1.0/manifest.json" ]; then
	moddir=$(cd "$here/tools/etcd" && go mod download -json "go.temporal.io/server@$TEMPORAL_SERVER_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
	mkdir -p "$tserver/schema"
	rm -rf "$tserver/schema/postgresql"
	cp -r "$moddir/schema/postgresql" "$tserver/schema/"
	chmod -R u+w "$tserver/schema"
fi

# PostgreSQL: Debian's postgresql-15 unpacked into the cache (no service is installed or
# started); the tests run it on loopback in a folder of their own. Shared libraries the
# machine lacks are unpacked beside it from the package's own dependencies.
pick_debian "$POSTGRESQL_PACKAGE" "$POSTGRESQL_MIN" "$POSTGRESQL_BELOW"
POSTGRESQL_VERSION=$picked
pg="$cache/postgresql-$POSTGRESQL_VERSION"
pgbin="$pg/usr/lib/postgresql/15/bin"
if [ ! -x "$pgbin/postgres" ]; then
	log "postgresql: fetching Debian's postgresql-15=$POSTGRESQL_VERSION"
	tmp=$(mktemp -d)
	scratch+=("$tmp")
	if ! (cd "$tmp" && apt-get download "postgresql-15=$POSTGRESQL_VERSION" >/dev/null 2>&1); then
		refresh_debian "$POSTGRESQL_PACKAGE" "$POSTGRESQL_MIN" "$POSTGRESQL_BELOW"
		POSTGRESQL_VERSION=$picked
		pg="$cache/postgresql-$POSTGRESQL_VERSION"
		pgbin="$pg/usr/lib/postgresql/15/bin"
		if ! (cd "$tmp" && apt-get download "postgresql-15=$POSTGRESQL_VERSION" >&2); then
			log "postgresql: cannot download Debian's postgresql-15=$POSTGRESQL_VERSION (apt-get download failed)"
			exit 1
		fi
	fi
	rm -rf "$pg.tmp"
	dpkg-deb -x "$tmp"/postgresql-15_*.deb "$pg.tmp"
	missing=$(ldd "$pg.tmp/usr/lib/postgresql/15/bin/postgres" "$pg.tmp/usr/lib/postgresql/15/bin/initdb" | awk '/not found/ {print $1}' | sort -u)
	if [ -n "$missing" ]; then
		log "postgresql: this machine lacks $(echo $missing); unpacking the package's library dependencies"
		deps=$(apt-cache depends "postgresql-15=$POSTGRESQL_VERSION" | awk '/Depends: lib/ {print $2}' | sort -u)
		(cd "$tmp" && apt-get download $deps >&2)
		for d in "$tmp"/lib*.deb; do dpkg-deb -x "$d" "$pg.tmp"; done
		still=$(LD_LIBRARY_PATH="$pg.tmp/usr/lib/x86_64-linux-gnu" ldd "$pg.tmp/usr/lib/postgresql/15/bin/postgres" | awk '/not found/ {print $1}')
		if [ -n "$still" ]; then
			log "postgresql: still missing $(echo $still)"
			exit 1
		fi
	fi
	rm -rf "$pg"
	mv "$pg.tmp" "$pg"
	"$pgbin/postgres" --version >/dev/null 2>&1 || LD_LIBRARY_PATH="$pg/usr/lib/x86_64-linux-gnu" "$pgbin/postgres" --version >/dev/null || { log "postgresql: the unpacked binary does not run"; exit 1; }
	log "postgresql: ready at $pgbin"
else
	log "postgresql: cached at $pgbin"
fi
debian_record "$cache" "$POSTGRESQL_PACKAGE" "$POSTGRESQL_VERSION"
log "postgresql: the tests run Debian's postgresql-15 $POSTGRESQL_VERSION (recorded in $cache/debian-versions.txt)"

# Chromium (headless) and its WebDriver, chromedriver, take the screenshots of the Temporal UI
# in docs/ (e2e TestUI*, docs/ui.md). Unlike the packages above they are installed system-wide
# (Chromium needs dozens of shared libraries), which takes root; skipped when /usr/bin/chromium
# and /usr/bin/chromedriver exist. Any version Debian offers; the installed one is recorded.
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
	if [ "$(id -u)" != 0 ]; then
		log "chromium: /usr/bin/chromium or /usr/bin/chromedriver is missing and installing them takes root: sudo apt-get install -y chromium chromium-driver (the UI screenshot tests need them)"
		exit 1
	fi
	log "chromium: installing Debian's chromium and chromium-driver (apt-get install)"
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver >/dev/null 2>&1; then
		apt-get update >/dev/null 2>&1 || true
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver >&2 || { log "chromium: apt-get install chromium chromium-driver failed"; exit 1; }
	fi
fi
CHROMIUM_VERSION=$(dpkg-query -W -f='${Version}' "$CHROMIUM_PACKAGE" 2>/dev/null || true)
if [ -z "$CHROMIUM_VERSION" ]; then
	log "chromium: /usr/bin/chromium exists but dpkg does not know the chromium package"
	CHROMIUM_VERSION=unknown
fi
debian_record "$cache" "$CHROMIUM_PACKAGE" "$CHROMIUM_VERSION"
log "chromium: the UI screenshots use Debian's chromium $CHROMIUM_VERSION (recorded in $cache/debian-versions.txt)"

# Traefik: its go.mod carries `replace` directives, so `go install traefik@v` is refused. Its
# module source is copied to a scratch folder and built there, with the module's own go.sum
# (the web UI is embedded from webui/static, which the module ships).
traefik="$cache/traefik-$TRAEFIK_VERSION"
if [ ! -x "$traefik/traefik" ]; then
	log "traefik: building $TRAEFIK_VERSION from its module source (first build only; 10-20 minutes on 2 cores)"
	start=$SECONDS
	if ! moddir=$(cd "$here/tools/etcd" && go mod download -json "github.com/traefik/traefik/v3@$TRAEFIK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p') || [ -z "$moddir" ]; then
		log "traefik: cannot download github.com/traefik/traefik/v3@$TRAEFIK_VERSION from the Go module proxy"
		exit 1
	fi
	tmp=$(mktemp -d)
	scratch+=("$tmp")
	cp -r "$moddir" "$tmp/src"
	chmod -R u+w "$tmp/src"
	mkdir -p "$traefik"
	if ! (cd "$tmp/src" && go build -trimpath -ldflags "-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=$TRAEFIK_VERSION" -o "$traefik/traefik.tmp" ./cmd/traefik); then
		log "traefik: go build ./cmd/traefik failed in the module source of $TRAEFIK_VERSION (see above); the data-plane test (TestTrafficDataPlane) needs it"
		rm -f "$traefik/traefik.tmp"
		exit 1
	fi
	mv "$traefik/traefik.tmp" "$traefik/traefik"
	"$traefik/traefik" version >/dev/null 2>&1 || { log "traefik: the built binary does not run"; exit 1; }
	log "traefik: built in $((SECONDS - start))s"
else
	log "traefik: cached at $traefik/traefik"
fi

log "all tools ready in $cache"
echo "$cache"
