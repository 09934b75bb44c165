#!/usr/bin/env bash
# tools.sh: make the tools `make lint` needs beyond Go available, on a
# fresh Debian 12 machine as on one where they already are:
#
#   promtool   Debian package "prometheus" (/usr/bin/promtool), checks and
#              tests docs/alerts.yml
#
# Idempotent: when promtool is on PATH it changes nothing. Otherwise it
# installs the package with apt-get (needs root) and exits non-zero with the
# reason when it cannot. `make test` never needs it.
set -euo pipefail

log() { echo "tools.sh: $*"; }
die() {
	echo "tools.sh: ERROR: $*" >&2
	exit 1
}

if command -v promtool >/dev/null 2>&1; then
	exit 0
fi
command -v apt-get >/dev/null 2>&1 || die "promtool missing and no apt-get: install Prometheus's promtool"
[ "$(id -u)" -eq 0 ] || die "promtool missing: run as root to install Debian's prometheus package"
log "installing Debian package prometheus (promtool)"
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >/dev/null ||
	{ apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >/dev/null; } ||
	die "apt-get install prometheus failed"
command -v promtool >/dev/null 2>&1 || die "prometheus installed but promtool is not on PATH"
