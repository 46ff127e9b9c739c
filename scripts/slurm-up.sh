#!/usr/bin/env bash
# Start a one-node Slurm cluster with slurmdbd accounting (MariaDB), without systemd, for the live Slurm tests
# (tests/test_slurm_live.py). Run as root with the Debian packages of setup-and-test.sh installed (which runs this);
# stop it with slurm-down.sh.
#
#   STATE_DIR  a fresh folder for the database, spool, logs and pid files (default /tmp/firstfault-slurm); its
#              parents must be traversable by the slurm and mysql users
#   CLUSTER    ClusterName (default ci)          DB_PORT  MariaDB port on 127.0.0.1 (default 3306)
#
# The node is always `node1` (not the machine's random host name) and advertises two `gpu:h100` GRES backed by
# empty files, so accounting records `gres/gpu:h100` TRES like a real GPU node. Exits non-zero when a daemon is not ready in time.
# The files it writes in /etc/slurm are saved first (scripts/slurm-etc.sh) and put back by slurm-down.sh.
set -euo pipefail

STATE_DIR=${STATE_DIR:-/tmp/firstfault-slurm}
CLUSTER=${CLUSTER:-ci}
NODE=node1
DB_PORT=${DB_PORT:-3306}
DB_PASS=slurmci
CONF_DIR=/etc/slurm
SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

started=$(date +%s.%N)
say() { awk -v now="$(date +%s.%N)" -v t0="$started" -v msg="$*" 'BEGIN { printf "slurm-up [%5.1fs] %s\n", now - t0, msg }'; }

# await SECONDS WHAT COMMAND...: poll every 0.2 s until COMMAND succeeds
await() {
    local limit=$1 what=$2
    shift 2
    local deadline=$(($(date +%s) + limit))
    until "$@" >/dev/null 2>&1; do
        if (($(date +%s) >= deadline)); then
            echo "slurm-up: $what not ready after ${limit}s; logs in $STATE_DIR/log" >&2
            return 1
        fi
        sleep 0.2
    done
    say "$what ready"
}

for tool in slurmctld slurmd slurmdbd sacct munged mariadbd mariadb-install-db; do
    command -v "$tool" >/dev/null || { echo "slurm-up: $tool not found; install: apt-get install -y --no-install-recommends slurmctld slurmd slurm-client slurmdbd munge mariadb-server" >&2; exit 1; }
done
if scontrol ping 2>/dev/null | grep -q UP; then
    # one cluster per machine (the configs live in /etc/slurm): a running one is used as it is
    echo "slurm-up: a slurmctld is already answering; left as it is"
    exit 0
fi
if [ -n "$(ls -A "$STATE_DIR/mysql" 2>/dev/null)" ]; then
    echo "slurm-up: $STATE_DIR was used before; give a fresh STATE_DIR" >&2
    exit 1
fi

# Daemons running as slurm/mysql must reach their folders: the state dir stays world-traversable.
mkdir -p "$STATE_DIR"/{log,run,mysql,slurmctld,slurmd,dev,epilog}
chmod 755 "$STATE_DIR"
chown slurm:slurm "$STATE_DIR"/{log,run,slurmctld}
chown mysql:mysql "$STATE_DIR"/mysql

# munge: the key must belong to the munge user, and munged must run as that user
install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
[ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
chown munge:munge /etc/munge/munge.key
chmod 0600 /etc/munge/munge.key
runuser -u munge -- /usr/sbin/munged
await 10 munged sh -c 'munge -n | unmunge'

# MariaDB on a fresh datadir; mariadbd does not daemonize itself
mariadb-install-db --no-defaults --user=mysql --datadir="$STATE_DIR/mysql" --skip-test-db \
    --auth-root-authentication-method=socket >"$STATE_DIR/log/mariadb-install.log" 2>&1
# slurmdbd warns below a 512 MB buffer pool and a 450 s lock wait; the memory is only touched as used
setsid /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$STATE_DIR/mysql" \
    --socket="$STATE_DIR/mysql/mysqld.sock" --pid-file="$STATE_DIR/mysql/mariadbd.pid" \
    --bind-address=127.0.0.1 --port="$DB_PORT" --log-error="$STATE_DIR/log/mariadb.err" \
    --innodb-buffer-pool-size=512M --innodb-lock-wait-timeout=900 </dev/null >/dev/null 2>&1 &
echo $! >"$STATE_DIR/run/mariadbd.pid"
SQL_CLIENT=(mariadb --no-defaults --socket="$STATE_DIR/mysql/mysqld.sock" -uroot)
await 60 mariadbd mariadb-admin --no-defaults --socket="$STATE_DIR/mysql/mysqld.sock" -uroot ping
"${SQL_CLIENT[@]}" <<SQL
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
FLUSH PRIVILEGES;
SQL

CONF_DIR=$CONF_DIR STATE_DIR=$STATE_DIR bash "$SCRIPTS/slurm-etc.sh" save
mkdir -p "$CONF_DIR"
# slurmdbd refuses a config that is not owned by its SlurmUser or that others can read
cat >"$CONF_DIR/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=slurm
DebugLevel=info
LogFile=$STATE_DIR/log/slurmdbd.log
PidFile=$STATE_DIR/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
chown slurm:slurm "$CONF_DIR/slurmdbd.conf"
chmod 0600 "$CONF_DIR/slurmdbd.conf"

# EpilogSlurmctld runs for every finished job; it does nothing unless a test installs an executable `hook` beside it
# (tests/test_automation.py does, only while it runs), so the other tests' failing jobs queue nothing.
cat >"$STATE_DIR/epilog/slurmctld-epilog.sh" <<'EOF'
#!/bin/sh
hook="$(dirname "$0")/hook"
[ -x "$hook" ] || exit 0
exec "$hook"
EOF
chmod 0755 "$STATE_DIR/epilog" "$STATE_DIR/epilog/slurmctld-epilog.sh"

# The node's CPU layout as slurmd sees it (a node reporting fewer CPUs than configured is drained).
HARDWARE=$(slurmd -C | head -n1 | sed -e 's/^NodeName=[^ ]*//' -e 's/RealMemory=[0-9]*//')
cat >"$CONF_DIR/slurm.conf" <<EOF
ClusterName=$CLUSTER
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# also the wait before a requeued job may start again (default 120 s)
AuthInfo=cred_expire=10
MailProg=/bin/true
EpilogSlurmctld=$STATE_DIR/epilog/slurmctld-epilog.sh
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$STATE_DIR/slurmctld
SlurmdSpoolDir=$STATE_DIR/slurmd
SlurmctldPidFile=$STATE_DIR/run/slurmctld.pid
SlurmdPidFile=$STATE_DIR/run/slurmd.pid
SlurmctldLogFile=$STATE_DIR/log/slurmctld.log
SlurmdLogFile=$STATE_DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups and no systemd in a container
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
# scheduler passes every 2 s start requeued jobs as soon as they are eligible (defaults: 30 s / 60 s)
SchedulerParameters=bf_interval=2,sched_interval=2
MpiDefault=none
ReturnToService=2
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
AccountingStorageTRES=gres/gpu,gres/gpu:h100
JobCompType=jobcomp/none
# the controller keeps finished jobs for 5 minutes, so scontrol show job still names their output files
MinJobAge=300
KillWait=5
OverTimeLimit=0
InactiveLimit=0
JobRequeue=1
NodeName=$NODE NodeAddr=127.0.0.1 Gres=gpu:h100:2 $HARDWARE State=UNKNOWN
# every job gets a limit, so its Timelimit does not depend on which scheduler pass started it
PartitionName=debug Nodes=$NODE Default=YES DefaultTime=10 MaxTime=INFINITE State=UP
EOF
# slurmd counts a GPU only with a device file; plain files do (TaskPlugin=task/none binds no devices)
touch "$STATE_DIR"/dev/nvidia0 "$STATE_DIR"/dev/nvidia1
cat >"$CONF_DIR/gres.conf" <<EOF
NodeName=$NODE Name=gpu Type=h100 File=$STATE_DIR/dev/nvidia[0-1]
EOF
chmod 0644 "$CONF_DIR/slurm.conf" "$CONF_DIR/gres.conf"

slurmdbd
await 60 slurmdbd sacctmgr -n show cluster
sacctmgr -i add cluster "$CLUSTER" >/dev/null
slurmctld
await 60 slurmctld sh -c 'scontrol ping | grep -q UP'
slurmd -N "$NODE"
await 60 "node $NODE" sh -c "sinfo -h -n $NODE -o %T | grep -qx idle"
# end to end: scheduling, munge credentials and a step launch on the node
timeout 60 srun --job-name=smoke --time=1 true
say "cluster $CLUSTER up (STATE_DIR=$STATE_DIR)"
