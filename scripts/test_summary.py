#!/usr/bin/env python3
"""Reads meson's testlog.json and prints "N passed, N failed" counted in Catch2 test cases.

A meson test that failed without a Catch2 summary (a crash, a timeout) counts as one failure;
a skipped one (exit 77: [gpu] tests on a machine without a GPU) is reported on its own line.
"""
import json
import re
import sys

ALL_PASSED = re.compile(r"All tests passed \((\d+) assertions? in (\d+) test cases?\)")
MIXED = re.compile(r"test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed")
ALL_FAILED = re.compile(r"test cases:\s*(\d+)\s*\|\s*(\d+) failed")

passed = failed = 0
with open(sys.argv[1]) as f:
    for line in f:
        t = json.loads(line)
        out = t.get("stdout", "") or ""
        result = t.get("result", "")
        if result == "SKIP":
            print(f"skipped: meson test '{t['name']}' ({out.strip().splitlines()[-1] if out.strip() else 'exit 77'})")
            continue
        m = ALL_PASSED.search(out)
        if m:
            passed += int(m.group(2))
        elif (m := MIXED.search(out)):
            passed += int(m.group(2))
            failed += int(m.group(3))
        elif (m := ALL_FAILED.search(out)):
            failed += int(m.group(2))
        elif result != "OK":
            failed += 1
            print(f"meson test '{t['name']}' ended {result} without a Catch2 summary")
        elif "No tests ran" in out or "No test cases matched" in out:
            pass
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
