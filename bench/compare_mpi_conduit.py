#!/usr/bin/env python3
"""Ratio table: activerma on the mpi conduit vs plain MPI one-sided on the same MPI, one run.

usage: compare_mpi_conduit.py OURS.jsonl PEERS.jsonl [--case TEXT] [--impl NAME] [--rounds N]
                              [--load-start TEXT] [--load-end TEXT] [--json-out FILE]

OURS.jsonl comes from `activerma bench --json` started as 2 ranks by the MPI launcher (the mpi
conduit: put_rma / get_rma / atomic_rma through MPI_Put / MPI_Get / MPI_Fetch_and_op + flush on
the heap's MPI_Win_allocate window), PEERS.jsonl from bench/mpi_peers/run_mpi_peers.sh on the same MPI, launcher
options and one-sided component. --impl picks the peer rows (their "impl" field, e.g.
openmpi-osc-rdma); without it the file must hold one impl only.

Both sides are compared by their medians (ours: median of the per-repetition averages; theirs:
median_us / median_mbs). When the files hold several rounds (compare_mpi_conduit.sh --rounds,
which alternates the sides), each side's best round counts: the lowest latency, the highest
bandwidth. Ratio = ours / theirs; for latency lower is better (target <= 1.20: we
add little on top of the MPI engine), for bandwidth higher is better (target >= 0.95).
--json-out appends one JSON line per compared metric to FILE.

Exit status: 0 when the table was printed, MISS included (benchmarks report, they don't gate;
missing rows show as n/a); 2 when a file cannot be read, holds no rows, our rows are not from
the mpi conduit, or --impl is ambiguous.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_rows import activerma_rows, fmt, print_tally, read_jsonl  # noqa: E402

KIB, MIB = 1 << 10, 1 << 20

LAT_TARGET = 1.20
BW_TARGET = 0.95


def size_text(s):
    if s >= MIB and s % MIB == 0:
        return f"{s // MIB} MiB"
    if s >= KIB and s % KIB == 0:
        return f"{s // KIB} KiB"
    return f"{s} B"


# label, ours (bench, target, size, field), theirs (bench, size), kind, target (None: info)
METRICS = []
for _op in ("put", "get"):
    for _s in (8, 4 * KIB, 64 * KIB, MIB):
        METRICS.append((f"{size_text(_s)} {_op} latency (us)", (f"{_op}_latency", "segment", _s, "latency_us"),
                        (f"osu_{_op}_latency", _s), "lat", LAT_TARGET))
for _s in (64 * KIB, MIB):
    METRICS.append((f"{size_text(_s)} put bandwidth (MB/s)", ("put_bw", "segment", _s, "bandwidth_mbs"),
                    ("osu_put_bw", _s), "bw", BW_TARGET))
METRICS.append(("8 B fetch-add latency (us)", ("atomic_latency", "segment", 8, "latency_us"),
                ("osu_fop_latency", 8), "lat", None))


def best(values, kind):
    """The best of a metric's rounds (None when no round measured it)."""
    values = [v for v in values if v is not None]
    if not values:
        return None
    return max(values) if kind == "bw" else min(values)


def peer_value(row, kind):
    """A peer row's median (or, from older kits, its single value)."""
    v = row.get("median_mbs" if kind == "bw" else "median_us")
    if v is None:
        v = row.get("bandwidth_mbs" if kind == "bw" else "latency_us")
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ours")
    ap.add_argument("peers")
    ap.add_argument("--case", default="", help="what was measured, for the title")
    ap.add_argument("--impl", default=None, help="peer impl name to compare with")
    ap.add_argument("--rounds", type=int, default=1, help="rounds the files hold (for the title)")
    ap.add_argument("--load-start", default="")
    ap.add_argument("--load-end", default="")
    ap.add_argument("--json-out", default=None)
    a = ap.parse_args()

    ours_rows = read_jsonl(a.ours, "activerma results")
    if not ours_rows:
        print(f"compare_mpi_conduit.py: no activerma rows in {a.ours}", file=sys.stderr)
        return 2
    ours_rows, meta = activerma_rows(ours_rows)
    if meta.get("conduit") != "mpi":
        print(f"compare_mpi_conduit.py: {a.ours} was measured on conduit {meta.get('conduit')!r}, not 'mpi' "
              "(was activerma built with the mpi feature and started by the MPI launcher?)", file=sys.stderr)
        return 2
    peer_rows = read_jsonl(a.peers, "MPI peer results")
    peer_rows = peer_rows or []  # a failed peer run still prints our side, as n/a
    impls = sorted({r.get("impl") for r in peer_rows if r.get("impl")})
    impl = a.impl
    if impl is None:
        if len(impls) > 1:
            print(f"compare_mpi_conduit.py: {a.peers} holds several impls {impls}: pick one with --impl",
                  file=sys.stderr)
            return 2
        impl = impls[0] if impls else "?"
    ours, peers = {}, {}
    for r in ours_rows:
        ours.setdefault((r.get("bench"), r.get("target"), r.get("size")), []).append(r)
    for r in peer_rows:
        if r.get("impl") == impl:
            peers.setdefault((r.get("bench"), r.get("size")), []).append(r)

    print()
    print(f"# activerma (mpi conduit) vs plain MPI one-sided: {a.case or impl}")
    print(f"# machine: {meta.get('cpu_model', '?')}; memcpy 1 MiB: {meta.get('memcpy_gbs', '?')} GB/s "
          "(measured in this run); compare ratios, not absolute numbers, across machines")
    print(f"# load average: start {a.load_start or '?'}, end {a.load_end or '?'}"
          f"  (activerma commit {meta.get('commit', '?')})")
    print(f"# activerma: conduit {meta.get('conduit')}, progress {meta.get('progress', '?')}, binding "
          f"{meta.get('bind', '?')}, quick {meta.get('quick', '?')}; protocols put_rma / get_rma / atomic_rma "
          "(MPI_Put / MPI_Get + MPI_Win_flush on the heap's MPI_Win_allocate window, a shared lock per target; MPI_Fetch_and_op on it (MPICH) or on the dynamic window (Open MPI))")
    settings = meta.get("settings") or {}
    print("# activerma settings from the environment: "
          + (" ".join(f"{k}={v}" for k, v in sorted(settings.items())) or "none (defaults)"))
    print(f"# MPI peers ({impl}): MPI_Put / MPI_Get / MPI_Fetch_and_op + MPI_Win_flush on an MPI_Win_allocate window, "
          "lock(shared); bandwidth: 64 puts + one flush on both sides")
    if a.rounds > 1:
        print(f"# {a.rounds} rounds, the sides alternating; each side's best round is compared")
    print(f"# ratio = ours / theirs, medians on both sides; latency target <= {LAT_TARGET:.2f}, "
          f"bandwidth target >= {BW_TARGET:.2f}")
    if not peers:
        print(f"# no MPI peer rows for impl {impl!r} (did run_mpi_peers.sh fail?): every comparison is n/a")
    hdr = f"{'metric':<28}{'activerma':>12}{'MPI':>12}{'ratio':>9}{'target':>10}{'status':>8}"
    print(hdr)
    print("-" * len(hdr))
    counts = {"PASS": 0, "MISS": 0, "info": 0, "n/a": 0}
    out_lines = []
    for label, (b, t, s, field), (pb, ps), kind, tgt in METRICS:
        mine = best([r.get(field) for r in ours.get((b, t, s), [])], kind)
        theirs = best([peer_value(r, kind) for r in peers.get((pb, ps), [])], kind)
        ratio = mine / theirs if mine is not None and theirs else None
        if ratio is None:
            status, tgt_text = "n/a", "-"
        elif tgt is None:
            status, tgt_text = "info", "-"
        elif kind == "bw":
            status, tgt_text = ("PASS" if ratio >= tgt else "MISS"), f">= {tgt:.2f}"
        else:
            status, tgt_text = ("PASS" if ratio <= tgt else "MISS"), f"<= {tgt:.2f}"
        counts[status] += 1
        ratio_text = "n/a" if ratio is None else f"{ratio:.2f}"
        print(f"{label:<28}{fmt(mine, kind):>12}{fmt(theirs, kind):>12}{ratio_text:>9}{tgt_text:>10}{status:>8}")
        out_lines.append({"case": a.case, "impl": impl, "metric": label, "ours": mine, "mpi": theirs,
                          "ratio": None if ratio is None else round(ratio, 4), "target": tgt_text, "status": status,
                          "load_start": a.load_start, "load_end": a.load_end})
    print_tally(counts, len(hdr))
    if a.json_out:
        try:
            with open(a.json_out, "a", encoding="utf-8") as f:
                for line in out_lines:
                    f.write(json.dumps(line) + "\n")
        except OSError as e:
            print(f"compare_mpi_conduit.py: cannot write {a.json_out}: {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
