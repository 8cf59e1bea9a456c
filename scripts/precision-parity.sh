#!/usr/bin/env bash
# The learning parity of gpu.precision (docs/learning.md, "Precision parity"): the learning tables'
# DQN shipped options ("DQN variants", row shipped: C51 + CQL 0.3), PPO and IQL on the planted
# market, five seeds each, in fp32, tf32 and bf16 (FH_LEARNING_EXTRA="gpu.precision=P"), in one
# go so that every figure comes from the same machine; then one table per precision: each
# trainer's median test / oracle ratio, its ratio to fp32's median, and each seed's ratio over
# its own fp32 ratio. The goal: median >= 0.97 of fp32's, no seed below 0.9 of its fp32 ratio.
# Usage:
#   scripts/precision-parity.sh [OUT_DIR]
# Environment: TESTS (default build/tests/foxhunt-tests), PRECISIONS (default "fp32 tf32 bf16";
# fp32 must be among them, the reference), FH_LEARNING_STEPS (the runs' length, as the tests).
# Exit status: 0 when every precision meets the goal for every trainer, 1 otherwise.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tests=${TESTS:-$root/build/tests/foxhunt-tests}
precisions=${PRECISIONS:-fp32 tf32 bf16}
out=${1:-$(mktemp -d "${TMPDIR:-/tmp}/fh-parity.XXXXXX")}
mkdir -p "$out"
export FH_SOURCE_DIR=${FH_SOURCE_DIR:-$root}

case " $precisions " in *" fp32 "*) ;; *) echo "precision-parity: PRECISIONS must include fp32 (the reference)" >&2; exit 2 ;; esac
for p in $precisions; do
    # The tests' own checks (the learning goals) may fail; their tables are what this compares.
    FH_LEARNING_EXTRA="gpu.precision=$p" FH_LEARNING_VARIANTS=shipped "$tests" "DQN variants*" >"$out/dqn-$p.txt" 2>&1
    FH_LEARNING_EXTRA="gpu.precision=$p" "$tests" "PPO on the planted signal*" >"$out/ppo-$p.txt" 2>&1
    FH_LEARNING_EXTRA="gpu.precision=$p" "$tests" "IQL from the behaviour dataset*" >"$out/iql-$p.txt" 2>&1
done

python3 - "$out" $precisions <<'PY'
import os, re, sys
out, precisions = sys.argv[1], sys.argv[2:]
def seeds(trainer, p):
    """The five seeds' test / oracle ratios of one table, in seed order (None when missing)."""
    path = os.path.join(out, f"{trainer}-{p}.txt")
    if not os.path.exists(path): return None
    ratios = {}
    for line in open(path, errors="replace"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if trainer == "dqn":  # | shipped | seed | test / oracle | ...
            if len(cells) > 2 and cells[0] == "shipped" and cells[1].isdigit(): ratios[int(cells[1])] = float(cells[2])
        elif len(cells) > 1 and cells[0].isdigit():  # | seed | test / oracle | ...
            ratios[int(cells[0])] = float(cells[1])
    return [ratios[s] for s in sorted(ratios)] if len(ratios) == 5 else None
def median(v): return sorted(v)[len(v) // 2]
names = {"dqn": "DQN shipped (C51 + CQL 0.3)", "ppo": "PPO", "iql": "IQL"}
ref = {t: seeds(t, "fp32") for t in names}
ok = True
for p in precisions:
    print(f"\n### gpu.precision = \"{p}\"\n")
    print("| trainer | test / oracle, seeds 1..5 | median | median / fp32's | each seed / its fp32 | lowest | goal |")
    print("|---|---|---:|---:|---|---:|---|")
    for t, name in names.items():
        got, base = seeds(t, p), ref[t]
        if got is None or base is None:
            print(f"| {name} | failed: see {os.path.join(out, t + '-' + p + '.txt')} | | | | | not met |"); ok = False; continue
        per_seed = [g / b if b else float("nan") for g, b in zip(got, base)]
        m = median(got) / median(base)
        met = m >= 0.97 and min(per_seed) >= 0.9
        ok = ok and met
        print(f"| {name} | {' '.join(f'{x:.3f}' for x in got)} | {median(got):.3f} | {m:.3f} | "
              f"{' '.join(f'{x:.2f}' for x in per_seed)} | {min(per_seed):.2f} | {'met' if met else 'not met'} |")
print(f"\n(goal: median >= 0.97 of fp32's and every seed >= 0.9 of its fp32 ratio; outputs in {out})")
sys.exit(0 if ok else 1)
PY
