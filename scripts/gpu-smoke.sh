#!/usr/bin/env bash
# The CI smoke for a small GPU (RTX 3050 class): builds if needed, then trains the five
# smoketest profiles (dqn, ppo, iql, supervised, dt) on the GPU. Fails (exit 1) on any non-zero exit, a NaN or
# infinity in metrics.jsonl, a run that did not complete, or a total wall time over the budget.
# Prints one line per trainer and a verdict.
# Usage: scripts/gpu-smoke.sh            Environment: BUILD_DIR (default build),
#        SMOKE_BUDGET_S (default 120), SMOKE_OUTPUT (default: a new temporary directory).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exe="$root/${BUILD_DIR:-build}/foxhunt-train"
budget=${SMOKE_BUDGET_S:-120}
if [ ! -x "$exe" ]; then
    "$root/scripts/setup.sh" >/dev/null || { echo "gpu-smoke: FAIL: the build failed" >&2; exit 1; }
fi
out=${SMOKE_OUTPUT:-$(mktemp -d "${TMPDIR:-/tmp}/fh-gpu-smoke.XXXXXX")}
mkdir -p "$out"

now() { date +%s.%N; }
start=$(now)
failed=0
trainers=(dqn ppo iql supervised dt)
for trainer in "${trainers[@]}"; do
    t0=$(now)
    "$exe" --profile "$trainer-smoketest" --device cuda --output "$out" --quiet >"$out/$trainer.log" 2>&1
    rc=$?
    t1=$(now)
    line=$(python3 - "$out/$trainer-smoketest" "$trainer" "$rc" "$t0" "$t1" <<'PY'
import json, math, os, sys
run, trainer, rc, t0, t1 = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
problems = []
if rc != 0:
    problems.append(f"exit {rc}")
def bad_numbers(obj, path=""):
    """Names of values that are NaN, infinite or null (foxhunt writes non-finite numbers as null)."""
    if isinstance(obj, dict):
        return [b for k, v in obj.items() for b in bad_numbers(v, f"{path}/{k}" if path else k)]
    if isinstance(obj, list):
        return [b for i, v in enumerate(obj) for b in bad_numbers(v, f"{path}[{i}]")]
    if obj is None or (isinstance(obj, float) and not math.isfinite(obj)):
        return [path]
    return []
metrics = os.path.join(run, "metrics.jsonl")
lines = 0
if os.path.exists(metrics):
    for n, text in enumerate(open(metrics), 1):
        lines += 1
        bad = bad_numbers(json.loads(text, parse_constant=lambda c: float(c)))
        if bad:
            problems.append(f"metrics.jsonl line {n}: non-finite {', '.join(bad[:3])}")
            break
if lines == 0:
    problems.append("no metrics.jsonl lines")
summary, test = {}, {}
try:
    summary = json.load(open(os.path.join(run, "summary.json")))
    test = (summary.get("test") or {}).get("strategy") or {}
except (OSError, ValueError) as e:
    problems.append(f"summary.json: {e}")
if summary and summary.get("status") != "completed":
    problems.append(f"status {summary.get('status')}")
ret = test.get("total_return")
if summary and not (isinstance(ret, (int, float)) and math.isfinite(ret)):
    problems.append("test return is not finite")
fmt = lambda v: f"{v:.3f}" if isinstance(v, (int, float)) and math.isfinite(v) else "n/a"
verdict = "ok  " if not problems else "FAIL"
print(f"{trainer:<10} {verdict} {t1 - t0:6.1f} s  env_steps {summary.get('env_steps', 'n/a')}  "
      f"updates {summary.get('updates', 'n/a')}  test sharpe {fmt(test.get('sharpe'))}  "
      f"return {fmt(ret)}" + (f"  problems: {'; '.join(problems)}" if problems else ""))
sys.exit(1 if problems else 0)
PY
)
    check=$?
    echo "$line"
    if [ $check -ne 0 ]; then
        failed=1
        echo "  log: $out/$trainer.log (last lines below)"
        tail -n 5 "$out/$trainer.log" | sed 's/^/  | /'
    fi
done
total=$(python3 -c "print(f'{$(now) - $start:.1f}')")
if python3 -c "import sys; sys.exit(0 if $total <= $budget else 1)"; then :; else
    echo "gpu-smoke: total wall time ${total} s exceeds the ${budget} s budget"
    failed=1
fi
if [ $failed -eq 0 ]; then
    echo "gpu-smoke: PASS (${#trainers[@]} trainers, ${total} s of ${budget} s; runs in $out)"
else
    echo "gpu-smoke: FAIL (${total} s; runs in $out)"
fi
exit $failed
