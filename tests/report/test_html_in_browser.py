"""The HTML report as a person sees it: rendered by headless Chromium, with no console message, no network
request, the verdicts first, and the user's own strings (script paths, source lines) escaped.

Marked `browser`; skipped where no Chromium is installed (`.ci/run` installs Debian's `chromium`). Chromium
runs with every host name mapped to nowhere and a proxy on a closed local port, so even a report that asked
for a remote file would send nothing off this machine; its NetLog records what it asked for.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trainspeed.cli import main

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
pytestmark = [pytest.mark.browser, pytest.mark.skipif(BROWSER is None, reason="no Chromium installed")]

EVIL = "<script>window.evil=1</script>"
QUIET = ("--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
         "--disable-domain-reliability", "--disable-client-side-phishing-detection", "--no-default-browser-check")
"""Chromium's own requests (updates, time, safe browsing) turned off: what the NetLog holds is the page's."""


def render(page: Path, folder: Path) -> tuple[Path, str, list[str]]:
    """Load `page` in headless Chromium: (its screenshot, its console lines, the non-local URLs it asked for)."""
    shot, netlog = folder / "screenshot.png", folder / "netlog.json"
    cmd = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           "--window-size=1100,1500", *QUIET, "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
           "--enable-logging=stderr", "--v=0", f"--log-net-log={netlog}", f"--user-data-dir={folder / 'profile'}",
           f"--screenshot={shot}", page.as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    events = json.loads(netlog.read_text()).get("events", []) if netlog.exists() else []
    # the page's requests have the page as initiator ("null" for a file:// page); Chromium's own ("not an origin")
    # are its services', turned off as far as flags go and sent nowhere by the resolver rule above
    urls = {e["params"]["url"] for e in events
            if "url" in e.get("params", {}) and e["params"].get("initiator", "not an origin") != "not an origin"}
    remote = sorted(u for u in urls if not u.startswith(("file:", "data:")))
    assert shot.exists(), done.stderr[-2000:]
    return shot, "\n".join(console), remote


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The doctor's report.html on a planted example (logging every step), run from a folder whose name and
    whose script's lines hold HTML."""
    folder = tmp_path_factory.mktemp("report")
    script_dir = folder / "runs <b>bold & co"
    script_dir.mkdir()
    source = Path(__file__).resolve().parents[2] / "examples" / "log_every_step.py"
    script = script_dir / "train.py"
    text = source.read_text().replace('"step": step,', f'"step": step, "tag": "{EVIL}",', 1)
    assert EVIL in text
    script.write_text(text)
    argv = sys.argv
    try:
        sys.argv = argv[:1]
        assert main(["doctor", "--html", str(folder / "report.html"), "--json", str(folder / "report.json"), str(script),
                     "--steps", "1500"]) == 0  # long enough that a moment of load does not decide the verdicts
    finally:
        sys.argv = argv
    return folder / "report.html"


def test_the_report_loads_with_no_console_message_and_no_network_request(report: Path, tmp_path: Path) -> None:
    shot, console, remote = render(report, tmp_path)
    assert console == "" and remote == []
    assert shot.stat().st_size > 10_000  # a page was drawn, not a blank
    keep = os.environ.get("TRAINSPEED_REPORT_SCREENSHOT")  # where to keep it (docs/images/report.png is one)
    if keep:
        shutil.copyfile(shot, keep)


def test_the_report_holds_the_verdicts_first_then_the_phases_and_the_plots(report: Path) -> None:
    html = report.read_text()
    # the run's first verdict: logging_heavy alone; beside busy processes the load's verdict may come first, or alone
    first = json.loads(report.with_name("report.json").read_text())["verdicts"][0]["id"]
    order = [html.index(s) for s in ("<h2>Verdicts", first, "<h2>Where a step's time goes",
                                     'alt="per-step phases"', 'alt="step-time histogram"')]
    assert order == sorted(order)
    assert "http://" not in html and "https://" not in html and "<link" not in html


def test_the_users_strings_are_escaped(report: Path) -> None:
    html = report.read_text()
    assert EVIL not in html and "<b>bold" not in html
    assert "&lt;b&gt;bold &amp; co" in html  # the script's folder, in its path
    assert "&lt;script&gt;window.evil=1&lt;/script&gt;" in html  # the logging line, in the evidence


def test_the_checks_catch_a_console_message_and_a_remote_request(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text(textwrap.dedent("""\
        <!doctype html><html><body><p>bad</p>
        <script>console.error("from the page")</script>
        <img src="http://trainspeed-test.invalid/x.png">
        </body></html>"""))
    _, console, remote = render(page, tmp_path)
    assert "from the page" in console and remote == ["http://trainspeed-test.invalid/x.png"]


def test_a_gpu_runs_report_holds_its_utilisation_timeline(tmp_path: Path) -> None:
    # a CPU run's report given the NVML samples of a GPU that idles between bursts (recorded measurements: no
    # GPU here), as the doctor records them on CUDA
    import dataclasses

    import torch
    from torch import nn

    import trainspeed
    from trainspeed.report.html import doctor_html
    from trainspeed.watch.result import GpuUtil

    model = nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with trainspeed.watch(warmup=1, profile_steps=0) as w:
        for _ in range(50):
            optimizer.zero_grad()
            model(torch.randn(16, 8)).sum().backward()
            optimizer.step()
    report = w.result()
    timeline = [(i * 0.05, 95.0 if (i // 10) % 2 else 3.0) for i in range(200)]
    util = GpuUtil(True, 49.0, 200, True, "busy 10 samples, idle 10, with the step's rhythm", timeline)
    page = tmp_path / "gpu.html"
    page.write_text(doctor_html(dataclasses.replace(report, watch=dataclasses.replace(report.watch, gpu_util=util))))
    html = page.read_text()
    order = [html.index(s) for s in ("<h2>Verdicts", 'alt="per-step phases"', 'alt="step-time histogram"',
                                     'alt="GPU utilisation"')]
    assert order == sorted(order)
    _, console, remote = render(page, tmp_path)
    assert console == "" and remote == []
