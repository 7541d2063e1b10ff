#!/usr/bin/env bash
# Tests scripts/check_report_page.py on small report folders made here: a good one (index.html,
# an SVG figure and the PNG it links to, a log) must pass, and each broken one (a missing
# image, a file that is not an image, a script that throws, a console.error, a dead link, no
# image at all) must fail with the message that names its problem. Installs headless
# Chromium and Selenium when missing (scripts/setup.sh --browser). Prints one PASS/FAIL line
# per case and a summary line; exits non-zero on any failure.
#   tests/report/page_check_test.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup.sh --browser
# Debian's interpreter: it is the one that sees python3-selenium.
py=/usr/bin/python3
check="$py scripts/check_report_page.py"
# The fixtures, the checker's output and the screenshot, removed however the run ends.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/activerma-page-check-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# A report folder laid out as `activerma report` writes one: index.html, figures/<id>.svg
# shown, figures/<id>.png and logs/<name>.txt linked. $2 is the page's <body>.
make_report() {
    local dir=$tmp/$1
    mkdir -p "$dir/figures" "$dir/logs"
    cat >"$dir/figures/latency.svg" <<'EOF'
<svg xmlns="http://www.w3.org/2000/svg" width="320" height="200" viewBox="0 0 320 200">
  <rect width="320" height="200" fill="#f8f8f8" stroke="#888"/>
  <polyline fill="none" stroke="#1f77b4" stroke-width="3" points="20,180 100,120 180,90 260,40 300,30"/>
  <text x="160" y="20" text-anchor="middle" font-family="sans-serif" font-size="14">latency</text>
</svg>
EOF
    # A real 32x20 PNG, made with the standard library alone.
    $py - "$dir/figures/latency.png" <<'EOF'
import struct, sys, zlib
w, h = 32, 20
rows = b"".join(b"\0" + b"".join(bytes((x * 8, y * 12, 160)) for x in range(w)) for y in range(h))
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) \
    + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
EOF
    echo "rank 0: 1000 puts, 12.5 us median" >"$dir/logs/bench.txt"
    cat >"$dir/index.html" <<EOF
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>activerma report</title>
<style>body { font-family: sans-serif; margin: 2em; } figure { margin: 1em 0; }</style>
</head><body>
<h1 id="top">activerma report</h1>
$2
</body></html>
EOF
}
figure='<figure><img src="figures/latency.svg" alt="latency" width="320" height="200">
<figcaption>Latency. <a href="figures/latency.png">PNG</a> · <a href="logs/bench.txt">log</a> · <a href="#top">top</a></figcaption></figure>'

make_report good "$figure"
make_report missing-image "$figure
<figure><img src=\"figures/gone.svg\" alt=\"gone\"></figure>"
make_report not-an-image "$figure
<figure><img src=\"figures/garbage.svg\" alt=\"garbage\"></figure>"
echo "this is not an SVG" >"$tmp/not-an-image/figures/garbage.svg"
make_report script-throws "$figure
<script>const points = undefined; points.length;</script>"
make_report console-error "$figure
<script>console.error('report: no rows for dht');</script>"
make_report dead-link "$figure
<p><a href=\"logs/gone.txt\">the missing log</a> <a href=\"#nowhere\">nowhere</a></p>"
make_report no-image "<p>No figures.</p>"

passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; sed 's/^/    /' "$tmp/out"; failed=$((failed + 1)); }

# The good page passes, and its screenshot is a PNG of the whole page.
if $check "$tmp/good" --screenshot "$tmp/good.png" >"$tmp/out" 2>&1; then
    if grep -q "OK: .*1 image(s) loaded" "$tmp/out" && head -c 8 "$tmp/good.png" | grep -q PNG; then
        pass "good page"
    else
        fail "good page" "passed, but without the OK line or the screenshot"
    fi
else
    fail "good page" "the checker failed on it"
fi

# Each broken page fails (exit 1, not 2: the check ran) with every message naming its
# problems.
expect_fail() {
    local name=$1 rc=0 message
    shift
    $check "$tmp/$name" >"$tmp/out" 2>&1 || rc=$?
    if [ $rc -ne 1 ]; then
        fail "$name" "exit $rc, expected 1"
        return
    fi
    for message in "$@"; do
        if ! grep -qF -- "$message" "$tmp/out"; then
            fail "$name" "no line with: $message"
            return
        fi
    done
    pass "$name"
}
expect_fail missing-image 'console severe (network): file://' 'gone.svg - Failed to load resource' \
    '<img src="figures/gone.svg"> is broken'
expect_fail not-an-image '<img src="figures/garbage.svg"> is broken'
expect_fail script-throws "Uncaught TypeError: Cannot read properties of undefined (reading 'length')"
expect_fail console-error 'console severe (console-api):' 'report: no rows for dht'
expect_fail dead-link '<a href="logs/gone.txt"> links to a file that does not exist' \
    '<a href="#nowhere"> names no element of the page'
expect_fail no-image 'the page has no <img>'

# A folder without index.html: the check cannot run (exit 2).
rc=0
$check "$tmp/none" >"$tmp/out" 2>&1 || rc=$?
if [ $rc -eq 2 ] && grep -qF "no page" "$tmp/out"; then pass "no index.html"; else fail "no index.html" "exit $rc, expected 2"; fi

echo "page check: $passed passed, $failed failed"
[ $failed -eq 0 ]
