#!/usr/bin/env bash
# The throughput tables of docs/performance.md: runs `foxhunt-train bench` on each configuration
# (in one go, so that every figure comes from the same machine state), keeps each JSON line and
# prints a markdown table. Usage:
#   scripts/bench-table.sh dqn|ppo|iql|precision [OUT_DIR]      Environment: EXE (default build/foxhunt-train),
#   PRECISION (gpu.precision of every row: fp32, the default, tf32 or bf16; the *-full profiles'
#   own "tf32" is overridden so that the rows stay comparable), EXTRA (more bench arguments, e.g.
#   "--kernel-times")
# `precision`: the speed table of docs/performance.md, "Precision": the DQN reference
# configuration (dqn 4096 envs: updates/s and end to end), dqn-full and iql-full updates/s,
# ppo-full end to end and a population of N (default 16) dqn 4096 envs agents (agent-updates/s),
# for each of PRECISIONS (default "fp32 tf32 bf16") in one go; one column per precision, each
# with its ratio to fp32's where fp32 is among them.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exe=${EXE:-$root/build/foxhunt-train}
which=${1:-dqn}
precision=${PRECISION:-fp32}
out=${2:-$(mktemp -d "${TMPDIR:-/tmp}/fh-bench.XXXXXX")}
mkdir -p "$out"

# The DQN configuration of the speed goals: state 50 (core42 + 8), 9 actions, trunk [256, 256],
# 51 atoms, batch 256, a replay of 1M transitions filled before timing, n-step 3, episodes of
# 500 bars, one update per collection step (gpu.precision: PRECISION, every row).
dqn_base=(--profile dqn-smoketest --set data.synthetic_bars=20000 --set experience.gpu_timesteps_per_episode=500
          --set dqn.hidden=[256,256] --set replay_buffer.batch_size=256 --set replay_buffer.buffer_size=1000000
          --set replay_buffer.min_replay_size=1000000 --set training.updates_per_iteration=1)
if [ "$which" = precision ]; then
    agents=${N:-16}
    status=0
    for prec in ${PRECISIONS:-fp32 tf32 bf16}; do
        declare -a runs=("dqn4096|${dqn_base[*]} --set experience.gpu_n_episodes=4096 --set run.total_steps=2048000"
                         "dqnfull|--profile dqn-full --set data.synthetic_bars=20000 --set run.total_steps=409600"
                         "iqlfull|--profile iql-full --set data.synthetic_bars=20000"
                         "ppofull|--profile ppo-full --set data.synthetic_bars=20000"
                         "population|${dqn_base[*]} --set experience.gpu_n_episodes=4096 --set run.total_steps=2048000 --set run.population=$agents --set run.population_batching=auto")
        for r in "${runs[@]}"; do
            key=${r%%|*}
            file="$out/precision-$key-$prec.json"
            # shellcheck disable=SC2086
            if ! "$exe" bench --device cuda --quiet ${r#*|} --set "gpu.precision=$prec" ${EXTRA:-} >"$file" \
                2>"$out/precision-$key-$prec.log"; then
                echo "$key ($prec) failed: $(tail -n 1 "$out/precision-$key-$prec.log")" >&2
                rm -f "$file"
                status=1
            fi
        done
    done
    python3 - "$out" "$agents" ${PRECISIONS:-fp32 tf32 bf16} <<'PY'
import json, os, sys
out, n, precisions = sys.argv[1], sys.argv[2], sys.argv[3:]
def load(key, p):
    path = os.path.join(out, f"precision-{key}-{p}.json")
    if not os.path.exists(path): return None
    return json.loads(open(path).read().strip().splitlines()[-1])
rows = [("DQN updates/s (reference, 4096 envs)", "dqn4096", "updates_per_s", False),
        ("DQN end to end, 4096 envs", "dqn4096", "end_to_end_env_steps_per_s", True),
        ("dqn-full updates/s", "dqnfull", "updates_per_s", False),
        ("iql-full updates/s", "iqlfull", "updates_per_s", False),
        ("ppo-full end to end", "ppofull", "end_to_end_env_steps_per_s", True),
        (f"DQN population N = {n}, agent-updates/s", "population", "agent_updates_per_s", False)]
device = next((b["device"] for p in precisions for k in ("dqn4096", "population") if (b := load(k, p))), "?")
print(f"device: {device}")
print()
print("| figure | " + " | ".join(precisions) + " |")
print("|---|" + "---:|" * len(precisions))
for name, key, field, millions in rows:
    cells, base = [], (load(key, "fp32") or {}).get(field)
    for p in precisions:
        b = load(key, p)
        if b is None or b.get("precision") != p: cells.append("failed"); continue
        v = b[field]
        text = f"{v / 1e6:.2f} M" if millions else f"{v:,.0f}"
        if p != "fp32" and base: text += f" ({v / base:.2f}x)"
        cells.append(text)
    print(f"| {name} | " + " | ".join(cells) + " |")
PY
    [ $? -eq 0 ] || status=1
    exit $status
fi

declare -a names=() args=()
case "$which" in
    dqn)
        names+=("dqn 4096 envs") ; args+=("${dqn_base[*]} --set experience.gpu_n_episodes=4096 --set run.total_steps=2048000")
        names+=("dqn 256 envs")  ; args+=("${dqn_base[*]} --set experience.gpu_n_episodes=256 --set run.total_steps=128000")
        names+=("dqn-full")      ; args+=("--profile dqn-full --set data.synthetic_bars=20000 --set run.total_steps=409600")
        ;;
    ppo)
        names+=("ppo-full")      ; args+=("--profile ppo-full --set data.synthetic_bars=20000")
        names+=("ppo small")     ; args+=("--profile ppo-smoketest --set data.synthetic_bars=20000 --set experience.gpu_n_episodes=256 --set experience.gpu_timesteps_per_episode=128 --set ppo.epochs=4 --set ppo.minibatches=4 --set ppo.hidden=[64,64] --set run.total_steps=3276800")
        ;;
    iql)
        names+=("iql-full")      ; args+=("--profile iql-full --set data.synthetic_bars=20000")
        names+=("iql 256 [256,256]") ; args+=("--profile iql-full --set data.synthetic_bars=20000 --set replay_buffer.batch_size=256 --set iql.hidden=[256,256]")
        ;;
    *) echo "usage: scripts/bench-table.sh dqn|ppo|iql|precision [OUT_DIR]" >&2; exit 2 ;;
esac

echo "precision: $precision (gpu.precision)"
echo
echo "| configuration | collection env steps/s | us / collection step | updates/s | us / update | end to end env steps/s | first kernel s | peak MB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
status=0
for i in "${!names[@]}"; do
    file="$out/bench-$which-$i.json"
    # shellcheck disable=SC2086
    if ! "$exe" bench --device cuda --quiet ${args[$i]} --set "gpu.precision=$precision" ${EXTRA:-} >"$file" 2>"$out/bench-$which-$i.log"; then
        echo "| ${names[$i]} | failed: $(tail -n 1 "$out/bench-$which-$i.log") |"
        status=1
        continue
    fi
    python3 - "${names[$i]}" "$file" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
b = json.loads(open(path).read().strip().splitlines()[-1])
name = f"{name} ({b['precision']})"
def m(x): return f"{x / 1e6:.2f} M" if x else "-"
def f(x, d=0): return f"{x:,.{d}f}" if x else "-"
print(f"| {name} | {m(b['collection_env_steps_per_s'])} | {f(b.get('us_per_collection_step', 0), 1)} | "
      f"{f(b['updates_per_s'])} | {f(b.get('us_per_update', 0), 1)} | {m(b['end_to_end_env_steps_per_s'])} | "
      f"{b['time_to_first_kernel_s']:.3f} | {b['peak_device_memory_bytes'] / 1e6:.0f} |")
PY
done
exit $status
