#!/bin/sh
# local_cluster.sh start DIR | stop DIR - a one-node Slurm cluster on this machine, for tests.
#
# start: writes DIR/slurm.conf (controller and node on loopback, this host's short name as the
# node, CPUS cpus, cgroup-free plugins: proctrack/linuxproc, task/none, no accounting daemon) and a
# munge key, then starts munged, slurmctld and slurmd as daemons whose pid files, sockets, state,
# spool and logs all live in DIR, and waits until the node is idle. Prints the line to source:
# `export SLURM_CONF=DIR/slurm.conf`. Ports: the first free pair from 16817 up (RECALL_SLURM_PORT
# to choose). Runs as root (slurmd starts jobs as their user).
# stop: cancels the cluster's jobs (waiting up to 10 s for them to end), then ends exactly the
# daemons whose pid files are in DIR (TERM, then KILL after 10 s); safe to call twice, and on a
# half-started cluster.
set -eu
usage() { echo "usage: $0 start|stop DIR [CPUS]" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 D=$2 CPUS=${3:-2}
case $D in /*) ;; *) D=$(pwd)/$D ;; esac

stop() {
    # the cluster's jobs first: a job step outlives slurmd
    if [ -s "$D/slurmctld.pid" ] && kill -0 "$(cat "$D/slurmctld.pid")" 2>/dev/null; then
        export SLURM_CONF="$D/slurm.conf"
        ids=$(squeue -h -t PD,R,CG,S -o %i 2>/dev/null || true)
        if [ -n "$ids" ]; then
            # shellcheck disable=SC2086 # one id a word
            scancel $ids 2>/dev/null || true
            i=0
            while [ -n "$(squeue -h -t R,CG -o %i 2>/dev/null)" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
        fi
    fi
    for name in slurmd slurmctld munged; do
        pf="$D/$name.pid"
        [ -s "$pf" ] || continue
        pid=$(cat "$pf")
        kill -TERM "$pid" 2>/dev/null || { rm -f "$pf"; continue; }
        i=0
        while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
        if kill -0 "$pid" 2>/dev/null; then
            echo "local_cluster: $name ($pid) did not stop in 10 s: killed" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$pf"
    done
}

port_free() { ! (ss -Hltn 2>/dev/null || netstat -ltn 2>/dev/null) | awk '{print $4}' | grep -q ":$1\$"; }

start() {
    [ "$(id -u)" = 0 ] || { echo "local_cluster: start needs root (slurmd runs jobs as their user)" >&2; exit 1; }
    for b in munged slurmctld slurmd sinfo; do
        command -v "$b" >/dev/null 2>&1 || { echo "local_cluster: $b not found (make test-slurm installs it)" >&2; exit 1; }
    done
    mkdir -p "$D/state" "$D/spool" "$D/munge"
    chmod 700 "$D/munge"
    port=${RECALL_SLURM_PORT:-16817}
    while ! port_free "$port" || ! port_free $((port + 1)); do port=$((port + 2)); done
    host=$(hostname -s)
    dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 2>/dev/null
    chmod 400 "$D/munge/munge.key"
    cat >"$D/slurm.conf" <<CONF
ClusterName=recalllocal
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.socket
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
SwitchType=switch/none
JobRequeue=1
ReturnToService=2
MinJobAge=600
KillWait=2
InactiveLimit=0
SlurmdTimeout=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=1000 State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
    munged --force --socket="$D/munge/munge.socket" --key-file="$D/munge/munge.key" \
        --pid-file="$D/munged.pid" --log-file="$D/munged.log" --seed-file="$D/munge/munged.seed"
    slurmctld -f "$D/slurm.conf" -i
    slurmd -f "$D/slurm.conf" -N "$host"
    export SLURM_CONF="$D/slurm.conf"
    i=0
    while :; do
        state=$(sinfo -h -N -n "$host" -o %T 2>/dev/null || true)
        case $state in idle*) break ;; esac
        i=$((i + 1))
        if [ $i -ge 300 ]; then
            echo "local_cluster: node not idle after 30 s (state '$state'); logs in $D" >&2
            exit 1
        fi
        sleep 0.1
    done
    echo "export SLURM_CONF=$D/slurm.conf"
}

case $cmd in
start) start ;;
stop) stop ;;
*) usage ;;
esac
