#!/usr/bin/env bash
# A single-node Slurm from Debian packages, for CI and the tests (as root, without systemd):
#
#   bash .ci/slurm.sh up      # install what is missing, write the config, start munged,
#                             # slurmctld and the slurmds in the background, wait until the nodes are idle
#   bash .ci/slurm.sh down    # stop the daemons `up` started, by the pids in their pid files
#
# `up` reuses a Slurm that already answers (sinfo) and then starts nothing; otherwise it starts
# from a clean state (jobs saved by a run that was killed are dropped: `slurmctld -c`); `down` stops what
# the last `up` that started something recorded ($KIT_SLURM_STATE/started), and nothing else. Everything but /etc/slurm/slurm.conf lives
# under $KIT_SLURM_STATE (default /tmp/cnn-bench-slurm): spool, state, logs, pid files. The
# config is written only where none exists or where it is this script's own (its first line).
# Two nodes, n1 and n2, on this one host (KIT_SLURM_NODES; Debian builds Slurm with
# multiple-slurmd: one slurmd per node, each on its own port), each with an equal share of the
# host's cores: arrays spread over nodes, and a cell of several nodes (srun + torchrun's
# rendezvous) runs for real. One node (KIT_SLURM_NODES=1) binds each task to the cores it was
# given (task/affinity, as clusters do); several nodes cannot (each slurmd would hand out the
# same core ids of this one host), so their tasks share the host's cores (task/none). No accounting daemon: `sacct` has no job states here, and `orchestrate.py slurm` reads them
# from `scontrol show job` instead (MinJobAge keeps finished jobs there for an hour).
# Facts this follows (package names, the cgroup plugins this VM's kernel refuses, timings):
# ../shared/notes/slurm.md. Measured on the project's 2-core VM: install 9 s, up 3-5 s.
set -euo pipefail

STATE="${KIT_SLURM_STATE:-/tmp/cnn-bench-slurm}"
NODES="${KIT_SLURM_NODES:-2}"
CONF=/etc/slurm/slurm.conf
MARK="# cnn-bench single-node Slurm (.ci/slurm.sh): safe to remove"

say() { echo "slurm.sh: $*" >&2; }

answers() { timeout 5 sinfo -h >/dev/null 2>&1; }

install() {
  local pkgs=()
  for p in slurmctld slurmd sbatch:slurm-client munged:munge; do
    cmd="${p%%:*}"; pkg="${p##*:}"
    command -v "$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$cmd" ] || pkgs+=("$pkg")
  done
  [ ${#pkgs[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || { say "needs root to install ${pkgs[*]}"; return 2; }
  say "installing ${pkgs[*]}"
  # no daemon may start from the packages' scripts (there is no init system here anyway)
  local rcd=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && rcd=1
  fi
  local rc=0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${pkgs[@]}" >/dev/null; } \
    || rc=$?
  [ -z "$rcd" ] || rm -f /usr/sbin/policy-rc.d
  [ "$rc" = 0 ] || { say "apt-get install ${pkgs[*]} failed (exit $rc)"; return 2; }
}

write_conf() {
  if [ -f "$CONF" ] && [ "$(head -1 "$CONF")" != "$MARK" ]; then
    say "$CONF exists and is not this script's: not touched (start that cluster's daemons instead)"
    return 2
  fi
  local cpus mem
  cpus=$(nproc); mem=$(slurmd -C | head -1 | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
  cpus=$(( cpus / NODES > 0 ? cpus / NODES : 1 )); mem=$(( ${mem:-2048} / NODES ))
  mkdir -p "$STATE/ctld" /etc/slurm
  chown slurm:slurm "$STATE/ctld"
  cat > "$CONF" <<EOF
$MARK
ClusterName=cnnbench
SlurmctldHost=$(hostname -s)
AuthType=auth/munge
SlurmUser=slurm
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d-%n
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd-%n.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=$([ "$NODES" = 1 ] && echo task/affinity || echo task/none)
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
MinJobAge=3600
KillWait=5
MaxArraySize=10001
NodeName=n[1-$NODES] NodeHostname=$(hostname -s) Port=17001-$((17000 + NODES)) CPUs=$cpus SocketsPerBoard=1 CoresPerSocket=$cpus ThreadsPerCore=1 RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

start_munge() {
  if timeout 5 munge -n >/dev/null 2>&1; then return 0; fi
  [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key && chmod 0400 /etc/munge/munge.key
  mkdir -p /run/munge /var/log/munge /var/lib/munge && chown munge:munge /run/munge /var/log/munge /var/lib/munge
  runuser -u munge -- /usr/sbin/munged
  echo munged >> "$STATE/started"
  for _ in $(seq 1 50); do timeout 5 munge -n >/dev/null 2>&1 && return 0; sleep 0.1; done
  say "munged did not answer"; return 1
}

up() {
  if answers; then say "a Slurm answers already (sinfo): using it, starting nothing"; return 0; fi
  install
  mkdir -p "$STATE"
  : > "$STATE/started"
  write_conf
  start_munge
  # Nothing answered, so no daemon of ours runs: whatever $STATE holds is left from a run that was
  # killed (a stopped VM, a CI job cut off). Its jobs would come back as running on a node that runs
  # none of them ("mix", never idle), so start clean: -c drops the saved jobs and node states, and
  # the slurmds' spools go with them.
  rm -rf "$STATE"/d-*
  /usr/sbin/slurmctld -c && echo slurmctld >> "$STATE/started"
  for n in $(seq 1 "$NODES"); do
    /usr/sbin/slurmd -N "n$n" && echo "slurmd n$n" >> "$STATE/started"
  done
  for _ in $(seq 1 100); do
    if [ "$(sinfo -h -o %t 2>/dev/null | sort -u)" = idle ]; then
      say "up: $(sinfo -h -o '%P %D node(s) %N, %c cpus each, %t' | head -1) (state and logs in $STATE)"
      return 0
    fi
    sleep 0.2
  done
  say "the nodes did not become idle in 20 s:"; sinfo >&2 || true; tail -n 5 "$STATE"/*.log >&2 || true
  return 1
}

stop_pid() {  # stop_pid NAME PIDFILE: SIGTERM the pid in PIDFILE, wait up to 10 s for it to end
  local name="$1" file="$2" pid
  pid="$(cat "$file" 2>/dev/null || true)"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || { say "$name: not running"; return 0; }
  kill "$pid"
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || { say "stopped $name (pid $pid)"; return 0; }; sleep 0.1; done
  say "$name (pid $pid) did not stop in 10 s"; return 1
}

down() {
  [ -f "$STATE/started" ] || { say "nothing started by up (no $STATE/started)"; return 0; }
  local rc=0
  for n in $(sed -n 's/^slurmd //p' "$STATE/started"); do stop_pid "slurmd $n" "$STATE/slurmd-$n.pid" || rc=1; done
  grep -qx slurmctld "$STATE/started" && { stop_pid slurmctld "$STATE/slurmctld.pid" || rc=1; }
  grep -qx munged "$STATE/started" && { stop_pid munged /run/munge/munged.pid || rc=1; }
  rm -f "$STATE/started"
  return $rc
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: bash .ci/slurm.sh up|down" >&2; exit 2 ;;
esac
