#!/usr/bin/env bash
# Mutation check: applies small deliberate bugs to the source one at a time, rebuilds
# incrementally, runs the CI tests that should catch each (a per-mutant filter keeps it fast) and
# prints which tests caught it, as the markdown table of docs/testing.md. Every source file is
# restored after its mutant (also on Ctrl-C or an error), and the build is brought back to the
# unmutated tree at the end.
#
# Usage: scripts/mutants.sh [--list] [NAME...]     (no NAME: every mutant)
# Environment: BUILD_DIR (default: build; configured and built by scripts/setup.sh when missing).
# Exit status: 0 when every mutant run was caught; 1 when one survived, did not apply or did not
# build; 2 on a usage error.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
BUILD_DIR=${BUILD_DIR:-build}

# name | file | sed expression (applied with sed -E; it must change the file) | Catch2 filter of
# the CI tests (no [gpu], no hidden ones) that should catch it | what the bug is. Fields are
# separated by " ;; ".
MUTANTS=(
"dqn-online-bootstrap ;; src/trainers/dqn/engine.cpp ;; s/(ops::dqn_loss\(ops_, slice\(d_head_, a\), slice\(sample_stats_, a\), head_s, head_select, )head_target,/\1head_online_next,/ ;; [target] ;; DQN bootstraps from the online network at s' instead of the target network"
"env-lookahead ;; src/ops/env/cpu.cpp ;; s/static_cast<std::size_t>\(state\.data\(\)\[e\]\.t\) \* mdim;/static_cast<std::size_t>(state.data()[e].t + 1) * mdim;/ ;; [env] ;; the agent's state holds the next bar's features (a look-ahead)"
"dqn-sample-half-batch ;; src/ops/dqn/cpu.cpp ;; s/replay::sample_nstep\(static_cast<int>\(b\), view, sp, xg/replay::sample_nstep(static_cast<int>(b \/ 2), view, sp, xg/ ;; DQN collection into the ring* ;; DQN's replay batch draws each transition twice (half the batch)"
"dqn-adam-no-clip ;; src/ops/dqn/cpu.cpp ;; s/const float clip = s\.adam\.clip_norm > 0\.f \? core::clip_scale\(s\.grad_norm, s\.adam\.clip_norm\) : 1\.f;/const float clip = 1.f;/ ;; DQN Adam + target* ;; DQN's Adam ignores training.grad_clip_norm"
"adam-no-clip ;; src/ops/core/cpu.cpp ;; s/core::clip_scale\(a\.grad_norm\.data\(\)\[0\], c\.clip_norm\)/core::clip_scale(a.grad_norm.data()[0] * 0.f, c.clip_norm)/ ;; Adam: global-norm clipping* ;; ops::AdamStep never clips (it reads the gradient's norm as 0)"
"soft-target-swapped ;; src/ops/core/cpu.cpp ;; s/t\[i\] \* target\.keep, target\.tau, a\.params\.data\(\)\[i\]/t[i] * target.tau, target.keep, a.params.data()[i]/ ;; Adam with a soft target* ;; the soft target update keeps tau of the target and takes 1 - tau of the weights"
"hard-target-off-by-one ;; src/ops/core/cpu.cpp ;; s/if \(a\.counter\.data\(\)\[g\] % a\.period == 0\)/if (a.counter.data()[g] % a.period == 1)/ ;; increment and copy_every*,IQL with tau = 0 copies* ;; the periodic target copy happens one update late"
"ppo-gae-lambda-squared ;; src/ops/ppo/cpu.cpp ;; s/agent_gamma_lambda\.empty\(\) \? lambda :/agent_gamma_lambda.empty() ? lambda * lambda :/ ;; GAE: a hand-computed* ;; GAE discounts by gamma x lambda^2 instead of gamma x lambda"
"iql-expectile-flipped ;; src/ops/iql/cpu.cpp ;; s/scalars != nullptr \? scalars\[b \/ batch\]\.expectile : expectile,/scalars != nullptr ? scalars[b \/ batch].expectile : 1.0f - expectile,/ ;; IQL value loss* ;; IQL's value loss uses the expectile 1 - tau instead of tau"
"guard-nan-blind ;; src/ops/nn/cpu.cpp ;; s/a\.gate\.data\(\)\[0\] = nn::guard_decide\(/a.gate.data()[0] = 1 | nn::guard_decide(/ ;; [guard] ;; the training guard counts a NaN loss but applies the update anyway"
"checkpoint-drops-adam-v ;; src/trainers/checkpoint.cpp ;; s/for \(const auto& t : tensors\) ops\.upload<std::byte>\(t\.bytes, file\.tensor\(t\.name\)\.bytes\);/for (const auto\& t : tensors) if (t.name != \"adam\/v\") ops.upload<std::byte>(t.bytes, file.tensor(t.name).bytes);/ ;; dqn.her: the smoketest* ;; a resume from a checkpoint file leaves Adam's second moments at their fresh values"
"backtest-no-warmup ;; src/backtest/backtest.cpp ;; s/std::max\(\{seg_begin \+ md\.warmup_bars, pb\}\)/std::max({seg_begin, pb})/ ;; every fill of trades.csv* ;; the backtest trades a contract's first bars, before the features' warm-up"
"lean-checkpoint-keeps-pushed ;; src/trainers/checkpoint.cpp ;; s/keep_replay \? trainer\.counter_values\(\) : trainer\.counters_without_replay\(trainer\.counter_values\(\)\)/trainer.counter_values()/ ;; [keep_replay] ;; a checkpoint written without its replay memory keeps the ring's push count, so a resume samples slots nothing wrote"
"memory-iqn-backward ;; src/trainers/dqn/network.cpp ;; s/size\.add\(rows \* H\);  \/\/ d phi/size.add(0);  \/\/ d phi/ ;; every trainer's memory plan* ;; the IQN head's memory plan leaves out its backward's d phi (a run check passes may not fit)"
"pbt-exploit-skips-adam ;; src/run/search.cpp ;; s/ \|\| name\.starts_with\(.adam\/.\)// ;; PBT's exploit copies exactly* ;; PBT's exploit copies the weights but not Adam's moments"
"pbt-keys-not-on-device ;; src/trainers/dqn/engine.cpp ;; s/ops_\.upload<dqn::AgentParams>\(slice\(agent_, a\), std::vector<dqn::AgentParams>\{dqn_agent_params\(p\)\}\);// ;; PBT: the same command* ;; PBT's explore records the new keys but the DQN agent trains on with its old device constants"
"pbt-round-no-checkpoint ;; src/run/population.cpp ;; s/if \(no_checkpoint\.empty\(\) \|\| !no_checkpoint\[i\]\) m\.run->save_checkpoint\(\);/(void)no_checkpoint;/ ;; PBT: the same command* ;; a PBT round writes no checkpoint, so a resume continues from the state before the round"
"halving-no-history ;; src/run/population.cpp ;; s/r->as_i64\(\) < round\)/r->as_i64() < 0)/ ;; successive halving: the worst* ;; successive halving ranks a rung's arrivals among themselves, not among every point that reached the rung (ASHA)"
"halving-own-rounds-ignored ;; src/run/population.cpp ;; s/\(\(round \+ 1 - m->start_round\)/((round + 1 - 0 * m->start_round)/ ;; successive halving: the worst* ;; a halving search's new point stops at the population's round iterations, not its own (its rungs at the wrong budgets)"
"compare-nan-blind ;; tests/support/compare.hpp ;; s/ok = nan == Nan::both_match && std::isnan\(g\) && std::isnan\(r\);/ok = std::isnan(g) \&\& std::isnan(r);/ ;; [compare] ;; the tests' comparison counts NaN on both sides as a match"
)

field() {  # field N of a mutant line
    awk -v n="$1" 'BEGIN { FS = " ;; " } { print $n }' <<<"$2"
}

usage() {
    echo "usage: scripts/mutants.sh [--list] [NAME...]" >&2
    exit 2
}

list=0
picked=()
for a in "$@"; do
    case "$a" in
        --list) list=1 ;;
        -h | --help) usage ;;
        -*) usage ;;
        *) picked+=("$a") ;;
    esac
done
if ((list)); then
    for m in "${MUTANTS[@]}"; do printf '%-26s %s\n' "$(field 1 "$m")" "$(field 5 "$m")"; done
    exit 0
fi
for name in "${picked[@]}"; do
    found=0
    for m in "${MUTANTS[@]}"; do [ "$(field 1 "$m")" = "$name" ] && found=1; done
    ((found)) || { echo "mutants: no mutant '$name' (scripts/mutants.sh --list)" >&2; exit 2; }
done

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    echo "mutants: configuring and building $BUILD_DIR" >&2
    scripts/setup.sh >&2 || exit 1
fi
tests_exe="$BUILD_DIR/tests/foxhunt-tests"
work=$(mktemp -d)
current=""  # the file mutated now, restored by restore()
restore() {
    if [ -n "$current" ]; then
        cp "$work/original" "$current" && touch "$current"
        current=""
    fi
}
cleanup() {
    restore
    rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "mutants: interrupted; the source is restored (rebuild with ninja -C $BUILD_DIR)" >&2; exit 130' INT TERM

build() { ninja -C "$BUILD_DIR" >"$work/build.log" 2>&1; }

echo "mutants: building the unmutated tree" >&2
build || { cat "$work/build.log" >&2; echo "mutants: the unmutated tree does not build" >&2; exit 1; }

echo "| mutant | what it changes | caught by (CI tests) |"
echo "|---|---|---|"
status=0
for m in "${MUTANTS[@]}"; do
    name=$(field 1 "$m")
    file=$(field 2 "$m")
    expr=$(field 3 "$m")
    filter=$(field 4 "$m")
    what=$(field 5 "$m")
    if ((${#picked[@]})); then
        want=0
        for p in "${picked[@]}"; do [ "$p" = "$name" ] && want=1; done
        ((want)) || continue
    fi
    start=$SECONDS
    cp "$file" "$work/original"
    current=$file
    sed -E -i -e "$expr" "$file"
    if cmp -s "$file" "$work/original"; then
        restore
        echo "| \`$name\` | $what | **DOES NOT APPLY** (the sed expression matched nothing in $file) |"
        status=1
        continue
    fi
    if ! build; then
        restore
        tail -20 "$work/build.log" >&2
        echo "| \`$name\` | $what | **DOES NOT BUILD** |"
        status=1
        continue
    fi
    # The filter's tests, then which of them failed (Catch2's JUnit report: a test case's sections
    # are reported as "NAME/SECTION").
    "$tests_exe" --list-test-names-only "$filter" 2>/dev/null | sed '/^$/d' >"$work/names"
    FH_TRAIN_EXE="$root/$BUILD_DIR/foxhunt-train" FH_SOURCE_DIR="$root" \
        "$tests_exe" "$filter" -r junit -o "$work/junit.xml" >/dev/null 2>&1
    caught=$(python3 - "$work/junit.xml" "$work/names" <<'EOF'
import sys, xml.etree.ElementTree as ET
names = [l.rstrip("\n") for l in open(sys.argv[2]) if l.strip()]
failed = set()
try:
    root = ET.parse(sys.argv[1]).getroot()
    cases = root.iter("testcase")
except (ET.ParseError, FileNotFoundError):
    # A crash leaves no report: every test of the filter is suspect; say so.
    print("(the test run crashed)")
    sys.exit(0)
for c in cases:
    if c.find("failure") is None and c.find("error") is None:
        continue
    n = c.get("name", "")
    best = max((x for x in names if n == x or n.startswith(x + "/")), key=len, default=n)
    failed.add(best)
print("; ".join('"' + f + '"' for f in sorted(failed)))
EOF
)
    restore
    secs=$((SECONDS - start))
    if [ -z "$caught" ]; then
        echo "| \`$name\` | $what | **NOT CAUGHT** by \`$filter\` (${secs} s) |"
        status=1
    else
        echo "| \`$name\` | $what | $caught (\`$filter\`, ${secs} s) |"
    fi
done
echo "mutants: rebuilding the unmutated tree" >&2
build || { cat "$work/build.log" >&2; status=1; }
exit $status
