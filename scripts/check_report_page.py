#!/usr/bin/python3
"""Opens a report folder's index.html in Debian's headless Chromium and checks what a person
would see: fails on any console error, failed resource load or broken image, and on a page
with no image at all.

    /usr/bin/python3 scripts/check_report_page.py DIR [--screenshot FILE] [--timeout SECONDS]

Problems it lists (exit 1, each on a line of its own):
  - a browser console message of level SEVERE: console.error, an uncaught exception, and a
    resource the page asked for that did not load (a missing file gives one);
  - an <img> that is not complete or has naturalWidth 0 once the page has loaded;
  - a link (<a href>) to a local file that does not exist, or to a #fragment that names no
    element of the page;
  - no <img> on the page at all.
Console warnings are printed but do not fail the check. With --screenshot, writes a PNG of
the whole page (written even when the check fails, so a person can see why). Exit 2: the
check could not run (no such page, no browser, timed out).

Needs Debian's chromium, chromium-driver and python3-selenium (scripts/setup.sh --browser),
run by Debian's /usr/bin/python3: another python3 on the PATH may not see python3-selenium.
The page is opened from a file:// URL with host names resolving to nothing, so it uses no
network; the browser profile lives in a temporary folder that is removed afterwards.
"""

import argparse
import base64
import os
import shutil
import signal
import sys
import tempfile
import time
import urllib.parse
import urllib.request

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# Chromium does not draw a page taller than this in one piece; a longer page is cut.
MAX_SHOT_HEIGHT = 16384
PROG = "check_report_page"


class Timeout(Exception):
    pass


def fail_to_run(msg):
    print(f"{PROG}: cannot check: {msg}", file=sys.stderr)
    sys.exit(2)


# What the page shows once loaded: every image, with whether it loaded; every link, resolved
# to an absolute URL, with whether a same-page fragment names an element.
PAGE_STATE_JS = """
const doc = document;
return {
  ready: doc.readyState,
  images: Array.from(doc.images).map(i => ({
    src: i.getAttribute('src') || '',
    url: i.currentSrc || i.src || '',
    complete: i.complete,
    naturalWidth: i.naturalWidth,
  })),
  links: Array.from(doc.querySelectorAll('a[href]')).map(a => {
    const href = a.getAttribute('href');
    let target = true;
    if (href.startsWith('#') && href.length > 1) {
      const id = decodeURIComponent(href.slice(1));
      target = !!(doc.getElementById(id) || doc.getElementsByName(id).length);
    }
    return {href: href, url: a.href, target: target};
  }),
};
"""

# Lazily loaded images start loading only when near the viewport, which a headless window
# may never scroll to: load them all now.
EAGER_JS = """
for (const i of document.images) {
  if (i.loading === 'lazy') { i.loading = 'eager'; }
}
"""


def local_file_missing(url):
    """For a file:// URL, whether the file it names is missing (query and fragment aside)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "file":
        return False
    return not os.path.exists(urllib.request.url2pathname(parts.path))


def check(driver, url, deadline):
    """Loads url and returns (problems, notes, page): problems fail the check."""
    problems, notes = [], []
    driver.set_page_load_timeout(max(1, deadline - time.monotonic()))
    driver.get(url)  # returns once the load event has fired
    driver.execute_script(EAGER_JS)
    # Images still loading after the load event (none should be, but a lazy one may): wait
    # for them until the deadline.
    while True:
        page = driver.execute_script(PAGE_STATE_JS)
        pending = [i for i in page["images"] if not i["complete"]]
        if page["ready"] == "complete" and not pending:
            break
        if time.monotonic() > deadline - 2:
            break
        time.sleep(0.1)

    for entry in driver.get_log("browser"):
        level, message = entry.get("level"), entry.get("message", "")
        source = entry.get("source", "")
        line = f"console {level.lower()} ({source}): {message}" if source else f"console {level.lower()}: {message}"
        if level == "SEVERE":
            problems.append(line)
        elif level == "WARNING":
            notes.append(line)

    images = page["images"]
    if not images:
        problems.append("the page has no <img>: a report page shows its figures as images")
    for img in images:
        where = f'<img src="{img["src"]}">'
        if not img["complete"]:
            problems.append(f"{where} did not finish loading")
        elif img["naturalWidth"] == 0:
            problems.append(f"{where} is broken (naturalWidth 0: the file is missing or not an image)")

    for link in page["links"]:
        if not link["target"]:
            problems.append(f'<a href="{link["href"]}"> names no element of the page')
        elif local_file_missing(link["url"]):
            problems.append(f'<a href="{link["href"]}"> links to a file that does not exist')
    return problems, notes, page


def screenshot(driver, path):
    """Writes a PNG of the whole page, not only the window."""
    metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
    size = metrics.get("cssContentSize") or metrics["contentSize"]
    width = max(1, int(size["width"] + 0.5))
    height = max(1, int(size["height"] + 0.5))
    if height > MAX_SHOT_HEIGHT:
        print(f"{PROG}: the page is {height} px tall: the screenshot shows its first {MAX_SHOT_HEIGHT} px", file=sys.stderr)
        height = MAX_SHOT_HEIGHT
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png",
        "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
    })
    with open(path, "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    return width, height


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the report folder, holding index.html")
    ap.add_argument("--screenshot", metavar="FILE", help="write a PNG of the whole page here")
    ap.add_argument("--timeout", type=float, default=60, metavar="SECONDS",
                    help="give up after this long, browser start included (default 60)")
    args = ap.parse_args()

    index = os.path.join(os.path.abspath(args.dir), "index.html")
    if not os.path.isfile(index):
        fail_to_run(f"no page {index}")
    for exe in (CHROMIUM, CHROMEDRIVER):
        if not os.access(exe, os.X_OK):
            fail_to_run(f"no {exe}: run scripts/setup.sh --browser")
    try:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        fail_to_run(f"{sys.executable} cannot import selenium: run scripts/setup.sh --browser, "
                    "and run this script with Debian's /usr/bin/python3")

    # One bound on the whole run, the browser's start included: a hung browser or driver
    # becomes a clear error instead of a hang.
    def on_alarm(signum, frame):
        raise Timeout()
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(max(1, int(args.timeout + 0.5)))
    deadline = time.monotonic() + args.timeout

    url = "file://" + urllib.request.pathname2url(index)
    tmp = tempfile.mkdtemp(prefix="activerma-page-check.")
    driver_log = os.path.join(tmp, "chromedriver.log")
    driver = None
    service = None
    step = "starting Chromium"
    try:
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for flag in (
            "--headless=new",
            # Chromium's sandbox cannot start as root, nor in many containers; the page is
            # the project's own file.
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            f"--user-data-dir={os.path.join(tmp, 'profile')}",
            "--window-size=1280,900",
            "--hide-scrollbars",
            # No network: the page is a file and must need nothing else; every host name
            # resolves to nothing, and the browser's own background traffic is off.
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--no-first-run",
            "--no-default-browser-check",
        ):
            opts.add_argument(flag)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        # The driver's and the browser's own temporary files go in the folder removed below.
        env = dict(os.environ, TMPDIR=tmp)
        service = Service(executable_path=CHROMEDRIVER, log_path=driver_log, env=env)
        driver = webdriver.Chrome(service=service, options=opts)

        step = f"loading {url}"
        problems, notes, page = check(driver, url, deadline)
        if args.screenshot:
            step = f"taking the screenshot {args.screenshot}"
            width, height = screenshot(driver, args.screenshot)
            notes.append(f"screenshot: {args.screenshot} ({width}x{height} px)")
    except Timeout:
        fail_to_run(f"timed out after {args.timeout:g} s while {step}")
    except WebDriverException as e:
        text = (e.msg or str(e)).strip()
        msg = text.splitlines()[0] if text else type(e).__name__
        tail = ""
        if os.path.exists(driver_log):
            with open(driver_log, errors="replace") as f:
                lines = [l.rstrip() for l in f if l.strip()]
            if lines:
                tail = "\n  chromedriver log ends:\n    " + "\n    ".join(lines[-5:])
        fail_to_run(f"{step}: {msg}{tail}")
    finally:
        # Leave nothing running and nothing in the temporary folder, within a bounded time.
        signal.alarm(15)
        try:
            if driver is not None:
                driver.quit()
            elif service is not None:
                service.stop()
        except (Timeout, Exception):
            proc = getattr(service, "process", None)
            if proc is not None and proc.poll() is None:
                proc.kill()
        finally:
            signal.alarm(0)
            shutil.rmtree(tmp, ignore_errors=True)

    for note in notes:
        print(f"{PROG}: {note}")
    shown = os.path.join(args.dir, "index.html")
    if problems:
        print(f"{PROG}: FAILED: {shown}: {len(problems)} problem(s):", file=sys.stderr)
        for p in problems:
            print(f"  - {p}", file=sys.stderr)
        sys.exit(1)
    print(f"{PROG}: OK: {shown}: {len(page['images'])} image(s) loaded, "
          f"{len(page['links'])} link(s), no console error")


if __name__ == "__main__":
    main()
