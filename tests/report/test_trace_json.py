"""The Chrome trace-event JSON of a traced run, and `trainspeed doctor --trace`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from trainspeed.cli import main
from trainspeed.report.trace import TRACKS, chrome_trace, trace_events
from trainspeed.watch.result import GpuUtil, ModelFacts, Process, Steps, WatchResult
from trainspeed.watch.trace import Trace, TraceStep, WindowOp

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _trace() -> Trace:
    step = TraceStep(7, 10.000, 10.010, [("data", 10.000, 10.002), ("forward", 10.002, 10.006),
                                         ("sync", 10.006, 10.007), ("backward", 10.007, 10.010)],
                     reads=[("item", "train.py:42", 10.006, 10.007, False), ("__index__", "train.py:30", 10.0, 10.001, True)],
                     device=[("forward", 0.0, 0.003), ("backward", 0.004, 0.008)])
    return Trace([step], [WindowOp("aten::addmm", "host", 9.5, 9.501), WindowOp("gemm_kernel", "device", 9.5005,
                                                                                 9.5008)], "cuda")


def test_each_span_is_a_complete_event_on_its_track_in_microseconds_from_the_first() -> None:
    events = trace_events(_trace(), "run")
    spans = [e for e in events if e["ph"] == "X"]
    names = {e["args"]["name"]: e["tid"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == TRACKS
    by_track = {tid: [e for e in spans if e["tid"] == tid] for tid in TRACKS.values()}
    assert [e["name"] for e in by_track[TRACKS["host phases"]]] == ["data", "forward", "sync", "backward"]
    forward = by_track[TRACKS["host phases"]][1]
    assert forward["ts"] == pytest.approx(502_000.0) and forward["dur"] == pytest.approx(4_000.0)  # from 9.5 s, in us
    step = by_track[TRACKS["steps"]][0]
    assert step["name"] == "step 7" and step["args"]["host_ms"]["forward"] == pytest.approx(4.0)
    read = by_track[TRACKS["host reads"]][0]
    assert read["name"] == "item at train.py:42" and read["args"]["where"] == "train.py:42" and read["cat"] == "sync"
    cpu_read = by_track[TRACKS["host reads"]][1]  # a CPU tensor's: no sync, told apart
    assert cpu_read["cat"] == "host read" and cpu_read["args"]["sync"] is False
    device = by_track[TRACKS["device phases (CUDA events)"]]  # placed from the first device phase's host edge
    assert [(e["name"], e["ts"], e["dur"]) for e in device] == [("forward", pytest.approx(502_000.0), 3_000.0),
                                                               ("backward", pytest.approx(506_000.0), 4_000.0)]
    assert by_track[TRACKS["profiler window: host ops"]][0]["ts"] == 0.0
    assert by_track[TRACKS["profiler window: device kernels"]][0]["name"] == "gemm_kernel"
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in spans)


def test_a_run_watched_without_trace_has_none_to_render() -> None:
    r = WatchResult(Steps(seen=0, measured=0, median_ms=None, p90_ms=None), phases={},
                    model=ModelFacts(device="cpu", batch_size=None), process=Process(torch_threads=1),
                    gpu_util=GpuUtil(False, None, 0, False))
    with pytest.raises(ValueError, match="trace=True"):
        chrome_trace(r)


def test_doctor_writes_the_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", sys.argv[:1])
    out = tmp_path / "trace.json"
    assert main(["doctor", "--trace", str(out), str(EXAMPLES / "seed_iris.py"), "--epochs", "2000"]) == 0
    data = json.loads(out.read_text())
    assert data["otherData"]["schema"] == "trainspeed.trace/1" and 0 < data["otherData"]["steps"] <= 400
    spans = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in spans if e["tid"] == TRACKS["host phases"]} >= {"forward", "backward", "optimizer"}
    assert any(e["tid"] == TRACKS["host reads"] and "seed_iris.py:" in e["name"] for e in spans)
    assert out.stat().st_size < 5_000_000
    capsys.readouterr()
    assert main(["doctor", "--trace", str(tmp_path / "no" / "t.json"), str(EXAMPLES / "seed_iris.py")]) == 2
    assert "does not exist" in capsys.readouterr().err
