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
