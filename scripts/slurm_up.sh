#!/bin/sh
# Start a private single-node SLURM with accounting (munge, MariaDB, slurmdbd, slurmctld, slurmd)
# under a temp dir, using packages already installed (scripts/ci_services.sh installs them).
# Prints the SLURM_CONF path on the last line of stdout; everything else goes to stderr.
# Stop it, and remove DIR, with: scripts/slurm_up.sh --stop DIR   (DIR = dirname of SLURM_CONF)
set -eu

if [ "${1:-}" = "--stop" ]; then
    dir=$2
    SLURM_CONF="$dir/slurm.conf" scancel -u "$(id -un)" 2>/dev/null || true
    pids=""
    for f in slurmd.pid slurmctld.pid slurmdbd.pid mariadb.pid run/mariadb.pid; do
        if [ -f "$dir/$f" ]; then pids="$pids $(cat "$dir/$f")"; fi
    done
    # job steps of this cluster only: their scripts live under this dir's spool
    for c in /proc/[0-9]*/cmdline; do
        if grep -qF "$dir/spool" "$c" 2>/dev/null; then
            p=${c#/proc/}; p=${p%/cmdline}
            pids="$pids $p $(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)"
        fi
    done
    # shellcheck disable=SC2086
    kill $pids 2>/dev/null || true
    n=50
    while [ "$n" -gt 0 ]; do
        alive=""
        for p in $pids; do
            if [ -d "/proc/$p" ] && ! grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null; then alive="$alive $p"; fi
        done
        [ -z "$alive" ] && break
        sleep 0.1; n=$((n - 1))
    done
    # slurmd waits for its steps; after 5 s it is told firmly
    # shellcheck disable=SC2086
    [ -n "${alive:-}" ] && kill -9 $alive 2>/dev/null
    # the cluster's dir (its database, state and logs) goes with it; only one this script made
    case "$dir" in /tmp/evaldesk-slurm.*) rm -rf "$dir" ;; esac
    exit 0
fi

for bin in munged mariadbd mariadb-install-db slurmdbd slurmctld slurmd sacct; do
    if ! command -v "$bin" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$bin" ]; then
        echo "slurm_up: $bin not installed (run scripts/ci_services.sh)" >&2
        exit 3
    fi
done
PATH=$PATH:/usr/sbin

dir=$(mktemp -d /tmp/evaldesk-slurm.XXXXXX)
chmod 755 "$dir"
mkdir -p "$dir/state" "$dir/spool" "$dir/db" "$dir/run"
chown mysql:mysql "$dir/db" "$dir/run"
log() { echo "slurm_up: $*" >&2; }

wait_for() {  # wait_for SECONDS CMD...
    n=$(( $1 * 10 )); shift
    while [ "$n" -gt 0 ]; do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.1; n=$((n - 1))
    done
    return 1
}

# munge: one daemon per machine; reuse a running one
if ! munge -n >/dev/null 2>&1; then
    mkdir -p /run/munge && chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged --force 2>/dev/null || runuser -u munge -- /usr/sbin/munged
    wait_for 5 munge -n || { log "munged did not start"; exit 4; }
fi

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dbdport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
ctlport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sock="$dir/run/mysqld.sock"

log "MariaDB in $dir/db on port $port"
mariadb-install-db --user=mysql --datadir="$dir/db" --auth-root-authentication-method=normal \
    --skip-test-db >"$dir/mariadb-install.log" 2>&1
runuser -u mysql -- mariadbd --no-defaults --datadir="$dir/db" --bind-address=127.0.0.1 --port="$port" \
    --socket="$sock" --pid-file="$dir/run/mariadb.pid" --skip-grant-tables=0 >"$dir/mariadb.log" 2>&1 &
echo $! >"$dir/mariadb.pid"
wait_for 15 mariadb --socket="$sock" -uroot -e 'select 1' || { log "mariadbd did not start"; exit 5; }
mariadb --socket="$sock" -uroot -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
  CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw';
  CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmpw';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
  FLUSH PRIVILEGES;"

cat >"$dir/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdPort=$dbdport
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$port
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
PidFile=$dir/slurmdbd.pid
LogFile=$dir/slurmdbd.log
EOF
chmod 600 "$dir/slurmdbd.conf"

cat >"$dir/slurm.conf" <<EOF
ClusterName=test
SlurmctldHost=localhost
SlurmctldPort=$ctlport
SlurmdPort=$dport
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=300
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$dbdport
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
# every test shares this node: no job waits for a core that another test's job holds
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
EOF
export SLURM_CONF="$dir/slurm.conf"

log "slurmdbd on port $dbdport"
slurmdbd -D >"$dir/slurmdbd.out" 2>&1 &
echo $! >"$dir/slurmdbd.pid"
# slurmdbd creates its tables on first start; sacctmgr answers once it is serving
wait_for 15 sacctmgr -n list cluster || { log "slurmdbd did not start (see $dir/slurmdbd.log)"; exit 6; }
sacctmgr -i add cluster test >/dev/null 2>&1 || true

log "slurmctld on port $ctlport, slurmd on port $dport"
slurmctld -D -i >"$dir/slurmctld.out" 2>&1 &
echo $! >"$dir/slurmctld.pid"
slurmd -D -N localhost >"$dir/slurmd.out" 2>&1 &
echo $! >"$dir/slurmd.pid"
wait_for 15 sh -c 'sinfo -h -o %T | grep -Eq "idle|mixed|alloc"' || { log "node did not come up (see $dir)"; exit 7; }
echo "$SLURM_CONF"
