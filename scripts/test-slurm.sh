#!/usr/bin/env bash
# Tests scripts/sweep.sbatch against a real single-node Slurm started here on localhost by
# scripts/slurm-local.sh (Debian slurm-wlm + munge, installed when missing; needs root) from a
# temporary folder: a 2 x 2 CPU job array of tiny DQN runs; task 0 is requeued with `scontrol
# requeue` while it trains (SIGTERM from Slurm: it checkpoints and resumes when it runs again) and
# task 1 gets the time-limit signal (SIGUSR1 to the batch shell: it checkpoints and requeues
# itself); then every run must complete, both requeued ones from their checkpoints, with each
# task's log under the sweep directory. Then the bare documented form (nothing after --, the
# profile's own budget) as a second array. The daemons are stopped at the end. Ends with
# "N passed, N failed"; exit 0 when all passed, 77 when it cannot run here.
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

D=$(mktemp -d /tmp/fh-slurm-XXXXXX)
chmod 755 "$D"
export FH_SLURM_DIR="$D/slurm"
cleanup() {
    scripts/slurm-local.sh stop 2>/dev/null
    if [ $keep -eq 1 ]; then echo "test-slurm: kept $D"; else rm -rf "$D"; fi
}
trap cleanup EXIT

t0=$(date +%s)
scripts/slurm-local.sh start >"$D/start.out"
code=$?
[ $code -ne 77 ] || { echo "test-slurm: skipped: slurm-local.sh cannot run here"; exit 77; }
check "Slurm is up on localhost ($(( $(date +%s) - t0 )) s)" test $code -eq 0
[ $code -eq 0 ] || finish
export SLURM_CONF="$FH_SLURM_DIR/slurm.conf"
check "slurm-local.sh start prints the SLURM_CONF line" grep -qx "export SLURM_CONF=$SLURM_CONF" "$D/start.out"
check "slurm-local.sh status: the three daemons run" bash -c 'scripts/slurm-local.sh status >/dev/null'
check "a second start leaves it running" bash -c 'scripts/slurm-local.sh start >/dev/null 2>&1 && scripts/slurm-local.sh status >/dev/null'

# --- the job array ----------------------------------------------------------------------------
sweep="$D/sweep"
grid=(--profile dqn-smoketest --cpu --output "$sweep" --set training.learning_rate=1e-3,3e-4 --seeds 1,2
      -- --set run.total_steps=6000 --set run.checkpoint_interval=400 --set run.log_interval=200)
n=$(scripts/sweep.sh --print-grid "${grid[@]}" | wc -l)
check "the grid has 4 points" test "$n" -eq 4
before=$(ls "$root"/slurm-*.out 2>/dev/null | wc -l)
job=$(sbatch --parsable --array=0-$((n - 1)) --cpus-per-task=1 --chdir="$root" \
      --export=ALL,FH_SWEEP_SCRIPT="$root/scripts/sweep.sh" scripts/sweep.sbatch "${grid[@]}")
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
wait_array() {  # wait_array JOB: 0 once the array has left the queue
    for _ in $(seq 600); do
        [ -n "$(squeue -h -j "$1" 2>/dev/null)" ] || return 0
        # Slurm holds a requeued task for about two minutes (reason BeginTime); release it now.
        squeue -h -j "$1" -t PD -o '%i %r' 2>/dev/null | while read -r id reason; do
            [ "$reason" = BeginTime ] && scontrol update JobId="$id" StartTime=now 2>/dev/null
        done
        sleep 1
    done
    return 1
}
wait_array "$job"
check "the array finished ($(( $(date +%s) - t0 )) s after Slurm started)" test $? -eq 0
for d in "$sweep"/*/; do
    [ -f "$d/config.toml" ] || continue
    check "$(basename "$d") completed" grep -q '"status":"completed"' "$d/summary.json"
done
check "4 run directories, no duplicate" test "$(ls -d "$sweep"/*/ | grep -vc sweep-logs)" -eq 4
check "each task's log is in the sweep's sweep-logs/" test "$(ls "$sweep"/sweep-logs/slurm-"${job}"_*.out | wc -l)" -eq 4
check "no slurm-*.out where the array was submitted" test "$(ls "$root"/slurm-*.out 2>/dev/null | wc -l)" -eq "$before"
check "one grid and one job table for the sweep (no file per point)" \
    bash -c 'test "$(wc -l <"$1/sweep-grid.tsv")" -eq 4 && test "$(wc -l <"$1/sweep-jobs.tsv")" -eq 4 &&
             test -z "$(ls "$1" | grep -v -e "^sweep-grid.tsv$" -e "^sweep-jobs.tsv$" -e "^sweep-logs$" -e ",seed=")"' _ "$sweep"
out0=$(cat "$sweep"/sweep-logs/slurm-"${job}"_0.out 2>/dev/null)
out1=$(cat "$sweep"/sweep-logs/slurm-"${job}"_1.out 2>/dev/null)
check "task 0 was interrupted, then resumed from its checkpoint" \
    bash -c 'grep -q "interrupted" <<<"$1" && grep -q "done (resumed)" <<<"$1"' _ "$out0"
check "task 1 checkpointed at the time-limit signal, requeued itself and resumed" \
    bash -c 'grep -q "requeued" <<<"$1" && grep -q "done (resumed)" <<<"$1"' _ "$out1"
echo "--- slurm-${job}_0.out"; printf '%s\n' "$out0"
echo "--- slurm-${job}_1.out"; printf '%s\n' "$out1"

# --- the bare form: nothing after --, the profile's budget -------------------------------------
bare=(--profile dqn-smoketest --cpu --output "$D/bare" --set training.learning_rate=1e-3,3e-4 --seeds 1,2)
job2=$(sbatch --parsable --array=0-3 --cpus-per-task=1 --chdir="$root" scripts/sweep.sbatch "${bare[@]}")
check "sbatch accepted the bare array ($job2)" test -n "$job2"
wait_array "$job2"
check "the bare array finished" test $? -eq 0
check "the bare array's 4 runs completed" test "$(grep -l '"status":"completed"' "$D"/bare/*/summary.json 2>/dev/null | wc -l)" -eq 4
if [ $failed -gt 0 ]; then
    echo "--- logs"; tail -n 20 "$FH_SLURM_DIR/slurmctld.log" "$FH_SLURM_DIR/slurmd.log"
    tail -n 5 "$sweep"/sweep-logs/*.log "$D"/bare/sweep-logs/* 2>/dev/null
fi
finish
