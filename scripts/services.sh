#!/usr/bin/env bash
# services.sh: make the real services the tests use reachable, on a fresh
# Debian 12 machine as on one where they already run.
#
#   Redis 7         127.0.0.1:6379  (no persistence)
#   PostgreSQL 15   127.0.0.1:5432  database "test", superuser role "root",
#                                   trust authentication over loopback
#
# Idempotent: when both already answer it changes nothing. Otherwise it
# installs missing Debian packages, starts what is down, creates the role and
# the database, trusts loopback in pg_hba.conf if needed, and waits (bounded)
# until both answer. It prints each action, and exits non-zero with the reason
# when it cannot make them reachable. Changes need root.
#
# Env: HOLDFAST_SERVICES_DIR holds Redis's working dir and log
# (default /var/tmp/holdfast-services); PG_VERSION picks the PostgreSQL major
# version (default 15, else the newest installed).
set -euo pipefail

readonly REDIS_HOST=127.0.0.1 REDIS_PORT=6379
readonly PG_HOST=127.0.0.1 PG_PORT=5432 PG_DB=test PG_USER=root
readonly STATE_DIR=${HOLDFAST_SERVICES_DIR:-/var/tmp/holdfast-services}
readonly WAIT_SECONDS=30
readonly HBA_MARKER="# holdfast scripts/services.sh: trust loopback for tests"
PG_VERSION=${PG_VERSION:-15}

# psql: never prompt for a password, give up quickly on a dead port.
export PGCONNECT_TIMEOUT=3

log() { echo "services.sh: $*"; }
die() {
	echo "services.sh: ERROR: $*" >&2
	exit 1
}

redis_ok() {
	command -v redis-cli >/dev/null 2>&1 &&
		[ "$(redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ]
}

pg_ok() {
	command -v psql >/dev/null 2>&1 &&
		psql -w -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d "$PG_DB" -Atqc 'select 1' >/dev/null 2>&1
}

# wait_for NAME CMD...: run CMD every half second until it succeeds, for at
# most WAIT_SECONDS. Returns non-zero on timeout.
wait_for() {
	local name=$1 i
	shift
	for ((i = 0; i < WAIT_SECONDS * 2; i++)); do
		if "$@"; then
			return 0
		fi
		sleep 0.5
	done
	echo "services.sh: $name did not answer within ${WAIT_SECONDS}s" >&2
	return 1
}

# ---- fast path -------------------------------------------------------------

# The browser test's Chromium is checked here too: on a machine whose
# Redis and PostgreSQL were started before us, the fast path must not skip
# installing it.
if redis_ok && pg_ok && [ -x /usr/bin/chromium ]; then
	log "Redis on $REDIS_HOST:$REDIS_PORT and PostgreSQL on $PG_HOST:$PG_PORT/$PG_DB already reachable, Chromium installed; nothing to do"
	exit 0
fi
[ "$(id -u)" -eq 0 ] || die "services are not reachable and fixing that needs root (run: sudo $0)"

# ---- packages --------------------------------------------------------------

pg_bin() { echo "/usr/lib/postgresql/$PG_VERSION/bin"; }

# newest_pg prints the newest PostgreSQL major version with a server binary
# under /usr/lib/postgresql, or nothing.
newest_pg() {
	local bin v best=""
	for bin in /usr/lib/postgresql/*/bin/postgres; do
		[ -x "$bin" ] || continue
		v=${bin#/usr/lib/postgresql/}
		v=${v%%/*}
		if [ -z "$best" ] || [ "$v" -gt "$best" ]; then
			best=$v
		fi
	done
	echo "$best"
}

# The Debian cluster tools are what this script drives, so a postgres binary
# elsewhere on PATH (e.g. /usr/local/bin/postgres) does not count.
pg_installed() {
	[ -x "$(pg_bin)/postgres" ] && command -v pg_ctlcluster >/dev/null 2>&1 && command -v psql >/dev/null 2>&1
}

packages=()
if ! redis_ok; then
	command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 || packages+=(redis-server)
fi
if ! pg_ok && ! pg_installed; then
	# Another major version may already be installed: use the newest one.
	newest=$(newest_pg)
	if [ -n "$newest" ] && command -v pg_ctlcluster >/dev/null 2>&1 && command -v psql >/dev/null 2>&1; then
		log "PostgreSQL $PG_VERSION not installed; using installed PostgreSQL $newest"
		PG_VERSION=$newest
	else
		packages+=(postgresql)
	fi
fi
# Headless Chromium for the console's browser test (scheduler/schedhttp/browsertest).
[ -x /usr/bin/chromium ] || packages+=(chromium)
if [ ${#packages[@]} -gt 0 ]; then
	log "installing ${packages[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update || die "apt-get update failed"
	apt-get install -y "${packages[@]}" || die "apt-get install ${packages[*]} failed"
	if ! pg_installed; then
		newest=$(newest_pg)
		[ -n "$newest" ] || die "package postgresql installed no server under /usr/lib/postgresql"
		PG_VERSION=$newest
	fi
fi

# ---- Redis -----------------------------------------------------------------

if redis_ok; then
	log "Redis already answers on $REDIS_HOST:$REDIS_PORT"
else
	mkdir -p "$STATE_DIR/redis"
	log "starting redis-server on $REDIS_HOST:$REDIS_PORT (dir $STATE_DIR/redis, no persistence)"
	redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" \
		--save "" --appendonly no \
		--dir "$STATE_DIR/redis" --logfile "$STATE_DIR/redis/redis.log" \
		--pidfile "$STATE_DIR/redis/redis.pid" ||
		die "redis-server failed to start; see $STATE_DIR/redis/redis.log"
	if ! wait_for Redis redis_ok; then
		tail -n 20 "$STATE_DIR/redis/redis.log" >&2 2>/dev/null || true
		die "Redis is not reachable on $REDIS_HOST:$REDIS_PORT (is another process on the port?)"
	fi
	log "Redis answers PONG"
fi

# ---- PostgreSQL ------------------------------------------------------------

# as_postgres SQL: run SQL as the postgres superuser over the local socket
# (Debian's pg_hba.conf lets it in by peer authentication).
as_postgres() {
	runuser -u postgres -- psql -w -p "$PG_PORT" -d postgres -v ON_ERROR_STOP=1 -Atqc "$1"
}

pg_ready() { pg_isready -q -h "$PG_HOST" -p "$PG_PORT"; }

if pg_ok; then
	log "PostgreSQL already answers on $PG_HOST:$PG_PORT/$PG_DB"
else
	# The cluster "<version> main": create it if missing, move it to our port.
	if ! pg_lsclusters -h 2>/dev/null | awk -v v="$PG_VERSION" '$1 == v && $2 == "main" {found=1} END {exit !found}'; then
		log "creating PostgreSQL $PG_VERSION cluster main on port $PG_PORT"
		pg_createcluster "$PG_VERSION" main --port "$PG_PORT" || die "pg_createcluster $PG_VERSION main failed"
	fi
	port=$(pg_lsclusters -h | awk -v v="$PG_VERSION" '$1 == v && $2 == "main" {print $3}')
	if [ "$port" != "$PG_PORT" ]; then
		log "cluster $PG_VERSION/main is on port $port; setting port $PG_PORT"
		pg_conftool "$PG_VERSION" main set port "$PG_PORT"
		pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" main stop 2>/dev/null || true
	fi

	# Without systemd nothing recreates the socket directory after a reboot.
	install -d -o postgres -g postgres -m 2775 /var/run/postgresql

	if pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" main status >/dev/null 2>&1; then
		log "PostgreSQL $PG_VERSION/main already running"
	else
		log "starting PostgreSQL $PG_VERSION/main"
		pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" main start ||
			die "pg_ctlcluster $PG_VERSION main start failed; see /var/log/postgresql/postgresql-$PG_VERSION-main.log"
	fi
	wait_for PostgreSQL pg_ready ||
		die "PostgreSQL is not accepting connections on $PG_HOST:$PG_PORT; see /var/log/postgresql/postgresql-$PG_VERSION-main.log"

	if [ -z "$(as_postgres "SELECT 1 FROM pg_roles WHERE rolname = '$PG_USER'")" ]; then
		log "creating superuser role $PG_USER"
		as_postgres "CREATE ROLE \"$PG_USER\" SUPERUSER LOGIN" >/dev/null || die "cannot create role $PG_USER"
	elif [ "$(as_postgres "SELECT rolsuper AND rolcanlogin FROM pg_roles WHERE rolname = '$PG_USER'")" != t ]; then
		log "making role $PG_USER a superuser that can log in"
		as_postgres "ALTER ROLE \"$PG_USER\" SUPERUSER LOGIN" >/dev/null || die "cannot alter role $PG_USER"
	fi
	if [ -z "$(as_postgres "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" ]; then
		log "creating database $PG_DB"
		as_postgres "CREATE DATABASE \"$PG_DB\" OWNER \"$PG_USER\"" >/dev/null || die "cannot create database $PG_DB"
	fi

	if ! pg_ok; then
		# pg_hba.conf is first-match: put the trust lines at the top.
		hba=$(as_postgres "SHOW hba_file")
		if grep -qxF "$HBA_MARKER" "$hba"; then
			die "PostgreSQL refuses $PG_USER@$PG_HOST/$PG_DB although $hba already trusts loopback"
		fi
		log "trusting loopback connections in $hba"
		{
			echo "$HBA_MARKER"
			echo "host    all    all    127.0.0.1/32    trust"
			echo "host    all    all    ::1/128         trust"
			cat "$hba"
		} >"$hba.holdfast.tmp"
		chown --reference="$hba" "$hba.holdfast.tmp"
		chmod --reference="$hba" "$hba.holdfast.tmp"
		mv "$hba.holdfast.tmp" "$hba"
		as_postgres "SELECT pg_reload_conf()" >/dev/null
		wait_for "PostgreSQL as $PG_USER" pg_ok ||
			die "PostgreSQL still refuses $PG_USER@$PG_HOST:$PG_PORT/$PG_DB after trusting loopback"
	fi
	log "PostgreSQL answers on $PG_HOST:$PG_PORT/$PG_DB as $PG_USER"
fi

redis_ok || die "Redis stopped answering on $REDIS_HOST:$REDIS_PORT"
pg_ok || die "PostgreSQL stopped answering on $PG_HOST:$PG_PORT/$PG_DB"
log "ready: redis://$REDIS_HOST:$REDIS_PORT and postgres://$PG_USER@$PG_HOST:$PG_PORT/$PG_DB"
