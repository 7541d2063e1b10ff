#!/usr/bin/env python3
"""Ratio table: activerma's ARMCI vs ARMCI-MPI (Open MPI), from the JSON lines of one run.

usage: compare.py OURS.jsonl THEIRS.jsonl [--pair OURS THEIRS]... [--commit HASH]
                  [--load-start TEXT] [--load-end TEXT] [--rows-out FILE]
                  [--across-hosts | --hosts-mpi openmpi|mpich]
                  [--layer-round OURS CORE [C_API]]...

Both files come from bench/armci_peers/armci_bench.c (run.sh runs it). Every value is a median
over timed batches. Ratios are ours / theirs: latencies (lower is better) as latency ratios,
transfers of 1 MiB and strided transfers as bandwidth ratios (higher is better). The targets are
issue 16's. --pair adds more rounds, each a pair of jobs run one right after the other (ours,
then theirs): each metric's ratio is then the median of the pairs' ratios, their range printed
beside it (the columns are medians of each side); over TCP on a small VM one pair moves by 2x. Exit status: 0 when the table was printed (MISS included: benchmarks report, they
don't gate; missing rows show as n/a), 2 when our file cannot be read or holds no rows.
--rows-out appends every compared ratio as a row of activerma's report schema (benchmark
"armci-check", case the metric, params impl / target / what / ours / theirs), which
`activerma report` draws. --across-hosts: both ran on the MPI conduit with all traffic through
TCP (run.sh --tcp), judged by issue 16's targets for other hosts (latency <= 1.1x, bandwidth >=
1.0x ARMCI-MPI), with the cases labelled "(TCP)" and the rows' benchmark "armci-check-tcp".
--hosts-mpi MPI: both ran on MPI (openmpi or mpich), one rank on each of two emulated hosts
(run.sh --hosts), judged by the same targets, the cases labelled "(2 hosts)"; no report rows.
--layer-round OURS CORE [C_API] (repeatable): a pair of jobs run one right after the other, our ARMCI
rows and `activerma bench --json` rows of put-latency / get-latency: a second table judges the
ARMCI layer's own cost, ARMCI put (+ fence) and get of 8 B, 64 KiB and 1 MiB against the core's
blocking put and get to a segment (issue 16: within 1.1x), each ratio the median of the pairs'
ratios; its report rows are benchmark "armci-layer-check" (min / max: the pairs' range). A third
file, the JSON lines of core_c_bench.c run right after, adds the core as a C program reaches it
(arma_put / arma_get): its column and ARMCI's ratio to it are for information, and show what of
the judged ratio is the layer and what is C calling into a library at all.
"""

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_rows import append_rows, fmt, fmt_ratio, print_tally, read_jsonl  # noqa: E402

# label (the row's case), (test, size), kind, target (None: for information)
METRICS = [
    ("8 B put latency", ("put", 8), "lat", 0.25),
    ("8 B get latency", ("get", 8), "lat", 0.25),
    ("fetch-add latency", ("rmw", 4), "lat", 0.25),
    ("64 KiB put latency", ("put", 64 << 10), "lat", None),
    ("64 KiB get latency", ("get", 64 << 10), "lat", None),
    ("1 MiB put bandwidth", ("put", 1 << 20), "bw", 1.0),
    ("1 MiB get bandwidth", ("get", 1 << 20), "bw", 1.0),
    ("strided get 1024x64 B", ("gets", 1024 * 64), "bw", 5.0),
    ("strided get 1024x1 KiB", ("gets", 1024 * 1024), "bw", 1.5),
    ("vector get 1024x64 B", ("getv", 1024 * 64), "bw", None),
    ("8 B accumulate latency", ("acc", 8), "lat", None),
    ("64 KiB accumulate bandwidth", ("acc", 64 << 10), "bw", None),
    ("1 MiB accumulate bandwidth", ("acc", 1 << 20), "bw", None),
    ("strided acc 1024x64 B", ("accs", 1024 * 64), "bw", 3.0),
    ("mutex lock+unlock", ("mutex", 0), "lat", None),
]

# Across hosts (both over TCP): the same metrics, issue 16's targets for other hosts.
ACROSS_TARGETS = {"lat": 1.1, "bw": 1.0}

# The ARMCI layer over the core: label, our ARMCI test, the core's benchmark (to a segment),
# the size. Every size the ARMCI benchmark times contiguously: at 8 B the layer's own
# instructions and the C call show, at 64 KiB and 1 MiB the copy should hide them.
LAYER = [
    ("ARMCI 8 B put (+ fence) / core put", "put", "put-latency", 8),
    ("ARMCI 8 B get / core get", "get", "get-latency", 8),
    ("ARMCI 64 KiB put (+ fence) / core put", "put", "put-latency", 64 << 10),
    ("ARMCI 64 KiB get / core get", "get", "get-latency", 64 << 10),
    ("ARMCI 1 MiB put (+ fence) / core put", "put", "put-latency", 1 << 20),
    ("ARMCI 1 MiB get / core get", "get", "get-latency", 1 << 20),
]
LAYER_TARGET = 1.1


def paired(both):
    """From (ours, base) values of pairs of jobs (None where a job lacks the row): the sorted
    ratios of the pairs, their median, and the medians of each side (None when no pair has both)."""
    both = [(m, b) for m, b in both if m is not None and b]
    ratios = sorted(m / b for m, b in both)
    if not ratios:
        return ratios, None, None, None
    return (ratios, statistics.median(ratios), statistics.median(m for m, _ in both),
            statistics.median(b for _, b in both))


def spread(ratios):
    """The range column: the pairs' smallest and largest ratio ("-" for a single pair)."""
    return f"{fmt_ratio(ratios[0])}-{fmt_ratio(ratios[-1])}" if len(ratios) > 1 else "-"


def layer_table(rounds, machine, commit):
    """Prints the ARMCI-layer table from `rounds`, pairs (our ARMCI rows, the core's rows) run one
    right after the other; each metric's ratio is the median of the pairs' ratios (the columns:
    medians of each side). Returns the report rows."""
    def by_test(rows):
        return {(r.get("test"), r.get("size")): r.get("median_us") for r in rows if "test" in r}

    runs = []
    for ours_rows, core_rows, capi_rows in rounds:
        core = {(r.get("benchmark"), r.get("params", {}).get("size")): r.get("median") for r in core_rows
                if r.get("case") == "segment"}
        runs.append((by_test(ours_rows), core, by_test(capi_rows)))
    print()
    print("# the ARMCI layer over activerma's own core: ARMCI_Put + ARMCI_Fence / ARMCI_Get against"
          " `activerma bench put-latency / get-latency` (blocking, to a segment; Rust loops that inline"
          " the core), latency ratios; beside them, for information, the core from C through its C API"
          " (core_c_bench.c: arma_put / arma_get) and ARMCI's ratio to it;"
          f" {len(runs)} round(s) of jobs, each ARMCI job right before the core's, ratio = median of"
          " the rounds' ratios (range beside it)")
    hdr = (f"{'metric':<46}{'ARMCI':>10}{'core':>10}{'ratio':>9}{'range':>13}{'target':>10}{'status':>8}"
           f"{'C API':>10}{'/ C API':>9}")
    print(hdr)
    print("-" * len(hdr))
    counts = {"PASS": 0, "MISS": 0, "info": 0, "n/a": 0}
    rows = []
    for label, test, bench, size in LAYER:
        ratios, ratio, mine, base = paired((o.get((test, size)), c.get((bench, size))) for o, c, _ in runs)
        c_ratios, c_ratio, _, c_api = paired((o.get((test, size)), k.get((test, size))) for o, _, k in runs)
        status = "n/a" if ratio is None else ("PASS" if ratio <= LAYER_TARGET else "MISS")
        counts[status] += 1
        if ratio is not None and machine:
            params = {"impl": "activerma-core", "what": f"{label} (us)", "ours": mine, "theirs": base,
                      "target": f"<= {LAYER_TARGET:g}"}
            if c_ratio is not None:
                params.update({"c_api": c_api, "ratio_to_c_api": c_ratio})
            rows.append({
                "benchmark": "armci-layer-check", "case": label, "params": params,
                "value": ratio, "unit": "x", "reps": len(ratios), "min": ratios[0], "median": ratio,
                "max": ratios[-1], "machine": machine, "commit": commit, "settings": {},
            })
        print(f"{label + ' (us)':<46}{fmt(mine, 'lat'):>10}{fmt(base, 'lat'):>10}{fmt_ratio(ratio):>9}"
              f"{spread(ratios):>13}{'<= ' + format(LAYER_TARGET, 'g'):>10}{status:>8}"
              f"{fmt(c_api, 'lat'):>10}{fmt_ratio(c_ratio):>9}")
    print_tally(counts, len(hdr))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ours")
    ap.add_argument("theirs")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--load-start", default="")
    ap.add_argument("--load-end", default="")
    ap.add_argument("--rows-out", default=None)
    ap.add_argument("--across-hosts", action="store_true")
    ap.add_argument("--hosts-mpi", choices=["openmpi", "mpich"], default=None)
    ap.add_argument("--pair", nargs=2, action="append", default=[], metavar=("OURS", "THEIRS"),
                    help="one more round: our rows and ARMCI-MPI's, run one right after the other")
    ap.add_argument("--layer-round", nargs="+", action="append", default=[], metavar="FILE",
                    help="one round of jobs for the layer table, run one right after the other: our"
                         " ARMCI rows, the core's (activerma bench --json) and, optionally, the core's"
                         " C API rows (core_c_bench.c); repeat for more rounds")
    a = ap.parse_args()
    if a.across_hosts and a.hosts_mpi:
        ap.error("--across-hosts or --hosts-mpi, not both")
    if a.hosts_mpi and a.rows_out:
        ap.error("--hosts-mpi makes no report rows")
    metrics = METRICS
    if a.across_hosts or a.hosts_mpi:
        where = "(TCP)" if a.across_hosts else "(2 hosts)"
        metrics = [(f"{label} {where}", key, kind, ACROSS_TARGETS[kind] if key[0] != "mutex" else None)
                   for label, key, kind, _ in METRICS]

    ours_rows = read_jsonl(a.ours)
    if not ours_rows:
        print(f"compare.py: no activerma rows in {a.ours}", file=sys.stderr)
        return 2
    theirs_rows = read_jsonl(a.theirs) or []
    machine = next((r["machine"] for r in ours_rows if "machine" in r), None)
    impl = next((r.get("impl") for r in theirs_rows if "impl" in r), "armci-mpi-openmpi")

    def by_test(rows):
        return {(r.get("test"), r.get("size")): r for r in rows if "test" in r}

    pairs = [(by_test(ours_rows), by_test(theirs_rows))]
    pairs += [(by_test(read_jsonl(o) or []), by_test(read_jsonl(t) or [])) for o, t in a.pair]

    print()
    if a.across_hosts:
        print("# activerma ARMCI (mpi conduit, ACTIVERMA_MPI_SHARED=off) vs ARMCI-MPI, both on Open MPI with"
              " every byte through TCP (standing for two hosts), 2 ranks, same run")
    elif a.hosts_mpi:
        name = {"openmpi": "Open MPI", "mpich": "MPICH"}[a.hosts_mpi]
        print(f"# activerma ARMCI (mpi conduit, {name} build) vs ARMCI-MPI on {name}, one rank on each of two"
              " emulated hosts (scripts/emulated-hosts.sh: network namespaces, TCP between them), same run")
    else:
        print("# activerma ARMCI (smp conduit) vs ARMCI-MPI over Open MPI, 2 ranks on this host, same run")
    if machine:
        print(f"# machine: {machine.get('cpu', '?')}, {machine.get('cpus', '?')} CPUs; memcpy 1 MiB: "
              f"{machine.get('memcpy_gbs', '?')} GB/s (measured in this run)")
    print(f"# load average: start {a.load_start or '?'}, end {a.load_end or '?'}  (activerma commit {a.commit})")
    print("# ratio = ours / theirs: latency (us, lower is better) or bandwidth (MB/s, higher is better);"
          f" medians on both sides; {len(pairs)} pair(s) of jobs, ours right before theirs, ratio ="
          " median of the pairs' ratios (range beside it)")
    if not theirs_rows:
        print("# no ARMCI-MPI rows (did its run fail?): every comparison is n/a")
    hdr = f"{'metric':<32}{'activerma':>12}{'ARMCI-MPI':>12}{'ratio':>9}{'range':>13}{'target':>10}{'status':>8}"
    print(hdr)
    print("-" * len(hdr))
    counts = {"PASS": 0, "MISS": 0, "info": 0, "n/a": 0}
    report_rows = []
    for label, key, kind, tgt in metrics:
        field = "median_mbs" if kind == "bw" else "median_us"
        ratios, ratio, mine, other = paired((o.get(key, {}).get(field), t.get(key, {}).get(field)) for o, t in pairs)
        if ratio is None:
            status, tgt_text = "n/a", "-"
        elif tgt is None:
            status, tgt_text = "info", "-"
        elif kind == "bw":
            status, tgt_text = ("PASS" if ratio >= tgt else "MISS"), f">= {tgt:g}"
        else:
            status, tgt_text = ("PASS" if ratio <= tgt else "MISS"), f"<= {tgt:g}"
        counts[status] += 1
        unit = "MB/s" if kind == "bw" else "us"
        if ratio is not None and machine:
            over = "over Open MPI, both through TCP" if a.across_hosts else "over Open MPI"
            params = {"impl": impl, "what": f"{label} ({unit}) vs ARMCI-MPI {over}",
                      "ours": mine, "theirs": other}
            if tgt is not None:
                params["target"] = f"{'>=' if kind == 'bw' else '<='} {tgt:g}"
            report_rows.append({
                "benchmark": "armci-check-tcp" if a.across_hosts else "armci-check", "case": label, "params": params,
                "value": ratio, "unit": "x", "reps": len(ratios), "min": ratios[0], "median": ratio,
                "max": ratios[-1], "machine": machine, "commit": a.commit, "settings": {},
            })
        print(f"{label + ' (' + unit + ')':<32}{fmt(mine, kind):>12}{fmt(other, kind):>12}{fmt_ratio(ratio):>9}"
              f"{spread(ratios):>13}{tgt_text:>10}{status:>8}")
    print_tally(counts, len(hdr))
    if a.layer_round:
        if any(len(files) not in (2, 3) for files in a.layer_round):
            ap.error("--layer-round takes OURS CORE [C_API]")
        rounds = [tuple(read_jsonl(f) or [] for f in files) + (([],) if len(files) == 2 else ())
                  for files in a.layer_round]
        report_rows += layer_table(rounds, machine, a.commit)
    if a.rows_out:
        append_rows(a.rows_out, report_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
