#!/usr/bin/env bash
# Checks scripts/sweep.sh on a machine with two or more GPUs: a 3 x 3 grid of short DQN runs on
# GPUs 0 and 1 (2 jobs per GPU) while nvidia-smi samples which GPU runs which process, then the
# same command again (every run skipped), compare --group-by-seed and report. Needs only the built
# executable (build/foxhunt-train) and nvidia-smi; installs nothing.
# Usage: scripts/gpu-sweep-check.sh OUTDIR [extra sweep.sh options]
# Prints the sweep's lines, the devices the runs report, and how many samples saw both GPUs busy
# with a run at once; OUTDIR keeps the sweep, its report, nvidia-smi's samples and the outputs.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?"usage: scripts/gpu-sweep-check.sh OUTDIR"}
shift
mkdir -p "$out"
grid=(--profile dqn-smoketest --gpus 0,1 -j 2 --output "$out/sweep" --set training.learning_rate=1e-3,3e-4,1e-4
      --seeds 1,2,3 "$@" -- --set run.total_steps=40000 --set run.eval_interval=10000 --set run.log_interval=2000)

nvidia-smi -L | tee "$out/gpus.txt"
# Every 0.5 s: the compute processes and their GPU (by bus id), with a sample number.
( i=0; while :; do
      nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name --format=csv,noheader 2>/dev/null |
          sed "s/^/$i, /"
      i=$((i + 1)); sleep 0.5
  done ) >"$out/nvidia-smi-apps.csv" &
sampler=$!
nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader >"$out/gpu-bus-ids.csv"

start=$(date +%s)
scripts/sweep.sh "${grid[@]}" 2>&1 | tee "$out/sweep-first.txt"
first=${PIPESTATUS[0]}
kill "$sampler" 2>/dev/null
echo "first sweep: exit $first in $(( $(date +%s) - start )) s"

scripts/sweep.sh "${grid[@]}" 2>&1 | tee "$out/sweep-second.txt"
second=${PIPESTATUS[0]}
echo "second sweep: exit $second, $(grep -c ': skipped ' "$out/sweep-second.txt") of 9 runs skipped"

build/foxhunt-train compare "$out/sweep" --group-by-seed | tee "$out/compare.md"
build/foxhunt-train report "$out/sweep"

echo "devices in summary.json:"
grep -ho '"device":"cuda:[0-9]*' "$out"/sweep/*/summary.json | sort | uniq -c
# Samples in which foxhunt-train ran on two different GPUs at once.
both=$(awk -F', ' '$4 ~ /foxhunt-train/ { gpus[$1] = gpus[$1] " " $2 }
                  END { n = 0; for (s in gpus) { split(gpus[s], g, " "); d = 0; delete seen
                        for (k in g) if (!(g[k] in seen)) { seen[g[k]] = 1; d++ } if (d >= 2) n++ } print n }' \
       "$out/nvidia-smi-apps.csv")
echo "nvidia-smi samples with runs on two GPUs at once: $both of $(cut -d, -f1 "$out/nvidia-smi-apps.csv" | sort -u | wc -l)"
[ "$first" -eq 0 ] && [ "$second" -eq 0 ] && [ "$both" -gt 0 ]
