#!/usr/bin/env bash
# The throughput tables of docs/performance.md: runs `foxhunt-train bench` on each configuration
# (in one go, so that every figure comes from the same machine state), keeps each JSON line and
# prints a markdown table. Usage:
#   scripts/bench-table.sh dqn|ppo|iql [OUT_DIR]      Environment: EXE (default build/foxhunt-train),
#   EXTRA (more bench arguments, e.g. "--kernel-times")
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exe=${EXE:-$root/build/foxhunt-train}
which=${1:-dqn}
out=${2:-$(mktemp -d "${TMPDIR:-/tmp}/fh-bench.XXXXXX")}
mkdir -p "$out"

# The DQN configuration of the speed goals: state 50 (core42 + 8), 9 actions, trunk [256, 256],
# 51 atoms, batch 256, a replay of 1M transitions filled before timing, n-step 3, episodes of
# 500 bars, one update per collection step, fp32.
dqn_base=(--profile dqn-smoketest --set data.synthetic_bars=20000 --set experience.gpu_timesteps_per_episode=500
          --set dqn.hidden=[256,256] --set replay_buffer.batch_size=256 --set replay_buffer.buffer_size=1000000
          --set replay_buffer.min_replay_size=1000000 --set training.updates_per_iteration=1 --set gpu.tf32=false)
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
    *) echo "usage: scripts/bench-table.sh dqn|ppo|iql [OUT_DIR]" >&2; exit 2 ;;
esac

echo "| configuration | collection env steps/s | us / collection step | updates/s | us / update | end to end env steps/s | first kernel s | peak MB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
status=0
for i in "${!names[@]}"; do
    file="$out/bench-$which-$i.json"
    # shellcheck disable=SC2086
    if ! "$exe" bench --device cuda --quiet ${args[$i]} ${EXTRA:-} >"$file" 2>"$out/bench-$which-$i.log"; then
        echo "| ${names[$i]} | failed: $(tail -n 1 "$out/bench-$which-$i.log") |"
        status=1
        continue
    fi
    python3 - "${names[$i]}" "$file" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
b = json.loads(open(path).read().strip().splitlines()[-1])
def m(x): return f"{x / 1e6:.2f} M" if x else "-"
def f(x, d=0): return f"{x:,.{d}f}" if x else "-"
print(f"| {name} | {m(b['collection_env_steps_per_s'])} | {f(b.get('us_per_collection_step', 0), 1)} | "
      f"{f(b['updates_per_s'])} | {f(b.get('us_per_update', 0), 1)} | {m(b['end_to_end_env_steps_per_s'])} | "
      f"{b['time_to_first_kernel_s']:.3f} | {b['peak_device_memory_bytes'] / 1e6:.0f} |")
PY
done
exit $status
