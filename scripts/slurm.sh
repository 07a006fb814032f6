#!/usr/bin/env bash
# A real Slurm 22.05 on this one machine, for Tenantry's Slurm tests and benchmarks: munge on its
# default socket, slurmdbd with accounting in the local MariaDB, slurmctld, and one slurmd per
# emulated GPU node (fake /dev/nvidia* device files, so jobs really run and see their GPUs).
# Everything else lives under one scratch directory.
#
#   scripts/slurm.sh start    installs what is missing, starts whatever is not running (idempotent)
#   scripts/slurm.sh stop     stops the daemons it started
#   scripts/slurm.sh env      prints the `export SLURM_CONF=…` line for a shell to eval
#
# Settings (environment):
#   TENANTRY_SLURM_DIR     scratch directory (default: .tmp/slurm in the repository)
#   TENANTRY_SLURM_NODES   emulated nodes that run jobs, gpu001… (default 4; 8 GPUs and 16 cores
#                          each, two hardware threads a core as on DGX-class nodes: 32 CPUs,
#                          the last also declaring 16 gres/shard, 2 seats a GPU, for time-slicing
#                          (each booking that shares a node holds at least one of its cores);
#                          0: none, for a cluster of CLOUD nodes only). Beside them one A100
#                          node in MIG mode, mig001: two a100_3g.40gb instances and 8 shards
#                          (four seats an instance), for time-sliced MIG instances
#   TENANTRY_SLURM_CLOUD   extra powered-down (CLOUD) nodes for scale, cloud0001… (default 0): they
#                          hold reservations but never run jobs
#   TENANTRY_SLURM_DB      MariaDB database for accounting (default tenantry_slurm_acct)
#   TENANTRY_SLURM_CLUSTER cluster name (default tenantry)
#   TENANTRY_SLURM_PORT_BASE  slurmctld listens on it + 17, slurmdbd on + 19, the emulated nodes'
#                          slurmd on + 101… (default 16800: 16817, 16819, 16901…)
#   TENANTRY_SLURM_USERS   Unix users made for the demo's people, who submit jobs in the tests
#                          (default "ada max grace pat")
#
# A second Slurm can run beside the first (munge and MariaDB are shared): give it its own
# directory, ports, cluster name and accounting database, e.g. for the Slurm benchmark
# (server/benches/slurm.rs):
#   TENANTRY_SLURM_DIR=.tmp/slurm-bench TENANTRY_SLURM_PORT_BASE=17800 TENANTRY_SLURM_CLUSTER=bench \
#     TENANTRY_SLURM_DB=tenantry_slurm_bench TENANTRY_SLURM_NODES=0 TENANTRY_SLURM_CLOUD=64 scripts/slurm.sh start
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
A="${TENANTRY_SLURM_DIR:-$ROOT/.tmp/slurm}"
NODES="${TENANTRY_SLURM_NODES:-4}"
CLOUD="${TENANTRY_SLURM_CLOUD:-0}"
DB="${TENANTRY_SLURM_DB:-tenantry_slurm_acct}"
USERS="${TENANTRY_SLURM_USERS:-ada max grace pat}"
CLUSTER="${TENANTRY_SLURM_CLUSTER:-tenantry}"
PORT_BASE="${TENANTRY_SLURM_PORT_BASE:-16800}"
CTLD_PORT=$((PORT_BASE + 17))
DBD_PORT=$((PORT_BASE + 19))
# slurmd ports: one per emulated node, from here up.
SLURMD_PORT0=$((PORT_BASE + 100))
# The last emulated node also shares its GPUs as seats: gres/shard, 2 to a GPU (one a core).
SHARDS=16
# The emulated A100 in MIG mode: Slurm's MIG layout is its GRES, two 3g.40gb instances (one
# device file each) and a shard for four seats of each.
MIG_NODE=mig001
MIG_GRES=gpu:a100_3g.40gb:2,shard:8
# Every emulated node that runs jobs.
all_nodes() {
  local n
  (( NODES > 0 )) || return 0
  for n in $(seq 1 "$NODES"); do node_name "$n"; done
  echo "$MIG_NODE"
}

say() { printf '\033[1;34m==>\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31merror:\033[0m %s\n' "$*" >&2; exit 1; }
as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    die "need root to run: $*"; fi
}
export SLURM_CONF="$A/etc/slurm.conf"

node_name() { printf 'gpu%03d\n' "$1"; }

install_packages() {
  command -v slurmctld >/dev/null && command -v slurmdbd >/dev/null && command -v munged >/dev/null && return
  say "installing Slurm 22.05 and munge (Debian packages)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm slurmdbd slurm-client munge >/dev/null
}

start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return; fi
  say "starting munged"
  [[ -f /etc/munge/munge.key ]] || as_root mungekey --create --keyfile=/etc/munge/munge.key
  as_root chown munge:munge /etc/munge/munge.key
  as_root mkdir -p /run/munge /var/log/munge /var/lib/munge
  as_root chown munge:munge /run/munge /var/log/munge /var/lib/munge
  as_root chmod 0755 /run/munge
  as_root runuser -u munge -- munged
  for _ in $(seq 1 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return; sleep 0.1; done
  die "munged did not start"
}

write_config() {
  mkdir -p "$A"/{etc,state,log,run,dev} "$A"/spool
  for i in 0 1 2 3 4 5 6 7 8 9; do
    [[ -e $A/dev/nvidia$i ]] || as_root mknod "$A/dev/nvidia$i" c 195 "$i"
  done
  local nodes=() n
  for n in $(seq 1 "$NODES"); do nodes+=("$(node_name "$n")"); done
  {
    cat <<CONF
# Written by scripts/slurm.sh; edits are overwritten.
ClusterName=$CLUSTER
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
StateSaveLocation=$A/state
SlurmdSpoolDir=$A/spool/slurmd-%n
SlurmctldPidFile=$A/run/slurmctld.pid
SlurmdPidFile=$A/run/slurmd-%n.pid
SlurmctldLogFile=$A/log/slurmctld.log
SlurmdLogFile=$A/log/slurmd-%n.log
SlurmdParameters=config_overrides
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu,shard
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
AccountingStorageTRES=gres/gpu,gres/shard
AccountingStorageEnforce=associations,limits
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SchedulerParameters=bf_interval=1
SchedulerTimeSlice=5
MinJobAge=30
InactiveLimit=0
KillWait=2
# Nodes that do not answer within this are DOWN (tests kill a slurmd to see it).
SlurmdTimeout=20
SuspendProgram=/bin/true
ResumeProgram=/bin/true
SuspendTime=INFINITE
ResumeTimeout=3600
TreeWidth=65533
CONF
    for n in $(seq 1 "$NODES"); do
      local gres=gpu:h100:8
      (( n == NODES )) && gres+=",shard:$SHARDS"
      echo "NodeName=$(node_name "$n") NodeAddr=127.0.0.1 Port=$((SLURMD_PORT0 + n)) CPUs=32 Sockets=2 CoresPerSocket=8 ThreadsPerCore=2 RealMemory=2200000 TmpDisk=110000000 Gres=$gres Feature=region-local,fabric-local-a,rack-r1,driver-570,driver-550,driver-535"
    done
    if (( NODES > 0 )); then
      echo "NodeName=$MIG_NODE NodeAddr=127.0.0.1 Port=$((SLURMD_PORT0 + NODES + 1)) CPUs=16 RealMemory=1000000 TmpDisk=30000000 Gres=$MIG_GRES Feature=region-local,fabric-local-a,rack-r1,driver-570,driver-550,driver-535"
    fi
    if (( CLOUD > 0 )); then
      # Without it Slurm hides powered-down CLOUD nodes from `scontrol show node`, the inventory.
      echo "PrivateData=cloud"
      echo "NodeName=cloud[0001-$(printf '%04d' "$CLOUD")] CPUs=16 RealMemory=2200000 TmpDisk=110000000 Gres=gpu:h100:8 Feature=region-local,fabric-local-b,rack-r2,driver-570,driver-550,driver-535 State=CLOUD"
    fi
    # ReqResv: a job must name a reservation, so no job ever gets a GPU outside one.
    echo "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP ReqResv=YES"
  } >"$A/etc/slurm.conf.new"
  mv "$A/etc/slurm.conf.new" "$A/etc/slurm.conf"
  if (( NODES > 0 )); then
    {
      echo "NodeName=gpu[001-$(printf '%03d' "$NODES")] Name=gpu Type=h100 File=$A/dev/nvidia[0-7]"
      echo "NodeName=$(node_name "$NODES") Name=shard Count=$SHARDS"
      echo "NodeName=$MIG_NODE Name=gpu Type=a100_3g.40gb File=$A/dev/nvidia[8-9]"
      echo "NodeName=$MIG_NODE Name=shard Count=8"
    } >"$A/etc/gres.conf"
  else
    : >"$A/etc/gres.conf"
  fi
  cat >"$A/etc/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3306
StorageUser=root
StorageLoc=$DB
PidFile=$A/run/slurmdbd.pid
LogFile=$A/log/slurmdbd.log
CONF
  chmod 0600 "$A/etc/slurmdbd.conf"
}

ensure_users() {
  local user
  for user in $USERS; do
    id -u "$user" >/dev/null 2>&1 || as_root useradd --create-home --shell /bin/bash "$user"
  done
}

# Whether the daemon whose pid file is $1 runs (a SIGKILLed daemon nobody reaped yet is a
# zombie: it answers kill -0 but is gone).
alive() {
  [[ -f $1 ]] || return 1
  local pid
  pid=$(cat "$1")
  [[ -r /proc/$pid/status ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status"
}

wait_for() {
  local what=$1; shift
  for _ in $(seq 1 100); do "$@" >/dev/null 2>&1 && return; sleep 0.2; done
  die "$what did not come up (logs in $A/log)"
}

# The daemons listening on this Slurm's ports that it did not start: another checkout's Slurm
# on the same ports (a second clone on this machine, as CI's is). Left running, it would answer
# for this one, and a test that kills this one's controller would miss it.
others_on_ports() {
  local ours port
  ours=$(cat "$A"/run/*.pid 2>/dev/null || true)
  for port in "$DBD_PORT" "$CTLD_PORT" $(seq $((SLURMD_PORT0 + 1)) $((SLURMD_PORT0 + NODES + 1))); do
    ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2
  done | sort -u | grep -vxF -e "${ours:-none}" || true
}

take_over_ports() {
  local pids
  pids=$(others_on_ports)
  [[ -n $pids ]] || return 0
  say "stopping another checkout's Slurm on these ports (pids $(echo $pids))"
  # shellcheck disable=SC2086
  kill $pids 2>/dev/null || true
  for _ in $(seq 1 50); do [[ -z $(others_on_ports) ]] && return; sleep 0.2; done
  # shellcheck disable=SC2086
  kill -9 $(others_on_ports) 2>/dev/null || true
  sleep 0.5
}

start() {
  install_packages
  start_munge
  ensure_users
  write_config
  take_over_ports
  if ! alive "$A/run/slurmdbd.pid"; then
    say "starting slurmdbd (accounting in MariaDB database $DB)"
    setsid slurmdbd -D >>"$A/log/slurmdbd.out" 2>&1 < /dev/null &
    wait_for slurmdbd bash -c "exec 3<>/dev/tcp/127.0.0.1/$DBD_PORT"
  fi
  if ! sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx "$CLUSTER"; then
    sacctmgr -i add cluster "$CLUSTER" >/dev/null
  fi
  if ! alive "$A/run/slurmctld.pid"; then
    say "starting slurmctld"
    setsid slurmctld -D >>"$A/log/slurmctld.out" 2>&1 < /dev/null &
    wait_for slurmctld scontrol ping
  else
    scontrol reconfigure >/dev/null
  fi
  local name
  for name in $(all_nodes); do
    alive "$A/run/slurmd-$name.pid" && continue
    setsid slurmd -D -N "$name" >>"$A/log/slurmd-$name.out" 2>&1 < /dev/null &
  done
  if (( NODES == 0 )); then
    say "Slurm is up (no emulated nodes): SLURM_CONF=$SLURM_CONF"
    return
  fi
  local nodes
  nodes=$(all_nodes | paste -sd,)
  say "waiting for $((NODES + 1)) nodes to answer"
  for _ in $(seq 1 300); do
    local up
    # A drained node answers too: a controller killed just after a drain was lifted brings the
    # drain back from its saved state, and the tests lift it again themselves.
    up=$(sinfo -h -N -n "$nodes" -o '%N %t' | grep -cvE 'down|unk|fail' || true)
    (( up > NODES )) && { say "Slurm is up: SLURM_CONF=$SLURM_CONF"; return; }
    sleep 0.2
  done
  sinfo -N >&2
  die "the emulated nodes did not come up (logs in $A/log)"
}

stop() {
  local pid
  for pid in "$A"/run/slurmd-*.pid "$A/run/slurmctld.pid" "$A/run/slurmdbd.pid"; do
    [[ -f $pid ]] && kill "$(cat "$pid")" 2>/dev/null || true
  done
  # Until they are gone: a start right after must not take a dying daemon for a running one.
  for pid in "$A"/run/slurmd-*.pid "$A/run/slurmctld.pid" "$A/run/slurmdbd.pid"; do
    for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.1; done
  done
  say "stopped Slurm under $A"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  env) echo "export SLURM_CONF=$SLURM_CONF" ;;
  *) die "usage: scripts/slurm.sh start|stop|env" ;;
esac
