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
