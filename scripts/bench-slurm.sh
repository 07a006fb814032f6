#!/usr/bin/env bash
# The Slurm benchmark (server/benches/slurm.rs; docs/PERFORMANCE.md, "Slurm") with each side on a
# core of its own, as separate machines would have it: Slurm's side (slurmctld, slurmdbd, munge,
# MariaDB and every Slurm tool Tenantry or the bench runs) on CPU 1; Tenantry's side (the bench
# process: server, engine, load generator, SQLite) and PostgreSQL on CPU 0. On a machine sharing
# two cores among all of them, the rates alone do not say which side bounds the other.
#
#   scripts/bench-slurm.sh
#
# It starts the bench's own Slurm beside the tests' one (64 powered-down CLOUD nodes, cluster
# `bench`, ports from 17800, accounting database tenantry_slurm_bench), builds the bench in
# release mode, pins the daemons, runs it, and gives every process back all the machine's CPUs,
# whatever way it ends. BENCH_SLURM_* settings pass through (BENCH_SLURM_COUNTS=5000,
# BENCH_SLURM_STORES=postgres, …); PostgreSQL is TENANTRY_TEST_POSTGRES_URL (default: the local
# one). With fewer than two CPUs nothing is pinned. BENCH_BINARY runs that build of the bench
# instead of building one (to compare two commits on one warm machine: build each, copy each
# aside, run them in turn).
#
# The Slurm tools are pinned by a small static wrapper (built here with gcc) that sets its CPU
# and execs the tool: a shell script calling `taskset` ran a third of each tool's start-up on
# Tenantry's core (measured on 2026-12-05).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export TENANTRY_SLURM_DIR="${TENANTRY_SLURM_DIR:-$ROOT/.tmp/slurm-bench}" TENANTRY_SLURM_PORT_BASE=17800 \
  TENANTRY_SLURM_CLUSTER=bench TENANTRY_SLURM_DB=tenantry_slurm_bench TENANTRY_SLURM_NODES=0 TENANTRY_SLURM_CLOUD=64
export TENANTRY_TEST_POSTGRES_URL="${TENANTRY_TEST_POSTGRES_URL:-postgres://postgres:postgres@127.0.0.1:5432/postgres}"
export SLURM_CONF="$TENANTRY_SLURM_DIR/etc/slurm.conf"
say() { printf '\033[1;34m==>\033[0m %s\n' "$*" >&2; }

scripts/slurm.sh start
bench="${BENCH_BINARY:-}"
if [[ -z $bench ]]; then
  say "building the bench (release)"
  bench=$(cargo bench --locked -p tenantry-server --bench slurm --no-run --message-format=json 2>/dev/null \
    | grep -o '"executable":"[^"]*slurm-[^"]*"' | tail -1 | cut -d'"' -f4)
  [[ -x $bench ]] || { echo "the bench did not build: run cargo bench -p tenantry-server --bench slurm" >&2; exit 1; }
fi

if (( $(nproc) < 2 )); then
  say "one CPU: running unpinned"
  exec "$bench" --bench
fi

tools="$TENANTRY_SLURM_DIR/pinned-tools"
mkdir -p "$tools"
cat >"$tools/wrap.c" <<'C'
// Runs /usr/bin/<its own name> on CPU 1, with the same arguments.
#define _GNU_SOURCE
#include <libgen.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    (void)argc;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(1, &one);
    sched_setaffinity(0, sizeof one, &one);
    char path[4096];
    snprintf(path, sizeof path, "/usr/bin/%s", basename(argv[0]));
    execv(path, argv);
    perror(path);
    return 127;
}
C
gcc -O2 -static -o "$tools/wrap" "$tools/wrap.c"
for tool in scontrol sacctmgr sacct sinfo squeue sbatch srun scancel; do ln -sf wrap "$tools/$tool"; done

slurm_side() {
  cat "$TENANTRY_SLURM_DIR"/run/*.pid 2>/dev/null || true
  pgrep -x mariadbd || pgrep -x mysqld || true
  pgrep -x munged || true
}
pin() { local cpus=$1; shift; for pid in "$@"; do taskset -apc "$cpus" "$pid" >/dev/null 2>&1 || true; done; }
everything="0-$(($(nproc) - 1))"
restore() {
  say "giving every process back CPUs $everything"
  # shellcheck disable=SC2046
  pin "$everything" $(slurm_side) $(pgrep -x postgres || true)
}
trap restore EXIT
# shellcheck disable=SC2046
pin 1 $(slurm_side)
# PostgreSQL's postmaster first: the backends it forks from now on inherit its CPU.
# shellcheck disable=SC2046
pin 0 $(pgrep -x postgres || true)
say "Slurm's side on CPU 1, Tenantry's and PostgreSQL on CPU 0: $bench"
PATH="$tools:$PATH" taskset -c 0 "$bench" --bench
