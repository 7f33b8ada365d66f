"""The doctor's short screen: five lines a verdict at 80 columns, the load said once, the phases that took time."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from recorded_runs import CTX, recorded, with_load
from rich.console import Console

from trainspeed.diagnose.report import DoctorReport, judge
from trainspeed.diagnose.tried import TriedLever
from trainspeed.diagnose.verdict import Lever, Verdict
from trainspeed.hardware.cpu import CpuInfo
from trainspeed.hardware.gpu import GpuScan
from trainspeed.hardware.report import HardwareReport
from trainspeed.report.doctor_brief import brief_view, load_line, phase_table, site_words, verdict_lines
from trainspeed.watch.result import RunWindow

SAVES = Verdict("checkpoint_heavy", "saving checkpoints took 12.00 ms of a 20.00 ms step (60% of the run's time)",
                "save every 12 steps (6 checkpoints in this run's 69 steps instead of 69), or hand the state_dict "
                "copy to a background thread", 2.14, title="Saving a checkpoint every step",
                brief="saving checkpoints takes 60% of the run, 69 checkpoints in 69 steps",
                fix="if step % 12 == 0: torch.save(...)", site="train.py:40")


MACHINE = HardwareReport(
    cpu=CpuInfo(model="a 2-core CPU (recorded)", vendor="AMD", microarchitecture="Zen 4", microarchitecture_source="cpuid",
                physical_cores=2, logical_threads=2, features=["AVX2"], ram_total_bytes=8 * 2**30,
                ram_available_bytes=6 * 2**30, torch_threads=2),
    gpu=GpuScan(gpus=[], cuda_available=False, nvml_available=False, note="no NVIDIA driver found"),
    torch_version="2.13.0+cpu", python_version="3.11.9", os="Linux-6.1")


def _text(renderable: object, width: int = 80) -> list[str]:
    console = Console(width=width, record=True, color_system=None, force_terminal=False)
    console.print(renderable)
    return [line.rstrip() for line in console.export_text().splitlines()]


def test_a_verdict_is_its_title_gain_evidence_and_fix() -> None:
    lines = verdict_lines(SAVES, 1, whole=1.61)
    assert lines == ["1. Saving a checkpoint every step [checkpoint_heavy]",
                     "   predicted 2.14x on the training loop, 1.61x on the whole script",
                     "   saving checkpoints takes 60% of the run, 69 checkpoints in 69 steps",
                     "   fix at train.py:40: if step % 12 == 0: torch.save(...)"]


def test_what_try_measured_goes_beside_the_prediction() -> None:
    lever = Lever("threads", {"threads": 1}, "torch.set_num_threads(1)", same_arithmetic=False)
    v = dataclasses.replace(SAVES, lever=lever)
    row = TriedLever(v.id, lever, 2.14, 1.92, (1.71, 2.16), [1.0, 1.1], [0.5, 0.6])
    assert verdict_lines(v, 1, whole=1.61, tried=row)[1] == \
        "   predicted 2.14x on the training loop; --try measured 1.92x [1.71, 2.16]"
    failed = dataclasses.replace(row, failed="failed: RuntimeError: boom")
    assert "failed" in verdict_lines(v, 1, tried=failed)[1]
    # a capped prediction beside --try's figure keeps to one line, as "at most" does (CI, 2026-12-02: page_faults'
    # "predicted at least 10x on the training loop; --try measured 10.25x [8.75, 12.50]" took two)
    capped = dataclasses.replace(v, predicted_speedup=10.0)
    assert verdict_lines(capped, 10, whole=9.99, tried=row)[1] == \
        "   predicted at least 10x; --try measured 1.92x [1.71, 2.16]"


def test_a_verdict_without_a_prediction_says_so_in_its_title_and_why() -> None:
    v = Verdict("memory_pressure", "peak 75.1 GiB of 79.6 GiB GPU memory (94%)", "the largest batch that fits is 48",
                None, title="Memory nearly full", brief="peak 75.1 of 79.6 GiB GPU memory (94%)", fix="batch_size=48",
                unpredicted="memory is a limit, not a cost: it bounds the batch")
    lines = verdict_lines(v, 2)
    assert lines[0] == "2. Memory nearly full (no prediction) [memory_pressure]"
    assert lines[1] == "   no prediction: memory is a limit, not a cost: it bounds the batch"


def test_long_words_wrap_between_words_and_keep_the_indent() -> None:
    v = dataclasses.replace(SAVES, fix="MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296 in the "
                                       "environment", site=None)
    lines = verdict_lines(v, 1)
    assert len(lines) == 5 and all(len(line) <= 80 for line in lines)
    assert lines[3].startswith("   fix: MALLOC_MMAP_THRESHOLD_=33554432") and lines[4] == "   environment"


def test_a_site_under_the_working_folder_is_named_from_it(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    assert site_words(f"{tmp_path}/sub/train.py:42") == f"sub{os.sep}train.py:42"
    assert site_words("/elsewhere/train.py:42") == "/elsewhere/train.py:42"
    assert site_words("train.py:42") == "train.py:42"


def test_the_phase_table_leaves_out_the_phases_the_run_never_entered() -> None:
    r = recorded(2.0, {"forward": 0.8, "backward": 0.9})
    rows = [line.split()[0] for line in _text(phase_table(r)) if line.strip() and line.split()[0].isalpha()]
    assert rows == ["phase", "forward", "backward", "other"]


def test_the_machines_load_is_said_once_at_the_top_and_the_table_shows_what_is_judged() -> None:
    r = with_load(recorded(20.0, {"forward": 8.0, "backward": 10.0}), {"forward": 4.0, "backward": 5.0},
                  others_cpu_cores=1.0)
    report = judge(r, CTX, MACHINE)
    line = load_line(report)
    assert line is not None and line.startswith(f"Other processes kept 1.0 of this machine's {CTX.logical_threads} CPUs")
    assert "without their waits" in line
    screen = _text(brief_view(report))
    assert screen[1] == line[:len(screen[1])] and sum("Other processes kept" in s for s in screen) == 1
    header = next(s for s in screen if s.lstrip().startswith("phase"))
    assert "without waits" in header
    quiet = judge(recorded(20.0, {"forward": 8.0, "backward": 10.0}), CTX, MACHINE)
    assert load_line(quiet) is None and "without waits" not in "\n".join(_text(brief_view(quiet)))


def test_a_verdicts_share_is_the_one_the_table_shows_beside_it() -> None:
    """One basis: on a busy machine the verdicts judge the phases without their waits, and the phase table shows
    that share beside the measured one; a share a verdict gives is the table's."""
    import re

    r = with_load(recorded(20.0, {"data": 10.0, "forward": 4.0, "backward": 5.0}), {"forward": 3.0, "backward": 4.0},
                  others_cpu_cores=1.0)
    report = judge(r, CTX, MACHINE)
    screen = _text(brief_view(report))
    row = next(s.split() for s in screen if s.split()[:1] == ["data"])
    measured, judged = row[2], row[3]
    brief = next(v.brief for v in report.verdicts if v.id == "input_bound")
    said = re.search(r"(\d+)% of the run", brief)
    assert said is not None and int(said.group(1)) == round(float(judged.rstrip("%"))) and measured != judged, \
        (brief, row)


def _windowed(window: RunWindow | None, saves: int = 0) -> DoctorReport:
    r = recorded(20.0, {"forward": 8.0, "backward": 10.0, "optimizer": 2.0})
    r = dataclasses.replace(r, run_window=window,
                            checkpoints=dataclasses.replace(r.checkpoints, saves=saves, calls=saves))
    return dataclasses.replace(judge(r, CTX, MACHINE), script="train.py")


def test_a_windows_report_says_which_steps_it_holds_and_what_it_could_not_see() -> None:
    closed = _windowed(RunWindow("50:150", 50, 150, held_s=1.234))
    lines = _text(brief_view(closed))
    assert lines[1:3] == ["Watched steps 50 to 150 of a run that went on; the report held it 1.23 s.",
                          "Not seen in the window: evaluations or saves less often than every 100 steps."]
    saved = _windowed(RunWindow("50:150", 50, 150, held_s=0.5), saves=4)
    assert "Not seen in the window: evaluations less often than every 100 steps." in _text(brief_view(saved))
    inside = _windowed(RunWindow("100:400", 100, None, ended_at=150))
    assert _text(brief_view(inside))[1] == \
        "The run ended at step 150, inside the window 100:400 (steps 100 to 150 here)."
    assert "Watched" not in " ".join(_text(brief_view(_windowed(None))))


def test_the_probes_time_after_the_run_is_said_from_a_second() -> None:
    report = _windowed(None)
    assert not any("probes of this machine" in line for line in _text(brief_view(report)))
    slow = dataclasses.replace(report, probes_s=12.34)
    assert "The doctor's probes of this machine took 12.3 s after the run." in _text(brief_view(slow))
    quick = dataclasses.replace(report, probes_s=0.4)
    assert not any("probes of this machine" in line for line in _text(brief_view(quick)))
