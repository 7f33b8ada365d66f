"""The CPU's op/FLOP window: dispatch modes, no torch.profiler."""

from __future__ import annotations

import pytest
import torch

from trainspeed.watch import Watcher
from trainspeed.watch.profile_window import ProfileWindow, busy_ns


def test_cpu_window_counts_per_step_without_the_profiler() -> None:
    window = ProfileWindow(steps=2)
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    profiled = []
    for index in range(5):  # warm-up 1: steps 1 and 2 are counted
        (a @ b).sum()
        profiled.append(window.on_step_end(index, opens_at=1, cuda=False))
    assert profiled == [False, True, True, False, False]
    assert window.part().ops_per_step == 2 and window.part().kernels_per_step is None
    assert window.part().flops_per_step == 2 * 8 * 16 * 4


def test_gpu_busy_time_counts_overlapping_work_once() -> None:
    # two streams overlapping 5-8, a gap 12-20, a kernel inside another
    assert busy_ns([(20, 30), (0, 8), (5, 12), (22, 25)]) == 22
    assert busy_ns([]) == 0
    assert busy_ns([(3, 4), (4, 6)]) == 3


def test_the_profiler_stops_with_cupti_detached_and_the_environment_is_put_back(monkeypatch) -> None:
    import os

    from trainspeed.watch.profile_window import cupti_detached

    monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    with cupti_detached():
        assert os.environ["TEARDOWN_CUPTI"] == "1"
    assert "TEARDOWN_CUPTI" not in os.environ
    monkeypatch.setattr(torch.version, "cuda", "12.4")  # CUPTI's teardown could crash CUDA graphs there
    with cupti_detached():
        assert "TEARDOWN_CUPTI" not in os.environ
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setenv("TEARDOWN_CUPTI", "0")  # the user's own setting wins
    with cupti_detached():
        assert os.environ["TEARDOWN_CUPTI"] == "0"
    assert os.environ["TEARDOWN_CUPTI"] == "0"


def test_the_profiler_window_counts_flops_once_with_the_op_counter_inside() -> None:
    # the CUDA window (torch.profiler) run on the CPU: the op counter inside it makes the profiler
    # record every op twice, the second inside the first; FLOPs and ops are still counted once
    model, x = torch.nn.Linear(32, 16), torch.randn(64, 32)
    figures = []
    for outside in (None, lambda: True):
        window = ProfileWindow(steps=2, outside=outside)
        for index in range(4):
            model(x).sum().backward()
            window.on_step_end(index, opens_at=1, cuda=True)
        figures.append((window.part().ops_per_step, window.part().flops_per_step, window.part().other_ops_per_step))
    (ops, flops, none), (ops_counted, flops_counted, outside_ops) = figures
    assert flops == flops_counted == 2 * (2 * 64 * 32 * 16)  # forward's addmm, backward's weight-grad mm
    assert ops == ops_counted and none is None and outside_ops and outside_ops >= ops


def test_cpu_window_times_each_op_by_dtype_with_its_flops() -> None:
    # ops timed by their wall time, as on a quiet machine: a wait for a core that covered one of these microsecond ops
    # (a neighbour's slice on a CI machine) took its least call to 0 ms (the waits' reading: tests/watch/test_op_counter.py)
    window = ProfileWindow(steps=2, waits_count=lambda: False)
    a, b = torch.randn(8, 16, dtype=torch.float64), torch.randn(16, 4, dtype=torch.float64)
    c, d = torch.randn(8, 16), torch.randn(16, 4)
    for index in range(4):  # warm-up 1: steps 1 and 2 are counted
        (a @ b).relu()
        (c @ d).relu()
        window.on_step_end(index, opens_at=1, cuda=False)
    rows = {(row.op, row.dtype): row for row in window.part().op_times or []}
    assert set(rows) == {("aten.mm", "float64"), ("aten.mm", "float32"), ("aten.relu", "float64"),
                         ("aten.relu", "float32")}
    assert all(row.calls == 1 and row.ms > 0 for row in rows.values())
    assert rows["aten.mm", "float64"].arithmetic and not rows["aten.relu", "float64"].arithmetic
    # mm ran in two dtypes: FlopCounterMode counts by op, so neither gets a share it cannot prove
    assert rows["aten.mm", "float64"].flops is None and rows["aten.relu", "float32"].flops is None
    ms = [row.ms for row in window.part().op_times or []]
    assert ms == sorted(ms, reverse=True)
    assert window.part().op_ms_per_step == sum(ms)


def test_the_window_keeps_each_steps_ops_apart() -> None:
    window = ProfileWindow(steps=3, outside=lambda: True)
    a = torch.randn(8, 8)
    counters = []
    for index in range(5):  # warm-up 1: steps 1, 2 and 3 are counted; step 2 runs relu twice
        for _ in range(2 if index == 2 else 1):
            a.relu()
        counters.append(window.counter)
        window.on_step_end(index, opens_at=1, cuda=False)
    counter = counters[1]
    assert counter is not None and counter.by_op == {}
    assert [sum(calls for calls, _ in table.values()) for table in counter.steps_by_op] == [1, 2, 1]
    assert [ops for ops, _ in counter.outside_steps] == [1, 2, 1]
    assert window.part().other_ops_per_step == pytest.approx(4 / 3)
    assert window.part().other_op_ms_per_step == pytest.approx(4 / 3 * 1e3 * min(s / n for n, s in counter.outside_steps))


def test_after_torch_compile_the_window_is_torch_profiler_alone(monkeypatch) -> None:
    """A TorchDispatchMode sends compiled code back to eager for the steps it is active in: no op or FLOP
    mode once torch.compile has compiled a graph, only torch.profiler, which does not change what runs."""
    from torch._dynamo.utils import counters

    from trainspeed.watch import profile_window

    monkeypatch.setitem(counters["stats"], "unique_graphs", 0)
    assert not profile_window.compiled_code_seen()
    window = ProfileWindow(1, outside=lambda: True)
    window._open(False, 1)
    assert isinstance(window.prof, tuple)  # the CPU's op and FLOP modes
    window.close()
    monkeypatch.setitem(counters["stats"], "unique_graphs", 1)
    assert profile_window.compiled_code_seen()
    window = ProfileWindow(1, outside=lambda: True)
    window._open(False, 1)
    try:
        assert window.prof is not None and not isinstance(window.prof, tuple) and window.counter is None
        assert any("torch.profiler alone" in n for n in window.notes)
        torch.mm(torch.randn(8, 8), torch.randn(8, 8))
    finally:
        window._close(1)
    assert window.part().ops_per_step is not None and window.part().ops_per_step >= 1 and window.part().op_times is None


def test_the_window_gives_each_phase_its_ops_and_how_long_a_call_of_each_takes() -> None:
    """Each timed op's calls go to the phase the watcher had open (`other` outside every phase); a phase's op lengths
    are its ops' least call, weighted by their calls there times that (`op_lengths`)."""
    phase: list[str | None] = [None]
    window = ProfileWindow(steps=2, phase=lambda: phase[0])
    big, small = torch.randn(256, 256), torch.randn(4, 4)
    for index in range(4):  # warm-up 1: steps 1 and 2 are counted
        phase[0] = "forward"
        big @ big
        phase[0] = "optimizer"
        small.add_(1.0)
        small.add_(1.0)
        phase[0] = None
        small.relu()
        window.on_step_end(index, opens_at=1, cuda=False)
    lengths = window.op_lengths
    assert set(lengths) == {"forward", "optimizer", "other"}
    (share, seconds), = lengths["forward"]
    assert share == pytest.approx(1.0) and seconds > 0
    counter = window.counter
    assert counter is None  # closed: its figures are the window's
    (share, adds), = lengths["optimizer"]  # two calls a step: the least one
    assert share == pytest.approx(1.0) and 0.0 < adds < seconds


def test_the_loops_time_holds_the_windows_steps_as_median_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The profiler window's opening (torch.profiler's start: a second or more on CUDA) and its slower steps are the
    watcher's: the loop's time a user checks against the script holds each window step as a median step."""
    import time

    from watched_loops import tiny_step

    opening = ProfileWindow._open

    def slow_open(self: ProfileWindow, cuda: bool, first: int) -> None:
        time.sleep(0.5)  # as torch.profiler's start may take
        opening(self, cuda, first)

    monkeypatch.setattr(ProfileWindow, "_open", slow_open)
    model, opt, x = tiny_step()
    with Watcher(warmup=2, profile_steps=3) as w:
        for _ in range(20):
            time.sleep(0.01)
            loss = model(x).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    r = w.measurements()
    window_s, window_steps = w.window.span
    assert window_steps == 3 and window_s >= 0.5
    assert r.steps.median_ms is not None and r.steps.loop_s is not None
    assert r.steps.loop_s < 20 * r.steps.median_ms / 1e3 + 0.25  # without the window's half second


def _lbfgs_run(monkeypatch: pytest.MonkeyPatch, pass_ops: int) -> Watcher:
    """An LBFGS step over a cell loop, the step's first pass after a prediction under no_grad (the script's work
    between steps), with a window of one step whose counter stops after `pass_ops` ops of passes."""
    import trainspeed.watch.profile_window as window

    monkeypatch.setattr(window, "PASS_OPS", pass_ops)
    torch.manual_seed(0)
    cell, head = torch.nn.LSTMCell(1, 8), torch.nn.Linear(8, 1)
    model = torch.nn.ModuleList([cell, head])
    x, y = torch.randn(12, 4, 1), torch.randn(12, 4, 1)

    def forward(inp: torch.Tensor) -> torch.Tensor:
        h = c = torch.zeros(4, 8)
        outs = []
        for t in range(inp.shape[0]):
            h, c = cell(inp[t], (h, c))
            outs.append(head(h))
        return torch.stack(outs)

    model.forward = forward  # type: ignore[method-assign]
    opt = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=6, tolerance_grad=0.0, tolerance_change=0.0)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    with Watcher(warmup=1, profile_steps=1) as w:
        for _ in range(4):
            with torch.no_grad():
                model(x)
            opt.step(closure)
    return w


def test_a_long_steps_passes_are_counted_in_part_and_scaled_to_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """A window of one step stops counting at a pass of the model once the passes before it counted PASS_OPS ops:
    an LBFGS step's six closure passes, one counted, give the counts of all six counted within 5% (what the step
    ran before its first pass counted once; LBFGS's own work after each pass grows with its history, 3% here, 0.15%
    on examples/realistic/sine_lbfgs.py), and the report says so."""
    whole = _lbfgs_run(monkeypatch, 10**9)
    cut = _lbfgs_run(monkeypatch, 1)
    assert whole.window.cut is None and cut.window.cut == 1 and cut.window.passes == whole.window.passes == 6
    a, b = whole.measurements().window, cut.measurements().window
    assert a.ops_per_step and b.ops_per_step
    assert abs(b.ops_per_step / a.ops_per_step - 1) < 0.05, (a.ops_per_step, b.ops_per_step)
    assert a.flops_per_step and b.flops_per_step and abs(b.flops_per_step / a.flops_per_step - 1) < 0.05
    calls = {(o.op, o.dtype): o.calls for o in a.op_times or []}  # the passes' products (LBFGS's updates grow)
    assert all(abs(o.calls - calls[(o.op, o.dtype)]) <= 0.05 * calls[(o.op, o.dtype)] + 1e-9
               for o in b.op_times or [] if o.arithmetic)
    assert any("counted the first 1 of its step's 6 passes" in n for n in cut.measurements().notes)


def test_the_window_reads_the_threads_waits_only_where_it_is_told_they_count(monkeypatch) -> None:
    import trainspeed.watch.profile_window as window_module

    opened: list[bool] = []
    real = window_module.threads_wait
    monkeypatch.setattr(window_module, "threads_wait", lambda: opened.append(True) or real())
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    for counts in (False, True):
        window = ProfileWindow(steps=1, waits_count=lambda counts=counts: counts)
        for index in range(3):
            (a @ b).sum()
            window.on_step_end(index, opens_at=1, cuda=False)
        assert window.part().ops_per_step == 2 and window.part().op_times
    assert opened == [True]
