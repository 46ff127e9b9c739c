#!/usr/bin/env bash
# Stop the cluster slurm-up.sh started (same STATE_DIR): cancel what is left, then stop each daemon in reverse start
# order by the pid in its pid file (TERM, KILL after a timeout). Nothing is killed by name; a partial start is fine.
# Then the /etc/slurm files slurm-up.sh replaced are put back and those it added removed (scripts/slurm-etc.sh).
set -uo pipefail

STATE_DIR=${STATE_DIR:-/tmp/firstfault-slurm}

# stop NAME PIDFILE SECONDS
stop() {
    local name=$1 pidfile=$2 limit=$3 pid
    [ -s "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid"
    for _ in $(seq 1 $((limit * 5))); do
        kill -0 "$pid" 2>/dev/null || { echo "slurm-down: $name stopped"; return 0; }
        sleep 0.2
    done
    echo "slurm-down: $name (pid $pid) still running after ${limit}s; sending KILL" >&2
    kill -KILL "$pid"
}

# left-over jobs would leave slurmstepd processes behind
if timeout 5 scontrol ping 2>/dev/null | grep -q UP; then
    squeue -h -o %i | xargs -r scancel
    for _ in $(seq 1 50); do
        [ -z "$(squeue -h -o %i)" ] && break
        sleep 0.2
    done
fi

stop slurmd "$STATE_DIR/run/slurmd.pid" 30
stop slurmctld "$STATE_DIR/run/slurmctld.pid" 30
stop slurmdbd "$STATE_DIR/run/slurmdbd.pid" 30
stop mariadbd "$STATE_DIR/run/mariadbd.pid" 60
stop munged /run/munge/munged.pid 30

STATE_DIR=$STATE_DIR bash "$(dirname "${BASH_SOURCE[0]}")/slurm-etc.sh" restore
