#!/usr/bin/env bash
# Runs a grid of foxhunt-train runs: on the CPU, or one job slot per GPU; with GNU parallel when it
# is installed, else with a built-in job pool that behaves the same. Each run is named from its
# overrides and seed (--auto-name) with run.on_exists = "resume": re-running the same command skips
# finished runs and resumes interrupted ones, so it completes a sweep. Ctrl-C (or SIGTERM) stops
# every running job once, cleanly: each writes its checkpoint and summary.json, then exits 130.
# docs/sweeps.md is the reference; docs/cli.md "Sweeps and populations: examples" has examples.
set -uo pipefail
if ((BASH_VERSINFO[0] < 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] < 1))); then
    echo "sweep: needs bash 5.1 or newer (wait -n -p), this is bash $BASH_VERSION" >&2
    exit 2
fi

usage() {
    cat <<'EOF'
Usage: scripts/sweep.sh --profile P --output DIR [grid] [where] [-- foxhunt-train options]

Grid (the cross product of every --set axis, the --grid lines and the seeds):
  --set KEY=V1,V2,...   one axis; values are TOML, split at commas outside [], () and quotes
                        (--set dqn.hidden=[64,64],[128,128]); a per-agent key may take a
                        search space, loguniform(a,b), uniform(a,b) or choice(v1,...), which
                        each seed's agent draws (docs/sweeps.md "Searching")
  --grid FILE           one override set per line: "KEY=VALUE KEY=VALUE" (# comments, blank
                        lines ignored); crossed with the --set axes and the seeds
  --seeds S1,S2,...     seeds (default: the profile's run.seed)
Where:
  --gpus LIST|all       GPUs by index (0,1) or every GPU nvidia-smi lists; one job slot per GPU
  --cpu                 train on the CPU (--device cpu)
                        (default: all GPUs when nvidia-smi lists any, else the CPU)
  -j N                  jobs per GPU, or in total on the CPU (default 1)
  --exe PATH            the foxhunt-train executable (default: build/foxhunt-train of this
                        checkout, else foxhunt-train on PATH)
  --no-parallel         use the built-in job pool even when GNU parallel is installed
  --no-population       one process per run; by default the runs that differ only in the seed and
                        per-agent keys (learning rate, gamma, ...) train as populations, one
                        process per job slot (docs/sweeps.md "Population")
Other:
  --print-grid          print the grid, one point per line (tab-separated overrides), and exit
  --point I             run point I (0-based) alone, in the foreground (a Slurm array task)
  --dry-run             print each process's command and exit (nothing is written)
  -h, --help            this text

Each run's stdout and stderr go to DIR/sweep-logs/point-<I>.log (a population's to the log of
each of its runs); one line per finished run is printed, then a summary (failed runs counted in
runs, not processes). Exit status: 0 when every run finished (or was skipped), 130 when
interrupted, 1 when a run failed (its log says why), 2 for a usage error.
Then: foxhunt-train compare DIR --group-by-seed; foxhunt-train report DIR.
EOF
}

die() { echo "sweep: $*" >&2; exit 2; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
self="$here/$(basename "${BASH_SOURCE[0]}")"

# --- The job itself (called by GNU parallel or the job pool): __job SLOT POINT -----------------
# Runs one point with the device of its slot, forwards one SIGINT/SIGTERM to the run (which is in
# its own session, so a terminal's Ctrl-C never reaches it twice) and prints one status line.
# Each run's per-agent keys (kept in step with agent_keys() in src/run/population_grid.cpp; a test checks).
agent_keys="run.seed training.learning_rate training.gamma training.tau training.target_update_period training.epsilon_start training.epsilon_end training.epsilon_decay_steps training.grad_clip_norm training.max_bad_updates dqn.cql_alpha dqn.mse_blend_alpha dqn.curiosity_coef dqn.her_ratio dqn.her_reward ppo.clip ppo.gae_lambda ppo.entropy_coef ppo.value_coef ppo.diversity_coef ppo.curiosity_coef iql.expectile iql.beta iql.max_weight"
is_agent_key() { [[ " $agent_keys " == *" $1 "* ]]; }
# A value written as a search space (loguniform(a,b), uniform(a,b), choice(v1,...)): a population
# draws it, one point per agent (docs/sweeps.md "Searching"), so its point always runs as one.
is_space() { [[ "$1" =~ ^[A-Za-z_]+\(.*\)$ ]]; }
has_space() {  # has_space LINE: a point's tab-separated tokens
    local t tokens
    IFS=$'\t' read -r -a tokens <<<"$1"
    for t in "${tokens[@]}"; do is_space "${t#*=}" && return 0; done
    return 1
}

# A job is one point (one run) or several (one population): __job SLOT JOB POINTS, POINTS the
# job's point indices ("3 4 5"), JOB its index (naming a population's files in sweep-logs/).
if [ "${1:-}" = "__job" ]; then
    slot=$2 job=$3
    read -r -a job_points <<<"$4"
    # This invocation's outcome of each point, for the sweep's summary (not under --point).
    outcome=${FH_SWEEP_STATUS:+$FH_SWEEP_STATUS/job-$job}
    [ -z "$outcome" ] || : >"$outcome"
    IFS=',' read -r -a devices <<<"$FH_SWEEP_DEVICES"
    device=${devices[$(( (slot - 1) % ${#devices[@]} ))]}
    eval "extra=($FH_SWEEP_EXTRA)"
    as_population=0
    if [ ${#job_points[@]} -gt 1 ] || has_space "$(sed -n "$((job_points[0] + 1))p" "$FH_SWEEP_GRID")"; then
        as_population=1
    fi
    if [ $as_population -eq 1 ]; then
        # A population: the per-agent keys of each point make one line of its grid, the other keys
        # (the same for every point of the job) are --set for all.
        grid="$FH_SWEEP_OUT/sweep-logs/population-$job.grid"
        record="$FH_SWEEP_OUT/sweep-logs/population-$job.json"
        : >"$grid"
        shared=()
        for point in "${job_points[@]}"; do
            IFS=$'\t' read -r -a tokens <<<"$(sed -n "$((point + 1))p" "$FH_SWEEP_GRID")"
            own=()
            shared=()
            for t in "${tokens[@]}"; do
                [ -n "$t" ] || continue
                if is_agent_key "${t%%=*}"; then own+=("$t"); else shared+=(--set "$t"); fi
            done
            printf '%s\n' "${own[*]}" >>"$grid"
        done
        args=(--profile "$FH_SWEEP_PROFILE" --output "$FH_SWEEP_OUT" --auto-name --set run.on_exists=resume
              --device "$device" "${shared[@]}" --population-grid "$grid" --population-record "$record")
        header=$({ printf '# %s' "$FH_SWEEP_EXE"; printf ' %q' "${args[@]}" "${extra[@]}"; printf '\n'; })
        for point in "${job_points[@]}"; do
            printf '%s\n' "$header" >>"$FH_SWEEP_OUT/sweep-logs/point-$point.log"
        done
        rm -f "$record"
    else
        point=${job_points[0]}
        line=$(sed -n "$((point + 1))p" "$FH_SWEEP_GRID")
    fi
fi
# A job's process: runs "$FH_SWEEP_EXE" "${args[@]}" "${extra[@]}" with its output in the file
# $attempt (made here) and leaves its exit status in $code, passing signals on (below).
run_attempt() {
    attempt=$(mktemp "${TMPDIR:-/tmp}/fh-sweep-XXXXXX")
    signalled=0
    forward() { if [ $signalled -eq 0 ]; then signalled=1; kill -INT "$child" 2>/dev/null; else kill -TERM "$child" 2>/dev/null; fi; }
    if [ "${FH_SWEEP_SLURM:-0}" = 1 ]; then
        # Slurm signals every process of the task, the run included: pass on only SIGUSR1 (from
        # sweep.sbatch, near the time limit), as one SIGINT.
        "$FH_SWEEP_EXE" "${args[@]}" "${extra[@]}" </dev/null >"$attempt" 2>&1 &
        child=$!
        trap : INT TERM
        trap forward USR1
    else
        # Its own session: a terminal's Ctrl-C reaches the run only through this wrapper, once.
        setsid "$FH_SWEEP_EXE" "${args[@]}" "${extra[@]}" </dev/null >"$attempt" 2>&1 &
        child=$!
        trap forward INT TERM USR1
    fi
    while kill -0 "$child" 2>/dev/null; do wait "$child"; done  # a trapped signal ends wait early
    wait "$child"; code=$?                                      # the child's own status (bash keeps it)
}
if [ "${1:-}" = "__job" ] && [ $as_population -eq 1 ]; then
    run_attempt
    for point in "${job_points[@]}"; do cat "$attempt" >>"$FH_SWEEP_OUT/sweep-logs/point-$point.log"; done
    # One line per run, from population.json (agents in the order of the job's points).
    mapfile -t agents < <(grep -o '"run":"[^"]*","status":"[^"]*"\(,"action":"[^"]*"\)\?' "$record" 2>/dev/null)
    for i in "${!job_points[@]}"; do
        point=${job_points[$i]}
        a=${agents[$i]:-}
        run=$(printf '%s' "$a" | sed -n 's/.*"run":"\([^"]*\)".*/\1/p')
        status=$(printf '%s' "$a" | sed -n 's/.*"status":"\([^"]*\)".*/\1/p')
        action=$(printf '%s' "$a" | sed -n 's/.*"action":"\([^"]*\)".*/\1/p')
        dir="$FH_SWEEP_OUT/$run"
        log="$FH_SWEEP_OUT/sweep-logs/point-$point.log"
        case $status in
            completed|early_stopped|stopped)
                case $action in skipped) what=skipped ;; resumed) what="done (resumed)" ;; *) what=done ;; esac
                [ "$status" != stopped ] || what="$what (stopped by successive halving)" ;;
            interrupted) what=interrupted ;;
            diverged) what="failed (exit 5, see $log)"; dir="" ;;
            *) if [ "$action" = skipped ]; then what=skipped; else what="failed (exit $code, see $log)"; dir=""; fi ;;
        esac
        printf 'sweep: point %s on %s: %s %s\n' "$point" "$device" "$what" "$dir"
        [ -z "$outcome" ] || printf '%s %s\n' "$point" "${what%% *}" >>"$outcome"
    done
    rm -f "$attempt"
    exit "$code"
fi
if [ "${1:-}" = "__job" ]; then
    args=(--profile "$FH_SWEEP_PROFILE" --output "$FH_SWEEP_OUT" --auto-name --set run.on_exists=resume
          --device "$device")
    IFS=$'\t' read -r -a tokens <<<"$line"
    for t in "${tokens[@]}"; do
        [ -n "$t" ] || continue
        if [[ "$t" == run.seed=* ]]; then args+=(--seed "${t#run.seed=}"); else args+=(--set "$t"); fi
    done
    log="$FH_SWEEP_OUT/sweep-logs/point-$point.log"  # appended to by every attempt
    { printf '# %s' "$FH_SWEEP_EXE"; printf ' %q' "${args[@]}" "${extra[@]}"; printf '\n'; } >>"$log"
    run_attempt
    cat "$attempt" >>"$log"
    dir=$(sed -n 's/.* run directory:* \(.*\)$/\1/p' "$attempt" | tail -n 1)  # the log line "run directory: D"
    case $code in
        0) dir=$(tail -n 1 "$attempt")  # a run's last line of stdout is its directory
           if grep -q 'skipped (run.on_exists' "$attempt"; then what=skipped
           elif grep -q 'resumed from' "$attempt"; then what="done (resumed)"
           else what=done; fi ;;
        130) what=interrupted ;;
        *) what="failed (exit $code, see $log)"; dir="" ;;
    esac
    rm -f "$attempt"
    printf 'sweep: point %s on %s: %s %s\n' "$point" "$device" "$what" "$dir"
    [ -z "$outcome" ] || printf '%s %s\n' "$point" "${what%% *}" >>"$outcome"
    exit "$code"
fi

# --- Options ----------------------------------------------------------------------------------
profile="" out="" grid_file="" seeds="" gpus="" cpu=0 jobs=1 exe="" use_parallel=1
print_grid=0 point="" dry_run=0 population=1
axes=() extra=()
while [ $# -gt 0 ]; do
    case $1 in
        --profile) profile=${2:?}; shift 2 ;;
        --output) out=${2:?}; shift 2 ;;
        --set) [[ "${2:-}" == *=* ]] || die "--set takes KEY=V1,V2,..., got '${2:-}'"; axes+=("$2"); shift 2 ;;
        --grid) grid_file=${2:?}; shift 2 ;;
        --seeds) seeds=${2:?}; shift 2 ;;
        --gpus) gpus=${2:?}; shift 2 ;;
        --cpu) cpu=1; shift ;;
        -j) jobs=${2:?}; shift 2 ;;
        -j*) jobs=${1#-j}; shift ;;
        --exe) exe=${2:?}; shift 2 ;;
        --no-parallel) use_parallel=0; shift ;;
        --no-population) population=0; shift ;;
        --print-grid) print_grid=1; shift ;;
        --point) point=${2:?}; shift 2 ;;
        --dry-run) dry_run=1; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; extra=("$@"); break ;;
        *) die "unknown option '$1' (foxhunt-train options go after --; see --help)" ;;
    esac
done
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "-j takes a positive integer, got '$jobs'"
[ -z "$grid_file" ] || [ -f "$grid_file" ] || die "--grid $grid_file: no such file"
[ -z "$seeds" ] || [[ "$seeds" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--seeds takes N,N,..., got '$seeds'"

# --- The grid ---------------------------------------------------------------------------------
# Splits "V1,V2,..." at commas outside brackets and quotes.
split_values() {
    local s=$1 depth=0 quote="" cur="" c i
    for ((i = 0; i < ${#s}; i++)); do
        c=${s:i:1}
        if [ -n "$quote" ]; then
            [ "$c" = "$quote" ] && quote=""
        elif [ "$c" = '"' ] || [ "$c" = "'" ]; then quote=$c
        elif [ "$c" = '[' ] || [ "$c" = '(' ]; then depth=$((depth + 1))
        elif [ "$c" = ']' ] || [ "$c" = ')' ]; then depth=$((depth - 1))
        elif [ "$c" = ',' ] && [ $depth -eq 0 ]; then printf '%s\n' "$cur"; cur=""; continue
        fi
        cur+=$c
    done
    printf '%s\n' "$cur"
}

make_grid() {
    local points=("") next p v key line
    if [ -n "$grid_file" ]; then
        points=()
        while IFS= read -r line || [ -n "$line" ]; do
            line=${line%%#*}
            read -r -a words <<<"$line"
            [ ${#words[@]} -gt 0 ] || continue
            for v in "${words[@]}"; do [[ "$v" == *=* ]] || die "--grid $grid_file: '$v' is not KEY=VALUE"; done
            points+=("$(IFS=$'\t'; printf '%s' "${words[*]}")")
        done <"$grid_file"
        [ ${#points[@]} -gt 0 ] || die "--grid $grid_file has no override set"
    fi
    for axis in "${axes[@]}"; do
        key=${axis%%=*}
        next=()
        mapfile -t values < <(split_values "${axis#*=}")
        for p in "${points[@]}"; do
            for v in "${values[@]}"; do
                [ -n "$v" ] || die "--set $axis: an empty value"
                next+=("${p:+$p$'\t'}$key=$v")
            done
        done
        points=("${next[@]}")
    done
    if [ -n "$seeds" ]; then
        next=()
        IFS=',' read -r -a seed_list <<<"$seeds"
        for p in "${points[@]}"; do
            for v in "${seed_list[@]}"; do next+=("${p:+$p$'\t'}run.seed=$v"); done
        done
        points=("${next[@]}")
    fi
    printf '%s\n' "${points[@]}"
}

grid=$(make_grid) || exit 2
if [ $print_grid -eq 1 ]; then printf '%s\n' "$grid"; exit 0; fi
n=$(printf '%s\n' "$grid" | wc -l)

[ -n "$profile" ] || die "--profile is required (see --help)"
[ -n "$out" ] || die "--output DIR is required: the sweep directory (see --help)"

if [ -z "$exe" ]; then
    if [ -x "$here/../build/foxhunt-train" ]; then exe="$here/../build/foxhunt-train"
    elif command -v foxhunt-train >/dev/null; then exe=$(command -v foxhunt-train)
    else die "no foxhunt-train: build it (scripts/setup.sh) or pass --exe PATH"; fi
fi
[ -x "$exe" ] || die "--exe $exe is not executable"

# Devices: one job slot per GPU (times -j), or -j slots on the CPU.
if [ $cpu -eq 1 ] && [ -n "$gpus" ]; then die "give --cpu or --gpus, not both"; fi
devices=()
if [ $cpu -eq 0 ] && { [ -n "$gpus" ] || nvidia-smi -L >/dev/null 2>&1; }; then
    if [ -z "$gpus" ] || [ "$gpus" = all ]; then
        count=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
        [ "$count" -gt 0 ] || die "--gpus all: nvidia-smi lists no GPU"
        gpus=$(seq -s, 0 $((count - 1)))
    fi
    [[ "$gpus" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--gpus takes all or indices like 0,1; got '$gpus'"
    IFS=',' read -r -a gpu_list <<<"$gpus"
    for g in "${gpu_list[@]}"; do devices+=("cuda:$g"); done
    slots=$(( ${#devices[@]} * jobs ))
else
    devices=(cpu)
    slots=$jobs
fi

mapfile -t points <<<"$grid"
# The jobs: one line of point indices each. By default the points that differ only in per-agent keys
# (the seed, the learning rate, ...) form a group, and each group is split into one population per
# job slot (a part of one point is a single run, as with --no-population).
make_jobs() {
    local i t key own groups=() members=() g found
    for ((i = 0; i < n; i++)); do
        key="" own=0
        IFS=$'\t' read -r -a tokens <<<"${points[$i]}"
        for t in "${tokens[@]}"; do
            [ -n "$t" ] || continue
            if is_agent_key "${t%%=*}"; then own=1; else key+="$t"$'\t'; fi
        done
        if [ $population -eq 0 ] && has_space "${points[$i]}"; then
            echo "sweep: point $i draws a search space (${points[$i]//$'\t'/ }): a population draws it; drop --no-population" >&2
            return 2
        fi
        if [ $population -eq 0 ] || [ $own -eq 0 ]; then key="__point $i"; fi  # a run alone
        found=-1
        for g in "${!groups[@]}"; do [ "${groups[$g]}" = "$key" ] && { found=$g; break; }; done
        if [ $found -lt 0 ]; then groups+=("$key"); members+=("$i"); else members[$found]+=" $i"; fi
    done
    local m parts size c from to
    for m in "${members[@]}"; do
        read -r -a pts <<<"$m"
        size=${#pts[@]}
        parts=$(( size < slots ? size : slots ))
        for ((c = 0; c < parts; c++)); do
            from=$(( c * size / parts )) to=$(( (c + 1) * size / parts ))
            printf '%s\n' "${pts[*]:from:to-from}"
        done
    done
}
if [ -n "$point" ]; then
    [[ "$point" =~ ^[0-9]+$ ]] && [ "$point" -lt "$n" ] || die "--point $point: the grid has points 0..$((n - 1))"
    job_list=("$point")  # a Slurm array task: the point alone
else
    job_text=$(make_jobs) || exit 2
    mapfile -t job_list <<<"$job_text"
fi
jobs_n=${#job_list[@]}
# The options after --, quoted for the jobs' eval (nothing when there are none: printf would
# otherwise print one '' for no arguments, an empty argument to every run).
extra_quoted=""
if [ ${#extra[@]} -gt 0 ]; then extra_quoted=$(printf ' %q' "${extra[@]}"); fi

if [ $dry_run -eq 1 ]; then  # the commands, and nothing written
    for ((j = 0; j < jobs_n; j++)); do
        read -r -a pts <<<"${job_list[$j]}"
        printf '%s --profile %q --output %q --auto-name --set run.on_exists=resume --device %s' "$exe" "$profile" \
            "$out" "${devices[$(( j % slots % ${#devices[@]} ))]}"
        IFS=$'\t' read -r -a tokens <<<"${points[${pts[0]}]}"
        if [ ${#pts[@]} -gt 1 ] || has_space "${points[${pts[0]}]}"; then
            for t in "${tokens[@]}"; do [ -z "$t" ] || is_agent_key "${t%%=*}" || printf ' --set %q' "$t"; done
            printf ' --population-grid %q --population-record %q' "$out/sweep-logs/population-$j.grid" \
                "$out/sweep-logs/population-$j.json"
            printf '%s  # points %s\n' "$extra_quoted" "${pts[*]}"
        else
            for t in "${tokens[@]}"; do
                [ -n "$t" ] || continue
                if [[ "$t" == run.seed=* ]]; then printf ' --seed %q' "${t#run.seed=}"; else printf ' --set %q' "$t"; fi
            done
            printf '%s\n' "$extra_quoted"
        fi
    done
    exit 0
fi

# The sweep's files: the grid (what the jobs read) and the job table, each replaced whole (the
# tasks of a Slurm array write the same files at once).
write_file() {  # write_file PATH: stdin to PATH, atomically
    local tmp="$1.tmp-$$"
    cat >"$tmp" && mv -f "$tmp" "$1" || { rm -f "$tmp"; die "cannot write $1"; }
}
mkdir -p "$out/sweep-logs" || die "cannot create $out/sweep-logs"
printf '%s\n' "${points[@]}" | write_file "$out/sweep-grid.tsv"
if [ -n "$point" ]; then seq 0 $((n - 1)); else printf '%s\n' "${job_list[@]}"; fi | write_file "$out/sweep-jobs.tsv"
export FH_SWEEP_EXE=$exe FH_SWEEP_PROFILE=$profile FH_SWEEP_OUT=$out FH_SWEEP_GRID="$out/sweep-grid.tsv"
export FH_SWEEP_DEVICES=$(IFS=,; printf '%s' "${devices[*]}")
export FH_SWEEP_EXTRA=$extra_quoted

if [ -n "$point" ]; then
    unset FH_SWEEP_STATUS
    exec "$self" __job 1 "$point" "$point"
fi

# Each job records the outcome of each of its points here (job-J: "POINT done|skipped|...").
FH_SWEEP_STATUS=$(mktemp -d "${TMPDIR:-/tmp}/fh-sweep-status-XXXXXX") || die "cannot create a temporary folder"
export FH_SWEEP_STATUS
trap 'rm -rf "$FH_SWEEP_STATUS"' EXIT

echo "sweep: $n runs in $out on ${FH_SWEEP_DEVICES//,/, } ($slots at a time; $jobs_n processes)" >&2
start=$(date +%s)
interrupted=0
if [ $use_parallel -eq 1 ] && command -v parallel >/dev/null; then
    echo "sweep: GNU parallel; logs in $out/sweep-logs/" >&2
    # --termseq: Ctrl-C sends every job one SIGINT and waits (up to 10 min) for its checkpoint.
    # Each input line is JOB<tab>POINTS: {1} and {2}.
    for ((j = 0; j < jobs_n; j++)); do printf '%s\t%s\n' "$j" "${job_list[$j]}"; done |
        parallel --will-cite --jobs "$slots" --joblog "$out/sweep-logs/joblog" --line-buffer --colsep '\t' \
            --termseq INT,600000,KILL,25 "$self" __job '{%}' '{1}' '{2}'
    code=$?
    # Stopped before every job ran, or a job interrupted (the joblog's 7th column: its exit status).
    [ $code -eq 0 ] || [ "$(awk -F'\t' 'NR > 1' "$out/sweep-logs/joblog" | wc -l)" -eq "$jobs_n" ] || interrupted=1
    awk -F'\t' 'NR > 1 && $7 == 130 { found = 1 } END { exit !found }' "$out/sweep-logs/joblog" && interrupted=1
else
    [ $use_parallel -eq 0 ] || echo "sweep: GNU parallel is not installed (Debian package 'parallel'); using the built-in job pool" >&2
    echo "sweep: built-in job pool; logs in $out/sweep-logs/" >&2
    declare -A running=()   # pid -> slot
    free=()
    for ((s = slots; s >= 1; s--)); do free+=("$s"); done
    stopping=0
    # Ctrl-C or SIGTERM: no new job; each running job gets SIGTERM, which it passes to its run as
    # one SIGINT (a second Ctrl-C: the runs exit at once). Background jobs of a script ignore
    # SIGINT (bash), so TERM it is; the terminal's own SIGINT reaches neither them nor the runs.
    stop() {
        stopping=1
        for pid in "${!running[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    }
    trap stop INT TERM
    reap() {  # waits for one job to end and frees its slot
        local pid="" code
        wait -n -p pid "${!running[@]}"
        code=$?
        [ -n "$pid" ] && [ -n "${running[$pid]:-}" ] || return 0  # wait was cut short by a signal
        kill -0 "$pid" 2>/dev/null && return 0                     # (which may name a job still running)
        free+=("${running[$pid]}")
        unset "running[$pid]"
        [ $code -ne 130 ] || interrupted=1
    }
    for ((i = 0; i < jobs_n; i++)); do
        while [ ${#free[@]} -eq 0 ] && [ $stopping -eq 0 ]; do reap; done
        [ $stopping -eq 0 ] || break
        slot=${free[-1]}
        unset 'free[-1]'
        "$self" __job "$slot" "$i" "${job_list[$i]}" &
        running[$!]=$slot
    done
    while [ ${#running[@]} -gt 0 ]; do reap; done
    [ $stopping -eq 0 ] || interrupted=1
fi

# The runs that failed or were interrupted in this invocation, counted in runs (a population is
# one process of many runs): each started job's record. A job that ended without recording a
# point (killed outright) counts that point as failed, or as interrupted when the sweep was.
failed_points=() interrupted_points=()
for ((j = 0; j < jobs_n; j++)); do
    [ -f "$FH_SWEEP_STATUS/job-$j" ] || continue  # never started (the sweep was stopped first)
    for p in ${job_list[$j]}; do
        what=$(awk -v p="$p" '$1 == p { w = $2 } END { print w }' "$FH_SWEEP_STATUS/job-$j")
        case $what in
            done|skipped) ;;
            interrupted) interrupted_points+=("$p") ;;
            failed) failed_points+=("$p") ;;
            *) if [ $interrupted -eq 1 ]; then interrupted_points+=("$p"); else failed_points+=("$p"); fi ;;
        esac
    done
done
[ ${#interrupted_points[@]} -eq 0 ] || interrupted=1

# The outcome, from the run directories themselves.
declare -A count=()
total=0
for d in "$out"/*/; do
    [ -f "$d/config.toml" ] || continue
    s=$(grep -o '"status":"[a-z_]*"' "$d/summary.json" 2>/dev/null | head -n 1 | cut -d'"' -f4)
    count[${s:-unfinished}]=$(( ${count[${s:-unfinished}]:-0} + 1 ))
    total=$((total + 1))
done
summary=""
for k in $(printf '%s\n' "${!count[@]}" | sort); do summary+="${summary:+, }${count[$k]} $k"; done
echo "sweep: $(( $(date +%s) - start )) s; $out holds $total runs: ${summary:-none}" >&2
if [ ${#failed_points[@]} -gt 0 ]; then
    echo "sweep: ${#failed_points[@]} of $n runs failed (points ${failed_points[*]}); their logs:" \
         "$out/sweep-logs/point-<I>.log" >&2
    exit 1
fi
if [ $interrupted -eq 1 ]; then
    echo "sweep: interrupted; run the same command again to resume" >&2
    exit 130
fi
echo "sweep: done; compare with: foxhunt-train compare $out --group-by-seed" >&2
exit 0
