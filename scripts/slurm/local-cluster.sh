#!/usr/bin/env bash
# A private one-node Slurm cluster on this machine, for tests and demos (root; Debian's slurm-wlm
# and munge). Everything lives in DIR: munge key and socket, slurm.conf, state, spool, logs, PIDs.
#
#   scripts/slurm/local-cluster.sh start DIR   # prints "export SLURM_CONF=DIR/slurm.conf" (DIR: this user's, private)
#   scripts/slurm/local-cluster.sh stop DIR    # stops every daemon it started, by PID
#
# Ports: RESIL_SLURM_PORT (slurmctld, default 17817) and +1 (slurmd); non-default so a real
# cluster's daemons on the same host are never touched.
set -euo pipefail
cmd=${1:?usage: local-cluster.sh start|stop DIR}
dir=$(realpath -m "${2:?usage: local-cluster.sh start|stop DIR}")
port=${RESIL_SLURM_PORT:-17817}

# DIR holds the munge key and the PID files whose processes stop kills: it must be this user's and
# writable by no one else, or another user could name any process to kill (as root) or read the key.
if [[ -e $dir ]]; then
  owner=$(stat -c %u "$dir") mode=$(stat -c %a "$dir")
  if [[ $owner != "$(id -u)" ]] || (( 8#$mode & 8#022 )); then
    echo "local-cluster.sh: error: $dir is not this user's private directory (owner uid $owner, mode $mode): choose another DIR" >&2
    exit 3
  fi
fi

# Stop the daemon NAME whose PID the file holds: only if that process is NAME (a stale PID may have
# been reused by any other process).
stop_pidfile() {
  local f=$1 name=$2
  [[ -f $f ]] || return 0
  local pid
  pid=$(cat "$f" 2>/dev/null || true)
  [[ $pid =~ ^[0-9]+$ ]] || { rm -f "$f"; return 0; }
  if kill -0 "$pid" 2>/dev/null && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$name" ]]; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

case $cmd in
stop)
  stop_pidfile "$dir/slurmd.pid" slurmd
  stop_pidfile "$dir/slurmctld.pid" slurmctld
  stop_pidfile "$dir/munged.pid" munged
  exit 0
  ;;
start) ;;
*) echo "local-cluster.sh: unknown command '$cmd' (start|stop)" >&2; exit 2 ;;
esac

for exe in munged slurmctld slurmd sinfo; do
  command -v "$exe" >/dev/null || { echo "local-cluster.sh: $exe not found (apt-get install slurm-wlm munge)" >&2; exit 3; }
done
(umask 077; mkdir -p "$dir")
mkdir -p "$dir"/{state,spool,munge}
chmod 700 "$dir/munge"
host=$(hostname -s)
cpus=$(nproc)
mem=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024))

# munge: a private key, socket, pid and log in DIR.
if [[ ! -f $dir/munge/munge.key ]]; then
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
fi
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/munge.seed"

cat >"$dir/slurm.conf" <<CONF
ClusterName=resil-local
SlurmctldHost=$host
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobRequeue=1
KillWait=10
SchedulerType=sched/builtin
SchedulerParameters=defer_batch=0
MinJobAge=600
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF"
for _ in $(seq 100); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    echo "export SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
echo "local-cluster.sh: the node did not come up; logs in $dir" >&2
sinfo >&2 || true
tail -5 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
exit 1
