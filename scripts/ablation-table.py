#!/usr/bin/env python3
"""Prints `foxhunt-train bench --ablate`'s output as markdown tables, one per phase: the phase as
captured, its skeleton (every launch a kernel that does nothing: the graph's nodes and edges), and
per op what leaving it out saves (its node and work), what removing only its work saves, and
what its work adds to the skeleton when every other launch does nothing.
Usage: scripts/ablation-table.py BENCH_JSON [BENCH_JSON...] (the JSON line bench prints)."""
import json
import sys


def table(name, phase):
    captured, skeleton = phase["us_captured"], phase["us_skeleton"]
    ops = sorted(phase["ops"], key=lambda o: -o["us_work"])
    print(f"{name}: {captured:.1f} us captured, {skeleton:.1f} us skeleton "
          f"(every launch a kernel that does nothing): the work adds {captured - skeleton:.1f} us to the nodes and edges\n")
    print("| op | us saved without it | us saved without its work | its work alone (the others' stood in for) |")
    print("|---|---:|---:|---:|")
    for o in ops:
        print(f"| {o['op']} | {o['us_saved']:.1f} | {o['us_work']:.1f} | {o['us_alone_work']:.1f} |")
    print(f"| every op, added | {sum(o['us_saved'] for o in ops):.1f} | "
          f"{sum(o['us_work'] for o in ops):.1f} | {sum(o['us_alone_work'] for o in ops):.1f} |\n")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        with open(path) as f:
            bench = json.loads(f.read().strip().splitlines()[-1])
        ablation = bench.get("ablation")
        if ablation is None:
            sys.exit(f"{path}: no ablation (run bench with --ablate on CUDA)")
        for phase in ("collection", "update"):
            if phase in ablation:
                table(f"{path} {phase}", ablation[phase])


if __name__ == "__main__":
    main()
