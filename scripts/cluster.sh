#!/usr/bin/env bash
# Three `tenantry serve` instances over one PostgreSQL behind HAProxy, all on loopback: the
# several-instances setup of deploy/haproxy.cfg, for trying it and for the cluster benchmark
# (server/benches/cluster.rs, docs/PERFORMANCE.md "Several instances").
#
#   scripts/cluster.sh start    installs HAProxy if missing, makes a fresh database with the demo
#                               world, starts the instances and the balancer
#   scripts/cluster.sh stop     stops what it started
#   scripts/cluster.sh env      prints the export lines the benchmark reads (eval them)
#
# Settings (environment):
#   TENANTRY_CLUSTER_BIN    the tenantry binary (default target/release/tenantry, else target/debug/tenantry;
#                           build it first with `cargo leptos build --release --split`)
#   TENANTRY_CLUSTER_DIR    scratch directory: logs, pids, the simulated fleet (default .tmp/cluster)
#   TENANTRY_CLUSTER_DB     PostgreSQL database, dropped and made again by `start` (default tenantry_cluster)
#   TENANTRY_CLUSTER_PORT   the balancer's port; the instances listen on the next three (default 3200)
#   TENANTRY_CLUSTER_NODES  demo fleet size (default 400 nodes, 3,200 GPUs) and
#   TENANTRY_CLUSTER_RESERVATIONS  demo reservations (default 2000)
# PostgreSQL is found as the tests find it (TENANTRY_TEST_POSTGRES_URL, started when it is down).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$ROOT"

DIR="${TENANTRY_CLUSTER_DIR:-$ROOT/.tmp/cluster}"
DB="${TENANTRY_CLUSTER_DB:-tenantry_cluster}"
PORT="${TENANTRY_CLUSTER_PORT:-3200}"
INSTANCES=3
if [[ -n ${TENANTRY_CLUSTER_BIN:-} ]]; then
  BIN=$TENANTRY_CLUSTER_BIN
elif [[ -x target/release/tenantry ]]; then
  BIN=target/release/tenantry
else
  BIN=target/debug/tenantry
fi

database_url() {
  # The tests' server URL with this database in place of theirs.
  local admin=${TENANTRY_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}
  echo "${admin%/*}/$DB"
}

# The environment every instance shares: one database, one simulated fleet, demo sign-in.
instance_env() {
  export DATABASE_URL; DATABASE_URL=$(database_url)
  export TENANTRY_SIM_FLEET="$DIR/sim-fleet.toml"
  export TENANTRY_DEMO=1
  export LEPTOS_SITE_ROOT="$ROOT/target/site"
  export TENANTRY_PUBLIC_URL="http://127.0.0.1:$PORT"
  export RUST_LOG="${RUST_LOG:-warn}"
}

start() {
  command -v haproxy >/dev/null || apt_install haproxy
  bootstrap_postgres
  [[ -x $BIN ]] || die "$BIN is missing: build it with \`cargo leptos build --release --split\`"
  [[ -d $ROOT/target/site/pkg ]] || die "target/site is missing: build it with \`cargo leptos build --release --split\`"
  stop quiet
  mkdir -p "$DIR"
  instance_env
  say "a fresh database $DB with the demo world (${TENANTRY_CLUSTER_NODES:-400} nodes)"
  psql "${TENANTRY_TEST_POSTGRES_URL}" -qc "drop database if exists $DB with (force)" -c "create database $DB"
  "$BIN" migrate
  "$BIN" demo seed --nodes "${TENANTRY_CLUSTER_NODES:-400}" --reservations "${TENANTRY_CLUSTER_RESERVATIONS:-2000}" >/dev/null
  local i
  for i in $(seq 1 $INSTANCES); do
    say "instance $i on 127.0.0.1:$((PORT + i))"
    TENANTRY_ADDR="127.0.0.1:$((PORT + i))" setsid "$BIN" serve >"$DIR/instance-$i.log" 2>&1 &
    echo $! >"$DIR/instance-$i.pid"
  done
  for i in $(seq 1 $INSTANCES); do
    for _ in $(seq 1 60); do
      curl -fs "http://127.0.0.1:$((PORT + i))/readyz" >/dev/null && break
      sleep 1
    done
    curl -fs "http://127.0.0.1:$((PORT + i))/readyz" >/dev/null || die "instance $i did not start: see $DIR/instance-$i.log"
  done
  say "HAProxy on 127.0.0.1:$PORT (deploy/haproxy.cfg)"
  TENANTRY_LB_ADDR="127.0.0.1:$PORT" TENANTRY_INSTANCE_1="127.0.0.1:$((PORT + 1))" \
    TENANTRY_INSTANCE_2="127.0.0.1:$((PORT + 2))" TENANTRY_INSTANCE_3="127.0.0.1:$((PORT + 3))" \
    haproxy -D -f "$ROOT/deploy/haproxy.cfg" -p "$DIR/haproxy.pid"
  for _ in $(seq 1 30); do
    curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null && break
    sleep 0.5
  done
  curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null || die "HAProxy does not answer on 127.0.0.1:$PORT"
  say "the portal is on http://127.0.0.1:$PORT (three instances; demo sign-in on)"
}

stop() {
  local pid
  for pid in "$DIR"/haproxy.pid "$DIR"/instance-*.pid; do
    [[ -f $pid ]] || continue
    kill "$(cat "$pid")" 2>/dev/null || true
    rm -f "$pid"
  done
  [[ ${1:-} == quiet ]] || say "stopped the cluster under $DIR"
}

env_lines() {
  # The same URL `start` used: on a fresh cluster the tests' PostgreSQL URL gains a password.
  bootstrap_postgres
  instance_env
  echo "export TENANTRY_CLUSTER_URL=http://127.0.0.1:$PORT"
  echo "export TENANTRY_CLUSTER_INSTANCES=$(seq -s, -f "http://127.0.0.1:%g" $((PORT + 1)) $((PORT + INSTANCES)))"
  echo "export TENANTRY_CLUSTER_DIR=$DIR"
  echo "export TENANTRY_CLUSTER_DATABASE_URL=$DATABASE_URL"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  env) env_lines ;;
  *) die "usage: scripts/cluster.sh start|stop|env" ;;
esac
