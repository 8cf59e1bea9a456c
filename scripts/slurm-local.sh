#!/usr/bin/env bash
# A single-node Slurm on this machine (Debian slurm-wlm + munge): munged, slurmctld and slurmd
# started from one folder (its slurm.conf, munge key, state, spool and logs) and left running, so
# `sbatch scripts/sweep.sbatch ...` works here as on a cluster (docs/sweeps.md "Slurm on one
# machine"). Partitions: `cpu` (the default; every core) and, where nvidia-smi lists GPUs, `gpu`
# (the same node with its GPUs as gres gpu:N). Needs root (the daemons run as root; munged as the
# munge user); installs slurm-wlm and munge when missing.
#
# Usage: scripts/slurm-local.sh start|stop|status|env
#   start    write the configuration (free ports), start the daemons, wait until the node is idle;
#            prints the line to paste: export SLURM_CONF=DIR/slurm.conf
#   stop     stop the daemons (the folder, its state and logs are kept)
#   status   which daemons run, and sinfo; exit 0 when all three run, 1 when not
#   env      print the export SLURM_CONF line
# Environment: FH_SLURM_DIR (default /var/tmp/foxhunt-slurm): the folder; FH_SLURM_CPUS (default:
# every core) and FH_SLURM_GPUS (default: as many as nvidia-smi lists; 0: no gpu partition).
# Exit status: 0 ok, 1 a daemon did not start or does not run, 2 usage, 77 cannot run here
# (not root, or the packages cannot be installed).
set -uo pipefail
D=${FH_SLURM_DIR:-/var/tmp/foxhunt-slurm}
conf="$D/slurm.conf"
daemons=(munged slurmctld slurmd)

pid_file() { case $1 in munged) echo "$D/munge/munged.pid" ;; *) echo "$D/$1.pid" ;; esac; }
running() {  # the pid file names a live process of that daemon (not another that took its pid)
    local f
    f=$(pid_file "$1")
    [ -s "$f" ] && [ "$(ps -o comm= -p "$(cat "$f")" 2>/dev/null)" = "$1" ]
}
all_running() { local d; for d in "${daemons[@]}"; do running "$d" || return 1; done; }
say() { echo "slurm-local: $*" >&2; }

stop() {
    local d f
    for d in slurmd slurmctld munged; do
        f=$(pid_file "$d")
        running "$d" && kill "$(cat "$f")" 2>/dev/null
    done
    for _ in $(seq 20); do
        running slurmd || running slurmctld || running munged || break
        sleep 0.5
    done
    for d in slurmd slurmctld munged; do
        f=$(pid_file "$d")
        if running "$d"; then kill -9 "$(cat "$f")" 2>/dev/null; say "$d did not stop: killed"; fi
        rm -f "$f"
    done
}

status() {
    local d code=0
    for d in "${daemons[@]}"; do
        if running "$d"; then echo "$d: running (pid $(cat "$(pid_file "$d")"))"; else echo "$d: not running"; code=1; fi
    done
    if [ $code -eq 0 ]; then SLURM_CONF=$conf timeout 5 sinfo; fi
    return $code
}

start() {
    if [ "$(id -u)" -ne 0 ]; then say "needs root: the daemons run as root (sudo $0 start)"; exit 77; fi
    if all_running; then say "already running from $D"; echo "export SLURM_CONF=$conf"; return 0; fi
    local missing=() p
    for p in slurm-wlm munge; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        say "installing ${missing[*]}"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
            { say "cannot install ${missing[*]}"; exit 77; }
    fi
    stop 2>/dev/null  # whatever is left of an earlier start

    mkdir -p "$D/munge" "$D/state" "$D/spool" || { say "cannot create $D"; exit 1; }
    chmod 755 "$D"
    chown munge:munge "$D/munge" && chmod 755 "$D/munge"
    if [ ! -s "$D/munge/munge.key" ]; then
        mungekey --create --keyfile="$D/munge/munge.key" || { say "mungekey failed"; exit 1; }
    fi
    chown munge:munge "$D/munge/munge.key" && chmod 400 "$D/munge/munge.key"
    runuser -u munge -- munged --socket="$D/munge/munge.sock" --key-file="$D/munge/munge.key" \
        --pid-file="$D/munge/munged.pid" --log-file="$D/munge/munged.log" --seed-file="$D/munge/munged.seed" ||
        { say "munged did not start:"; tail -n 5 "$D/munge/munged.log" >&2; exit 1; }

    # The machine: cores, memory (MiB, less 10% for the system), GPUs.
    local cpus mem gpus host port1 port2
    cpus=${FH_SLURM_CPUS:-$(nproc)}
    mem=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
    gpus=${FH_SLURM_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
    host=$(hostname -s)
    read -r port1 port2 < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
    local gres_node="" gres_types="" gpu_partition=""
    if [ "$gpus" -gt 0 ]; then
        gres_types="GresTypes=gpu"
        gres_node=" Gres=gpu:$gpus"
        gpu_partition="PartitionName=gpu Nodes=$host MaxTime=INFINITE State=UP"
        printf 'NodeName=%s Name=gpu File=/dev/nvidia[0-%d]\n' "$host" $((gpus - 1)) >"$D/gres.conf"
    else
        rm -f "$D/gres.conf"
    fi
    cat >"$conf" <<EOF
# Written by scripts/slurm-local.sh start (rewritten at each start).
ClusterName=foxhunt-local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmctldPort=$port1
SlurmdPort=$port2
AuthType=auth/munge
AuthInfo=socket=$D/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
KillWait=30
MinJobAge=600
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
$gres_types
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem$gres_node State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
$gpu_partition
EOF
    export SLURM_CONF=$conf
    slurmctld -f "$conf" && slurmd -f "$conf" ||
        { say "the daemons did not start:"; tail -n 5 "$D/slurmctld.log" "$D/slurmd.log" >&2; stop; exit 1; }
    for _ in $(seq 60); do
        if timeout 5 sinfo -h -o %T 2>/dev/null | grep -q idle; then
            say "up: partitions cpu ($cpus cores)${gpu_partition:+ and gpu ($gpus GPUs)} on $host; state, logs: $D"
            echo "export SLURM_CONF=$conf"
            return 0
        fi
        sleep 0.5
    done
    say "the node did not come up:"
    tail -n 5 "$D/slurmctld.log" "$D/slurmd.log" >&2
    stop
    exit 1
}

case ${1:-} in
    start) start ;;
    stop) stop; say "stopped (the folder $D is kept)" ;;
    status) status ;;
    env) echo "export SLURM_CONF=$conf" ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
    *) echo "usage: scripts/slurm-local.sh start|stop|status|env (--help)" >&2; exit 2 ;;
esac
