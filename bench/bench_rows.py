"""Shared by the comparison scripts: reading JSON-lines benchmark output and formatting values."""

import json
import sys


def read_jsonl(path, what="rows"):
    """The JSON objects of a JSON-lines file (other lines skipped); None if it cannot be read."""
    rows = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    except OSError as e:
        print(f"{sys.argv[0]}: cannot read {what} {path}: {e}", file=sys.stderr)
        return None
    return rows


def fmt(v, kind):
    """A latency (us) or bandwidth (MB/s, kind == "bw") for a table cell."""
    if v is None:
        return "n/a"
    if kind == "bw":
        return f"{v:.1f}"
    return f"{v:.4f}" if v < 10 else f"{v:.2f}"


def fmt_ratio(ratio):
    """A ratio for a table cell: three decimals below 0.1, two above; "n/a" when missing."""
    if ratio is None:
        return "n/a"
    return f"{ratio:.3f}" if ratio < 0.1 else f"{ratio:.2f}"


def print_tally(counts, width):
    """The closing rule of a check table (`width` wide) and its PASS / MISS / info / n/a count."""
    print("-" * width)
    print(f"# {counts['PASS']} PASS, {counts['MISS']} MISS, {counts['info']} info, {counts['n/a']} n/a")


def append_rows(path, rows):
    """Appends report-schema rows to a JSON-lines file."""
    with open(path, "a", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def activerma_rows(rows):
    """`activerma bench --json` rows (the report's schema: benchmark, case, params, value, unit,
    ...) as the comparison scripts index them: (bench, target, size) keys with latency_us or
    bandwidth_mbs, and a meta dict of the run's conditions taken from the rows themselves."""
    out, meta = [], {}
    for r in rows:
        if "benchmark" not in r:
            continue
        p = r.get("params") or {}
        if not meta:
            m = r.get("machine") or {}
            meta = {"cpu_model": m.get("cpu", "?"), "memcpy_gbs": m.get("memcpy_gbs", "?"),
                    "conduit": p.get("conduit"), "progress": p.get("progress", "?"),
                    "bind": p.get("bind", "?"), "quick": p.get("quick", "?"),
                    "settings": r.get("settings") or {}, "commit": r.get("commit", "?")}
        row = {"bench": r["benchmark"].replace("-", "_"), "target": r.get("case"), "size": p.get("size")}
        row["bandwidth_mbs" if r.get("unit") == "MB/s" else "latency_us"] = r.get("value")
        out.append(row)
    return out, meta
