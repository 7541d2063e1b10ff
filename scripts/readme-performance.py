#!/usr/bin/env python3
"""Regenerates the README's performance section from a report folder.

usage: scripts/readme-performance.py REPORT_DIR [--readme README.md]

Replaces everything between the lines `<!-- report:begin -->` and `<!-- report:end -->` of the
README with the folder's summary.md (its check tables, per paper and figure; headings moved
one level down to sit under the README's own), headed by where it comes from. So every
number of that section comes from one `activerma report` run, named by its folder, and is
never edited by hand. Python 3, standard library only.
"""

import argparse
import json
import os
import sys

BEGIN, END = "<!-- report:begin -->", "<!-- report:end -->"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report_dir")
    ap.add_argument("--readme", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "README.md"))
    a = ap.parse_args()

    try:
        with open(os.path.join(a.report_dir, "summary.md"), encoding="utf-8") as f:
            summary = f.read().splitlines()
        with open(os.path.join(a.report_dir, "run.json"), encoding="utf-8") as f:
            run = json.load(f)
        with open(a.readme, encoding="utf-8") as f:
            readme = f.read()
    except OSError as e:
        print(f"readme-performance: {e}", file=sys.stderr)
        return 2
    if readme.count(BEGIN) != 1 or readme.count(END) != 1:
        print(f"readme-performance: {a.readme} needs one {BEGIN} and one {END} line", file=sys.stderr)
        return 2

    folder = os.path.relpath(os.path.abspath(a.report_dir), os.path.dirname(os.path.abspath(a.readme)))
    m = run["machine"]
    secs = sum(b["seconds"] for b in run["benchmarks"])
    body = [
        f"From `{folder}/` (`activerma report`{' --quick' if run['quick'] else ''}, {run['started'][:10]}, "
        f"commit {run['commit']}, {len(run['benchmarks'])} benchmarks in {secs / 60:.1f} min on "
        f"{m['cpu']}, {m['cpus']} CPUs, memcpy {m['memcpy_gbs']} GB/s; regenerated with "
        f"`python3 scripts/readme-performance.py {folder}`):",
        "",
    ]
    # summary.md's own title and machine line are said above; its headings go one level down.
    for line in summary[1:]:
        if line.startswith(m["cpu"]):
            continue
        if not line.strip() and body and not body[-1].strip():
            continue  # one blank line between blocks
        body.append("#" + line if line.startswith("#") else line)
    while body and not body[-1].strip():
        body.pop()

    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(a.readme, "w", encoding="utf-8") as f:
        f.write(head + BEGIN + "\n" + "\n".join(body) + "\n" + END + tail)
    print(f"readme-performance: {a.readme}: performance section from {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
