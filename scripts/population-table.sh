#!/usr/bin/env bash
# The population goal table of docs/performance.md ("Populations", "The goal table, one call"):
# `foxhunt-train bench` of each goal configuration with one agent and with a population of N
# (how training would run it: run.population_batching = "auto"), in one go so that every figure
# comes from the same machine state; then a population of N dqn-smoketest seeds trained end to end
# against two single runs one after the other. Prints markdown tables and each goal's verdict.
# Usage:
#   scripts/population-table.sh [OUT_DIR]
# Environment: EXE (default build/foxhunt-train), N (agents, default 16), BATCHING ("auto", "on"
# or "off", default auto), PRECISION (gpu.precision of every configuration:
# fp32, the default, tf32 or bf16), EXTRA (more bench arguments), ROUNDS
# (rounds of the smoketest timing, default 2), SKIP_RUNS=1 (the bench table only).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exe=${EXE:-$root/build/foxhunt-train}
agents=${N:-16}
batching=${BATCHING:-auto}
rounds=${ROUNDS:-2}
precision=${PRECISION:-fp32}
out=${1:-$(mktemp -d "${TMPDIR:-/tmp}/fh-population.XXXXXX")}
mkdir -p "$out"

# The goal configurations (scripts/bench-table.sh's, plus the smoketest-sized DQN agents).
dqn_base="--profile dqn-smoketest --set data.synthetic_bars=20000 --set experience.gpu_timesteps_per_episode=500
 --set dqn.hidden=[256,256] --set replay_buffer.batch_size=256 --set replay_buffer.buffer_size=1000000
 --set replay_buffer.min_replay_size=1000000 --set training.updates_per_iteration=1"
declare -a names=() args=()
names+=("dqn 4096 envs"); args+=("$dqn_base --set experience.gpu_n_episodes=4096 --set run.total_steps=2048000")
names+=("dqn 256 envs"); args+=("$dqn_base --set experience.gpu_n_episodes=256 --set run.total_steps=128000")
names+=("dqn-smoketest"); args+=("--profile dqn-smoketest")
names+=("ppo small"); args+=("--profile ppo-smoketest --set data.synthetic_bars=20000 --set experience.gpu_n_episodes=256
 --set experience.gpu_timesteps_per_episode=128 --set ppo.epochs=4 --set ppo.minibatches=4 --set ppo.hidden=[64,64]
 --set run.total_steps=3276800")
names+=("iql 256"); args+=("--profile iql-full --set data.synthetic_bars=20000 --set replay_buffer.batch_size=256
 --set iql.hidden=[256,256] --set iql.dataset_size=1000000 --set run.total_steps=2000")

status=0
for i in "${!names[@]}"; do
    for n in 1 "$agents"; do
        file="$out/bench-$i-$n.json"
        population=()
        [ "$n" -gt 1 ] && population=(--set "run.population=$n" --set "run.population_batching=$batching")
        # shellcheck disable=SC2086
        if ! "$exe" bench --device cuda --quiet ${args[$i]} "${population[@]}" --set "gpu.precision=$precision" ${EXTRA:-} \
            >"$file" \
            2>"$out/bench-$i-$n.log"; then
            echo "${names[$i]}, N = $n: failed: $(tail -n 1 "$out/bench-$i-$n.log")" >&2
            rm -f "$file"
            status=1
        fi
    done
done

echo "precision: $precision (gpu.precision)"
python3 - "$out" "$agents" "${names[@]}" <<'PY'
import json, os, sys
out, n, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def load(i, k):
    path = os.path.join(out, f"bench-{i}-{k}.json")
    if not os.path.exists(path): return None
    return json.loads(open(path).read().strip().splitlines()[-1])
def m(x): return f"{x / 1e6:.2f} M" if x else "-"
def r(a, b): return f"{a / b:.2f}" if a and b else "-"
print(f"| configuration | N = 1: agent-updates/s | N = {n}: agent-updates/s | ratio | N = 1: end to end env steps/s "
      f"| N = {n}: end to end (all agents) | ratio | N = 1: collection | N = {n}: collection | ratio | batched |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
rows = {}
for i, name in enumerate(names):
    one, many = load(i, 1), load(i, n)
    rows[name] = (one, many)
    if not one or not many:
        print(f"| {name} | failed |"); continue
    u1, un = one["updates_per_s"], many["agent_updates_per_s"]
    e1, en = one["end_to_end_env_steps_per_s"], many["end_to_end_env_steps_per_s"]
    c1, cn = one["collection_env_steps_per_s"], many["collection_env_steps_per_s"]
    if not e1: c1 = cn = 0  # an offline trainer: bench reports its dataset's collection, not training's
    print(f"| {name} | {u1:,.0f} | {un:,.0f} | {r(un, u1)} | {m(e1)} | {m(en)} | {r(en, e1)} | {m(c1)} | {m(cn)} | "
          f"{r(cn, c1)} | {'yes' if many.get('batched') else 'no'} |")
print()
def verdict(ok): return "met" if ok else "not met"
def goal(name, text, test):
    one, many = rows.get(name, (None, None))
    if one and many: print(f"- {name}: {text}: {verdict(test(one, many))}")
    else: print(f"- {name}: {text}: not measured (failed)")
goal("dqn 4096 envs", f"N = {n} >= 100,000 agent-updates/s", lambda o, p: p["agent_updates_per_s"] >= 1e5)
goal("dqn 4096 envs", f"end to end >= 0.7 x {n} x one agent's",
     lambda o, p: p["end_to_end_env_steps_per_s"] >= 0.7 * n * o["end_to_end_env_steps_per_s"])
goal("dqn 256 envs", f"end to end >= 0.7 x {n} x one agent's",
     lambda o, p: p["end_to_end_env_steps_per_s"] >= 0.7 * n * o["end_to_end_env_steps_per_s"])
goal("ppo small", "agent-updates/s >= 10 x one agent's", lambda o, p: p["agent_updates_per_s"] >= 10 * o["updates_per_s"])
goal("ppo small", "end to end >= 10 x one agent's",
     lambda o, p: p["end_to_end_env_steps_per_s"] >= 10 * o["end_to_end_env_steps_per_s"])
goal("iql 256", "agent-updates/s >= 10 x one agent's", lambda o, p: p["agent_updates_per_s"] >= 10 * o["updates_per_s"])
PY

[ "${SKIP_RUNS:-0}" = 1 ] && exit $status

# N dqn-smoketest seeds in one process against two single runs one after the other (each whole
# run with its validation and test backtests), alternating, ROUNDS times.
seeds=$(seq -s, 1 "$agents")
echo
echo "| round | $agents dqn-smoketest seeds, one process | two single runs |"
echo "|---:|---:|---:|"
met=0
for round in $(seq 1 "$rounds"); do
    rm -rf "$out/runs"
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$exe" --profile dqn-smoketest --device cuda --quiet --seeds "$seeds" --output "$out/runs" --set "gpu.precision=$precision" ${EXTRA:-} \
        >"$out/population-$round.log" 2>&1 || { echo "population run failed: $(tail -n 1 "$out/population-$round.log")" >&2; status=1; }
    t1=$(date +%s.%N)
    for seed in 1 2; do
        # shellcheck disable=SC2086
        "$exe" --profile dqn-smoketest --device cuda --quiet --seed "$seed" --output "$out/runs" --set "gpu.precision=$precision" ${EXTRA:-} \
            >"$out/single-$round-$seed.log" 2>&1 || { echo "single run failed: $(tail -n 1 "$out/single-$round-$seed.log")" >&2; status=1; }
    done
    t2=$(date +%s.%N)
    python3 -c "import sys; a, b, c = map(float, sys.argv[1:]); print(f'| $round | {b - a:.2f} s | {c - b:.2f} s |')" "$t0" "$t1" "$t2"
    python3 -c "import sys; a, b, c = map(float, sys.argv[1:]); sys.exit(0 if b - a < c - b else 1)" "$t0" "$t1" "$t2" && met=$((met + 1))
done
echo
echo "- $agents dqn-smoketest seeds in one process in less time than two single runs: met in $met of $rounds rounds"
rm -rf "$out/runs"
exit $status
