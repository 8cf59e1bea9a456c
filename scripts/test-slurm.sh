#!/usr/bin/env bash
# Tests scripts/sweep.sbatch against a real single-node Slurm started here on localhost (Debian
# slurm-wlm + munge, installed when missing; needs root): a 2 x 2 CPU job array of tiny DQN runs;
# task 0 is requeued with `scontrol requeue` while it trains (SIGTERM from Slurm: it checkpoints
# and resumes when it runs again) and task 1 gets the time-limit signal (SIGUSR1 to the batch
# shell: it checkpoints and requeues itself); then every run must complete, both requeued ones
# from their checkpoints. The daemons run from a temporary folder on free ports and are stopped
# at the end. Ends with "N passed, N failed"; exit 0 when all passed, 77 when it cannot run here.
# Usage: scripts/test-slurm.sh [--keep]   (--keep: leave the temporary folder for inspection)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
keep=0
[ "${1:-}" = --keep ] && keep=1
exe="$root/build/foxhunt-train"
passed=0 failed=0
check() {  # check "what" command...
    local what=$1
    shift
    if "$@"; then passed=$((passed + 1)); echo "ok: $what"; else failed=$((failed + 1)); echo "FAILED: $what"; fi
}
finish() { echo "$passed passed, $failed failed"; [ $failed -eq 0 ]; exit $?; }

[ -x "$exe" ] || { echo "test-slurm: build first (scripts/setup.sh): no $exe"; echo "0 passed, 1 failed"; exit 1; }
if [ "$(id -u)" -ne 0 ]; then echo "test-slurm: skipped: needs root (it starts munged, slurmctld and slurmd)"; exit 77; fi
missing=()
for p in slurm-wlm munge; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
if ((${#missing[@]})); then
    echo "test-slurm: installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
        { echo "test-slurm: skipped: cannot install ${missing[*]}"; exit 77; }
fi

D=$(mktemp -d /tmp/fh-slurm-XXXXXX)
chmod 755 "$D"
pids=()
cleanup() {
    local f
    for f in "$D/slurmd.pid" "$D/slurmctld.pid" "$D/munge/munged.pid"; do
        [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
    done
    sleep 1
    for f in "$D/slurmd.pid" "$D/slurmctld.pid" "$D/munge/munged.pid"; do
        [ -s "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
    done
    if [ $keep -eq 1 ]; then echo "test-slurm: kept $D"; else rm -rf "$D"; fi
}
trap cleanup EXIT

# --- munge on its own socket ------------------------------------------------------------------
mkdir -p "$D/munge" "$D/state" "$D/spool" "$D/out"
chown munge:munge "$D/munge" && chmod 755 "$D/munge"
mungekey --create --keyfile="$D/munge/munge.key" && chown munge:munge "$D/munge/munge.key" && chmod 400 "$D/munge/munge.key"
runuser -u munge -- munged --socket="$D/munge/munge.sock" --key-file="$D/munge/munge.key" \
    --pid-file="$D/munge/munged.pid" --log-file="$D/munge/munged.log" --seed-file="$D/munge/munged.seed" ||
    { echo "test-slurm: munged did not start"; cat "$D/munge/munged.log"; echo "0 passed, 1 failed"; exit 1; }

# --- slurmctld + slurmd on two free ports -----------------------------------------------------
read -r port1 port2 < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
host=$(hostname -s)
cat >"$D/slurm.conf" <<EOF
ClusterName=fhtest
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
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 RealMemory=2000 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$D/slurm.conf"
t0=$(date +%s)
slurmctld -f "$SLURM_CONF" && slurmd -f "$SLURM_CONF" || { echo "test-slurm: the daemons did not start"; tail "$D"/*.log; echo "0 passed, 1 failed"; exit 1; }
up=0
for _ in $(seq 60); do
    timeout 5 sinfo -h -o %T 2>/dev/null | grep -q idle && { up=1; break; }
    sleep 0.5
done
check "Slurm is up on localhost ($(( $(date +%s) - t0 )) s)" test $up -eq 1
[ $up -eq 1 ] || { tail "$D"/slurmctld.log "$D"/slurmd.log; finish; }

# --- the job array ----------------------------------------------------------------------------
sweep="$D/sweep"
grid=(--profile dqn-smoketest --cpu --output "$sweep" --set training.learning_rate=1e-3,3e-4 --seeds 1,2
      -- --set run.total_steps=6000 --set run.checkpoint_interval=400 --set run.log_interval=200)
n=$(scripts/sweep.sh --print-grid "${grid[@]}" | wc -l)
check "the grid has 4 points" test "$n" -eq 4
job=$(sbatch --parsable --array=0-$((n - 1)) --cpus-per-task=1 --output="$D/out/slurm-%A_%a.out" \
      --chdir="$root" --export=ALL,FH_SWEEP_SCRIPT="$root/scripts/sweep.sh" scripts/sweep.sbatch "${grid[@]}")
check "sbatch accepted the array ($job)" test -n "$job"

run_dir() { ls -d "$sweep"/*",training.learning_rate=$1,seed=$2" 2>/dev/null; }
wait_metrics() {  # waits until run $1 $2 has logged training (it is mid-run)
    local d
    for _ in $(seq 240); do
        d=$(run_dir "$1" "$2")
        [ -n "$d" ] && [ "$(wc -l <"$d/metrics.jsonl" 2>/dev/null || echo 0)" -ge 2 ] && return 0
        sleep 0.5
    done
    return 1
}
# Task 0 (learning rate 1e-3, seed 1): requeued by scontrol while it trains.
check "task 0 is training" wait_metrics 0.001 1
scontrol requeue "${job}_0"
check "scontrol requeue ${job}_0" test $? -eq 0
# Task 1 (1e-3, seed 2): the time-limit warning (SIGUSR1 to the batch shell only).
check "task 1 is training" wait_metrics 0.001 2
# (scancel may report "Job can not be altered now" for an array task and still deliver it: the
# checks below look at what the task did.)
scancel --batch --signal=USR1 "${job}_1"

# --- every run completes ----------------------------------------------------------------------
done_all=0
for _ in $(seq 600); do
    if [ -z "$(squeue -h -j "$job" 2>/dev/null)" ]; then done_all=1; break; fi
    # Slurm holds a requeued task for about two minutes (reason BeginTime); release it now.
    squeue -h -j "$job" -t PD -o '%i %r' 2>/dev/null | while read -r id reason; do
        [ "$reason" = BeginTime ] && scontrol update JobId="$id" StartTime=now 2>/dev/null
    done
    sleep 1
done
check "the array finished ($(( $(date +%s) - t0 )) s after Slurm started)" test $done_all -eq 1
for d in "$sweep"/*/; do
    [ -f "$d/config.toml" ] || continue
    check "$(basename "$d") completed" grep -q '"status":"completed"' "$d/summary.json"
done
check "4 run directories, no duplicate" test "$(ls -d "$sweep"/*/ | grep -vc sweep-logs)" -eq 4
out0=$(cat "$D"/out/slurm-*_0.out 2>/dev/null)
out1=$(cat "$D"/out/slurm-*_1.out 2>/dev/null)
check "task 0 was interrupted, then resumed from its checkpoint" \
    bash -c 'grep -q "interrupted" <<<"$1" && grep -q "done (resumed)" <<<"$1"' _ "$out0"
check "task 1 checkpointed at the time-limit signal, requeued itself and resumed" \
    bash -c 'grep -q "requeued" <<<"$1" && grep -q "done (resumed)" <<<"$1"' _ "$out1"
echo "--- slurm-${job}_0.out"; printf '%s\n' "$out0"
echo "--- slurm-${job}_1.out"; printf '%s\n' "$out1"
if [ $failed -gt 0 ]; then
    echo "--- logs"; tail -n 20 "$D/slurmctld.log" "$D/slurmd.log"; tail -n 5 "$sweep"/sweep-logs/*.log
fi
finish
