#!/usr/bin/env bash
# Runs Kubernetes' own [sig-apps] Deployment e2e specs against the local stack, with the
# built-in Deployment controller and with ours, side by side (go run ./hack/upstream).
# Builds the pinned e2e.test (k8s.io/kubernetes v1.36.3, module hack/tools/kube-e2e) into the
# tools cache on first use (about 10 minutes on 2 cores). Extra arguments go to hack/upstream.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# ROLLOUT_TOOLS moves the cache (ROLLOUT_TOOLS_CACHE, its old name, is still read).
cache=${ROLLOUT_TOOLS:-${ROLLOUT_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/temporal-rollout/tools}}
KUBE_VERSION=v1.36.3
bin="$cache/kube-e2e-$KUBE_VERSION/e2e.test"

if [ ! -x "$bin" ]; then
	echo "[upstream-e2e] building e2e.test $KUBE_VERSION (first build only; about 10 minutes)" >&2
	mkdir -p "$(dirname "$bin")"
	(cd "$here/tools/kube-e2e" && CGO_ENABLED=0 go test -c -o "$bin.tmp" ./e2etest/)
	mv "$bin.tmp" "$bin"
fi
"$here/tools.sh" >/dev/null
cd "$here/.."
make build >/dev/null
exec go run ./hack/upstream --e2e-test "$bin" --tools "$cache" --bin bin "$@"
