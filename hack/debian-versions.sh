# shellcheck shell=bash
# Sourced by hack/tools.sh: picks the versions of the Debian packages the tests unpack
# (prometheus, postgresql-15) from what the machine's apt lists offer, instead of exact pins
# that Debian's mirrors drop at the next point release, and records them in the tools cache.
# internal/stack reads the record (stack.DebianVersions) to find the binaries;
# TestDebianVersion runs these functions against a fake apt-cache.

# The packages, and the oldest version of each the tests accept (dpkg version order). The
# upper bounds keep the major versions the tests were written against: Prometheus 2 (3 changed
# the flags and the UI), PostgreSQL 15 (the package name holds the major version).
PROMETHEUS_PACKAGE=prometheus
PROMETHEUS_MIN=2.42.0
PROMETHEUS_BELOW=3~
POSTGRESQL_PACKAGE=postgresql-15
POSTGRESQL_MIN=15.0
POSTGRESQL_BELOW=16~
# Chromium, headless, with chromium-driver, for the screenshots of the Temporal UI (e2e TestUI*):
# installed system-wide by hack/tools.sh (apt-get install, as root), since it needs its many
# shared libraries. Any version the lists offer; the installed one is recorded.
CHROMIUM_PACKAGE=chromium

# debian_candidate PACKAGE: the version apt would install (apt-cache policy's Candidate),
# empty when the lists offer none.
debian_candidate() {
	apt-cache policy "$1" 2>/dev/null | awk '$1 == "Candidate:" && $2 != "(none)" {print $2; exit}'
}

# debian_version PACKAGE MIN BELOW: prints the candidate version of PACKAGE and returns 0 when
# MIN <= version < BELOW; returns 1 when the lists offer no version, 2 (saying why on stderr)
# when the version offered is outside the range.
debian_version() {
	local pkg=$1 min=$2 below=$3 v
	v=$(debian_candidate "$pkg")
	if [ -z "$v" ]; then
		return 1
	fi
	if ! dpkg --compare-versions "$v" ge "$min" || ! dpkg --compare-versions "$v" lt "$below"; then
		echo "the apt lists offer $pkg $v; the tests need at least $min and below $below" >&2
		return 2
	fi
	echo "$v"
}

# debian_recorded CACHE PACKAGE: the version of PACKAGE recorded in CACHE/debian-versions.txt.
debian_recorded() {
	[ -f "$1/debian-versions.txt" ] && awk -v p="$2" '$1 == p {print $2}' "$1/debian-versions.txt"
	return 0
}

# debian_record CACHE PACKAGE VERSION: records that the cache holds VERSION of PACKAGE, the one
# the tests run (one line a package: "PACKAGE VERSION").
debian_record() {
	local f=$1/debian-versions.txt
	mkdir -p "$1"
	{ [ -f "$f" ] && awk -v p="$2" '$1 != p' "$f"; echo "$2 $3"; } >"$f.tmp"
	mv "$f.tmp" "$f"
}
