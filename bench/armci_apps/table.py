#!/usr/bin/env python3
"""The table of bench/armci_apps/run.sh: each application's time per protocol, the ratio to the
application's default protocol (summa: zero-copy, non-blocking gets; mg: host-assisted strided
puts), and ours against ARMCI-MPI when it ran. Every run checked its result itself (a wrong
one fails the run), so every row here is of a correct computation.

usage: table.py RUNS.jsonl MACHINE.jsonl [--commit C] [--rows-out FILE]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_rows import append_rows, fmt_ratio, print_tally, read_jsonl  # noqa: E402

BASELINE = {"summa": "zero-copy", "mg": "host-assisted"}
MODELLED = "-modelled"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runs")
    ap.add_argument("machine")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--rows-out")
    a = ap.parse_args()
    runs = read_jsonl(a.runs, "runs")
    if runs is None:
        return 1
    machine = next((r["machine"] for r in (read_jsonl(a.machine, "machine line") or []) if "machine" in r), None)
    if machine:
        print(f"# machine: {machine.get('cpu', '?')}, memcpy {machine.get('memcpy_gbs', '?')} GB/s "
              "(measured in this run); compare ratios, not absolute numbers, across machines")
    by = {}
    for r in runs:
        if "app" not in r:
            continue
        app, label = r["app"], r["impl"]
        config = label[len(app) + 1:] if label.startswith(app + "-") else label
        by[(app, config)] = r
    out = []

    def row(benchmark, case, value, unit, params):
        out.append({"benchmark": benchmark, "case": case, "params": params, "value": value, "unit": unit,
                    "reps": 1, "min": value, "median": value, "max": value,
                    "machine": machine or {}, "commit": a.commit, "settings": {}})

    hdr = f"{'app':<7}{'protocol':<26}{'time (ms)':>11}{'comm (ms)':>11}{'/ default':>11}"
    print(hdr)
    print("-" * len(hdr))
    for (app, config), r in by.items():
        if config == "armci-mpi":
            continue
        t = r["time_us"] / 1e3
        comm = r.get("wait_us", r.get("comm_us", 0)) / 1e3
        # A modelled run is compared with the default protocol's modelled run.
        default = BASELINE[app] + (MODELLED if config.endswith(MODELLED) else "")
        base = by.get((app, default))
        ratio = t / (base["time_us"] / 1e3) if base else None
        print(f"{app:<7}{config:<26}{t:>11.2f}{comm:>11.2f}{fmt_ratio(ratio):>11}")
        params = {"app": app, "n": r["n"], "ranks": r["ranks"], "comm_ms": comm}
        row("armci-apps", f"{app}-{config}", t, "ms", params)
        if ratio is not None and config != default:
            row("armci-apps-check", f"{app} {config} / {default}", ratio, "x",
                {"what": f"{app}: time with {config} / with {default}"})
    counts = {"PASS": 0, "MISS": 0, "info": 0, "n/a": 0}
    print()
    print(f"{'ours / ARMCI-MPI (time)':<44}{'ours':>10}{'theirs':>10}{'ratio':>9}{'target':>8}{'status':>8}")
    for app in ("summa", "mg"):
        ours, theirs = by.get((app, BASELINE[app])), by.get((app, "armci-mpi"))
        if not ours or not theirs:
            counts["n/a"] += 1
            print(f"{app + ' (ARMCI-MPI did not run)':<44}")
            continue
        ratio = ours["time_us"] / theirs["time_us"]
        status = "PASS" if ratio <= 1.0 else "MISS"
        counts[status] += 1
        print(f"{app + ' ' + BASELINE[app] + ' vs ARMCI-MPI':<44}{ours['time_us'] / 1e3:>10.2f}"
              f"{theirs['time_us'] / 1e3:>10.2f}{fmt_ratio(ratio):>9}{'<= 1':>8}{status:>8}")
        row("armci-apps-check", f"{app} vs ARMCI-MPI", ratio, "x",
            {"what": f"{app}: our time ({BASELINE[app]}) / ARMCI-MPI's over Open MPI", "target": "<= 1"})
    print_tally(counts, 89)
    if a.rows_out:
        append_rows(a.rows_out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
