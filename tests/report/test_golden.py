"""The views of three recorded runs against checked-in files: a change of the text, JSON or HTML output is a visible
diff in review (as torchinfo tests its summaries).

Each run is a recorded WatchResult judged with a fixed Context on a fixed machine (`diagnose.report.judge`, which
measures nothing), so the expected files hold exactly what the renderers make of it. The HTML's plots are PNGs whose
bytes depend on matplotlib's release: they are compared as a placeholder; the rest of the page is compared as it is.

After an intended change of output: `TRAINSPEED_GOLDEN=write python -m pytest tests/report/test_golden.py`, then
review the diff of tests/report/golden/.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

import pytest
from recorded_runs import recorded
from rich.console import Console

from trainspeed.diagnose.report import DoctorReport, judge
from trainspeed.diagnose.rules import Context
from trainspeed.diagnose.tried import LossCheck, NotTried, Tried, TriedLever
from trainspeed.fix.result import Hunk, Patch, Skipped
from trainspeed.hardware.cpu import CpuInfo
from trainspeed.hardware.gpu import GpuScan
from trainspeed.hardware.report import HardwareReport
from trainspeed.report.doctor_brief import brief_view
from trainspeed.report.doctor_text import doctor_view
from trainspeed.report.html import doctor_html
from trainspeed.report.json import doctor_dict, dumps
from trainspeed.watch.phases import PHASES
from trainspeed.watch.result import Evaluation, GpuUtil, LoaderInfo, OptimizerInfo, StepRecord, WatchResult
from trainspeed.watch.sites import DataSite, OtherSite, SyncSite

GOLDEN = Path(__file__).resolve().parent / "golden"

MACHINE = HardwareReport(
    cpu=CpuInfo(model="AMD EPYC 9R14 (recorded)", vendor="AMD", microarchitecture="Zen 4",
                microarchitecture_source="cpuid", physical_cores=8, logical_threads=16,
                features=["AVX2", "AVX-512", "AVX512-BF16"], ram_total_bytes=64 * 2**30,
                ram_available_bytes=48 * 2**30, torch_threads=8, family=25, model_number=17, stepping=1),
    gpu=GpuScan(gpus=[], cuda_available=False, nvml_available=False, note="no NVIDIA driver found"),
    torch_version="2.13.0+cpu", python_version="3.11.9", os="Linux-6.1")

CTX = Context(dispatch_us=2.0, matmul_gflops=300.0, physical_cores=8, logical_threads=16, usable_cores=16)


def _steps(step_ms: float, host: dict[str, float], n: int = 40) -> tuple[list[StepRecord], list[float]]:
    """Per-step records for the plots: the recorded medians, every tenth step 20% slower."""
    records = []
    for i in range(n):
        slow = 1.2 if i % 10 == 9 else 1.0
        phases = dict.fromkeys(PHASES, 0.0) | {p: ms * slow / 1e3 for p, ms in host.items()}
        phases["other"] = step_ms * slow / 1e3 - sum(phases.values())
        records.append(StepRecord(i + 6, step_ms * slow / 1e3, phases, 0, 0))
    return records, [r.wall_s * 1e3 for r in records]


def seed_loop() -> WatchResult:
    """The seed's Iris MLP on the CPU: a 0.26 ms step whose loss is read every step."""
    host = {"forward": 0.07, "backward": 0.09, "optimizer": 0.05}
    records, times = _steps(0.26, host)
    r = recorded(0.26, host, ops=42, flops=9.6e4, batch=120, threads=8, syncs=0.0)
    return dataclasses.replace(r, steps=dataclasses.replace(r.steps, samples=records, times_ms=times,
                                                            host_reads_per_step=1.0), reads=dataclasses.replace(r.reads, host_read_sites=[SyncSite("iris_seed.py:41", "item", 94, 0.6, "losses.append(loss.item())")]), optimizers=dataclasses.replace(r.optimizers, info=OptimizerInfo("SGD", 4, 2953, None, None)), sites=dataclasses.replace(r.sites, other=[OtherSite("iris_seed.py:38", "loss = criterion(model(x), y)", 31, 0.62)]))


def loader_cuda() -> WatchResult:
    """A CNN on a GPU fed by a DataLoader without workers that decodes images in `__getitem__`."""
    host = {"data": 30.0, "h2d": 1.2, "forward": 2.1, "backward": 3.9, "optimizer": 0.8}
    device = {"h2d": 1.1, "forward": 2.0, "backward": 3.8, "optimizer": 0.7}
    records, times = _steps(40.0, host)
    loader = LoaderInfo(num_workers=0, pin_memory=False, batch_size=64, persistent_workers=False,
                        dataset="ImageFolder", item_by_item=True, batches=94)
    r = recorded(40.0, host, device, dev="cuda", ops=310, kernels=260, flops=4.1e10, batch=64, loaders=[loader],
                 util=GpuUtil(True, 21.0, 180, True, "busy 8 ms of every 40 ms step"), h2d=64 * 3 * 224 * 224 * 4.0,
                 busy=7.9, peak=3 * 2**30, capacity=80 * 2**30)
    sites = [DataSite("dataset.py:27", "image = Image.open(path).convert('RGB')", 61, 0.55, inside="PIL"),
             DataSite("dataset.py:28", "image = self.transform(image)", 38, 0.35, inside="torchvision")]
    return dataclasses.replace(r, steps=dataclasses.replace(r.steps, samples=records, times_ms=times),
                               sites=dataclasses.replace(r.sites, data=sites), optimizers=dataclasses.replace(r.optimizers, info=OptimizerInfo("AdamW", 62, 11_200_000, None, None)))


def evaluating_run() -> WatchResult:
    """A CPU run that validates every 20 steps and saves a checkpoint every 50."""
    host = {"data": 1.0, "forward": 9.0, "backward": 14.0, "optimizer": 3.0, "checkpoint": 0.0}
    records, times = _steps(30.0, host)
    r = recorded(30.0, host, ops=900, flops=3.0e9, batch=32, threads=8,
                 shares={"data": 0.025, "forward": 0.22, "backward": 0.34, "optimizer": 0.07, "checkpoint": 0.05})
    ev = Evaluation(count=4, mean_ms=240.0, share=0.22, every_steps=20.0, by="model.eval()", in_run=5)
    return dataclasses.replace(r, evaluation=ev, steps=dataclasses.replace(r.steps, samples=records, times_ms=times,
                                                                           mean_ms=38.5), checkpoints=dataclasses.replace(r.checkpoints, saves=2, calls=2, every_steps=50.0), optimizers=dataclasses.replace(r.optimizers, info=OptimizerInfo("Adam", 12, 410_000, None, None)))


RUNS = {"seed_loop": seed_loop, "loader_cuda": loader_cuda, "evaluating_run": evaluating_run}


def _tried(report: DoctorReport) -> Tried:
    """What `doctor --try 2 --rounds 3 --steps 200` might have measured of the loader run's first lever: each plain
    run against one with the workers, the same losses; and the edit ranked before the next lever."""
    first = report.verdicts[0]
    assert first.lever is not None
    row = TriedLever(first.id, first.lever, first.predicted_speedup, 2.61, (2.32, 2.94), [8.1, 8.3, 8.0],
                     [3.1, 3.2, 3.05], LossCheck(200, True, 0.0, True, (200, 200)), after="compute_bound",
                     folder="runs/doctor-20261127-120000/tried/1-input_bound")
    edits = [NotTried("h2d_bound", "keep a dataset that fits on the device there once"),
             NotTried("sync_bound", "read the loss every N steps", "train.py:42")]
    return Tried([row], edits, 3, 200, 71.4)


TRIED = {"loader_cuda": _tried}
"""The runs whose report also holds what `doctor --try` measured."""


def _patch(report: DoctorReport) -> Patch:
    """What `doctor --fix` might have written of the loader run: the DataLoader's workers, and the read it did not
    edit (a diff line with `<` in it, which the HTML view escapes)."""
    diff = ("--- a/train.py\n+++ b/train.py\n@@ -3,1 +3,1 @@\n-loader = DataLoader(data, batch_size=64)\n"
            "+loader = DataLoader(data, batch_size=64, num_workers=2)  # <workers>\n")
    return Patch("train.py", "train.py", [Hunk(report.verdicts[0].id, (3, 3), "the DataLoader made with num_workers=2",
                                              True, None, "")],
                 [Skipped("sync_bound", "line 42 sets total, which the script reads after it")], diff,
                 written="runs/doctor-20261127-120000/trainspeed.patch")


def _report(name: str) -> DoctorReport:
    report = dataclasses.replace(judge(RUNS[name](), CTX, MACHINE), script=f"{name}.py", exit_code=0)
    return dataclasses.replace(report, tried=TRIED[name](report), patch=_patch(report)) if name in TRIED else report


def _printed(renderable: object, width: int) -> str:
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    console.print(renderable)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"


def _text(report: DoctorReport) -> str:
    """The short screen, at a CI log's 80 columns."""
    return _printed(brief_view(report), 80)


def _verbose(report: DoctorReport) -> str:
    """`--verbose`: every figure, at 120 columns."""
    return _printed(doctor_view(report), 120)


def _json(report: DoctorReport) -> str:
    return dumps(doctor_dict(report)) + "\n"


def _html(report: DoctorReport) -> str:
    return re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "data:image/png;base64,(plot)", doctor_html(report))


VIEWS = {"txt": _text, "verbose.txt": _verbose, "json": _json, "html": _html}


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_view_is_the_checked_in_one(name: str, view: str) -> None:
    made = VIEWS[view](_report(name))
    path = GOLDEN / f"{name}.{view}"
    if os.environ.get("TRAINSPEED_GOLDEN") == "write":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(made)
    assert path.exists(), f"{path} is missing: run with TRAINSPEED_GOLDEN=write and review it"
    assert made == path.read_text(), f"{name}'s {view} view changed: compare with {path}"


def _compare_text(width: int) -> str:
    """`trainspeed compare` of the seed loop against itself 10% slower, as a CI log shows it at `width` columns."""
    from trainspeed.diagnose.compare import compare
    from trainspeed.report.text import compare_view

    fast = _report("seed_loop")
    slow_run = dataclasses.replace(fast.watch, steps=dataclasses.replace(fast.watch.steps,
                                                                         times_ms=[t * 1.1 for t in fast.watch.steps.times_ms], median_ms=(fast.watch.steps.median_ms or 0) * 1.1))
    a = json.loads(_json(fast))
    b = json.loads(_json(dataclasses.replace(fast, watch=slow_run)))
    c = dataclasses.replace(compare(a, b, "before", "after"), a_path="runs/2026-11-27/before/doctor.json",
                            b_path="runs/2026-11-27/after/doctor.json")
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    console.print(compare_view(c))
    return "\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n"


@pytest.mark.parametrize("width", [80, 120])
def test_the_compare_view_at_a_ci_logs_width(width: int) -> None:
    made = _compare_text(width)
    assert max(len(line) for line in made.splitlines()) <= width  # each interval on one line, nothing cut
    table = [line for line in made.splitlines() if line.startswith((" step", " forward"))]
    assert len(table) == 2 and all(len(line) <= 80 for line in table)  # the table fits a CI log's 80 columns
    path = GOLDEN / f"compare_{width}.txt"
    if os.environ.get("TRAINSPEED_GOLDEN") == "write":
        path.write_text(made)
    assert made == path.read_text(), f"the compare view at {width} columns changed: compare with {path}"


def test_the_runs_are_judged_as_recorded() -> None:
    # the three runs differ where the views must show it: a host-bound tiny step, a data-bound GPU, evaluations
    first = {name: [v.id for v in _report(name).verdicts][:1] for name in RUNS}
    assert first == {"seed_loop": ["launch_bound"], "loader_cuda": ["input_bound"], "evaluating_run": ["evaluation_heavy"]}
    assert json.loads(_json(_report("evaluating_run")))["evaluation"]["count"] == 4


@pytest.mark.parametrize("name", sorted(RUNS))
def test_the_short_screen_fits_80_columns(name: str) -> None:
    assert max(len(line) for line in _text(_report(name)).splitlines()) <= 80
