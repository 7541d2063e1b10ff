#!/usr/bin/env python3
"""Ratio table: activerma vs MPI one-sided (Open MPI osc/sm, MPICH), from JSON lines of one run.

usage: compare_mpi.py ACTIVERMA.jsonl MPI_PEERS.jsonl [--load-start TEXT] [--load-end TEXT]
                      [--rows-out FILE]

ACTIVERMA.jsonl comes from `activerma bench --json`, MPI_PEERS.jsonl from
bench/mpi_peers/run_mpi_peers.sh. Latencies are compared as medians (ours: median of the
per-repetition averages; the peers' `median_us`), bandwidths as medians too (`median_mbs`).
Ratios are ours / theirs: for latency lower is better, for bandwidth higher is better.
Exit status: 0 when the table was printed (MISS included: benchmarks report, they don't gate;
missing MPI rows show as n/a), 2 when the activerma file cannot be read or holds no rows.
--rows-out writes every compared ratio as a row of activerma's report schema (benchmark
"mpi-check", case the metric, params impl / target / what; machine and commit from our rows),
which `activerma report` draws.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_rows import activerma_rows, append_rows, fmt, fmt_ratio, print_tally, read_jsonl  # noqa: E402

MIB = 1 << 20

# label, our (bench, target, size, field), their (bench, size), kind, targets per impl
METRICS = [
    ("8 B put latency (us)", ("put_latency", "segment", 8, "latency_us"), ("osu_put_latency", 8), "lat",
     {"openmpi": 1.0, "mpich": 1 / 20}),
    ("8 B get latency (us)", ("get_latency", "segment", 8, "latency_us"), ("osu_get_latency", 8), "lat",
     {"openmpi": 1.0, "mpich": 1 / 20}),
    ("8 B fetch-add latency (us)", ("atomic_latency", "segment", 8, "latency_us"), ("osu_fop_latency", 8), "lat",
     {"openmpi": 1.0}),
    ("1 MiB put latency (us)", ("put_latency", "segment", MIB, "latency_us"), ("osu_put_latency", MIB), "lat",
     {"openmpi": 1.0}),
    ("1 MiB get latency (us)", ("get_latency", "segment", MIB, "latency_us"), ("osu_get_latency", MIB), "lat",
     {"openmpi": 1.0}),
    # bandwidth targets are lower bounds on the ratio (ours at least the peer's)
    ("1 MiB put bandwidth (MB/s)", ("put_bw", "segment", MIB, "bandwidth_mbs"), ("osu_put_bw", MIB), "bw",
     {"openmpi": 1.0}),
]

IMPL_NAMES = {"openmpi": "Open MPI osc/sm", "mpich": "MPICH"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ours")
    ap.add_argument("peers")
    ap.add_argument("--load-start", default="")
    ap.add_argument("--load-end", default="")
    ap.add_argument("--rows-out", default=None)
    a = ap.parse_args()
    first = next((r for r in (read_jsonl(a.ours) or []) if "benchmark" in r), {})
    report_rows = []

    ours_rows, peer_rows = read_jsonl(a.ours), read_jsonl(a.peers)
    if not ours_rows:
        print(f"compare_mpi.py: no activerma rows in {a.ours}", file=sys.stderr)
        return 2
    if peer_rows is None:
        peer_rows = []  # the peer kit failed before writing; say so in the table
    ours_rows, meta = activerma_rows(ours_rows)
    ours = {(r.get("bench"), r.get("target"), r.get("size")): r for r in ours_rows}
    peers = {(r.get("impl"), r.get("bench"), r.get("size")): r for r in peer_rows}
    impls = []
    for r in peer_rows:
        if r.get("impl") not in impls:
            impls.append(r.get("impl"))

    print()
    print("# activerma vs MPI one-sided, 2 ranks on this host, measured in the same run")
    print(f"# machine: {meta.get('cpu_model', '?')}; memcpy 1 MiB: {meta.get('memcpy_gbs', '?')} GB/s "
          "(measured in this run); compare ratios, not absolute numbers, across machines")
    print(f"# load average: start {a.load_start or '?'}, end {a.load_end or '?'}"
          f"  (activerma commit {meta.get('commit', '?')})")
    print(f"# activerma: conduit {meta.get('conduit', '?')}, progress {meta.get('progress', '?')}, "
          f"modelled network {meta.get('net_model', '?')}; MPI: see the peer kit's tables above")
    print("# ratio = ours / theirs (latency: lower is better; bandwidth: higher is better); medians on both sides")
    if not impls:
        print("# no MPI peer rows (did bench/mpi_peers/run_mpi_peers.sh fail?): every comparison is n/a")
        impls = ["openmpi", "mpich"]
    hdr = f"{'metric':<30}{'peer':<18}{'activerma':>12}{'peer value':>12}{'ratio':>9}{'target':>10}{'status':>8}"
    print(hdr)
    print("-" * len(hdr))
    counts = {"PASS": 0, "MISS": 0, "info": 0, "n/a": 0}
    for label, (b, t, s, field), (pb, ps), kind, targets in METRICS:
        mine = ours.get((b, t, s), {}).get(field)
        for impl in impls:
            row = peers.get((impl, pb, ps), {})
            theirs = row.get("median_mbs" if kind == "bw" else "median_us")
            if theirs is None:
                theirs = row.get("bandwidth_mbs" if kind == "bw" else "latency_us")
            ratio = mine / theirs if mine is not None and theirs else None
            tgt = targets.get(impl)
            if ratio is None:
                status, tgt_text = "n/a", "-"
            elif tgt is None:
                status, tgt_text = "info", "-"
            elif kind == "bw":
                status, tgt_text = ("PASS" if ratio >= tgt else "MISS"), f">= {tgt:.2f}"
            else:
                status = "PASS" if ratio <= tgt else "MISS"
                tgt_text = f"<= {tgt:.2f}" if tgt >= 0.1 else f"<= 1/{round(1 / tgt)}"
            counts[status] += 1
            if ratio is not None:
                what = f"{label.split(' (')[0]} vs {IMPL_NAMES.get(impl, impl)}"
                params = {"impl": impl, "what": what, "ours": mine, "theirs": theirs}
                if tgt is not None:
                    params["target"] = f"{'>=' if kind == 'bw' else '<='} {tgt:g}"
                report_rows.append({
                    "benchmark": "mpi-check", "case": label.split(" (")[0], "params": params,
                    "value": ratio, "unit": "x", "reps": 1, "min": ratio, "median": ratio, "max": ratio,
                    "machine": first.get("machine"), "commit": first.get("commit", "unknown"),
                    "settings": first.get("settings", {}),
                })
            ratio_text = fmt_ratio(ratio)
            name = IMPL_NAMES.get(impl, impl)
            print(f"{label:<30}{name:<18}{fmt(mine, kind):>12}{fmt(theirs, kind):>12}{ratio_text:>9}{tgt_text:>10}{status:>8}")
    print_tally(counts, len(hdr))
    if a.rows_out and first.get("machine"):
        append_rows(a.rows_out, report_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
