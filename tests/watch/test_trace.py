"""The timeline a watch keeps with trace=True: its stretches are the phase clock's own, bounded, and watching
with it changes no result."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from watched_loops import as_if_on_cuda, fake_clock_run, fake_cuda_events, seed_loop, tiny_step

import trainspeed
from trainspeed.watch import Watcher, profile_window
from trainspeed.watch.phases import PHASES
from trainspeed.watch.samples import PLOT_STEPS
from trainspeed.watch.trace import TracingClock


def test_the_tracing_clock_notes_what_the_clock_charges_and_skips_the_watchers_own_time() -> None:
    t = [0.0]
    clock = TracingClock(lambda: t[0])
    t[0] = 1.0
    clock.enter("forward")
    t[0] = 3.0
    clock.enter("sync")  # a read inside forward
    t[0] = 3.5
    clock.exit("sync")
    t[0] = 4.0
    clock.exit("forward")
    t[0] = 4.5
    clock.skip()  # the watcher's own work: no phase's, a gap in the timeline
    t[0] = 5.0
    clock.span("sync", 5.2, 5.4)
    t[0] = 6.0
    wall, phases = clock.end_step()
    step = clock.last_step
    assert step is not None and step.segments == [("other", 0.0, 1.0), ("forward", 1.0, 3.0), ("sync", 3.0, 3.5),
                                                  ("forward", 3.5, 4.0), ("other", 4.5, 5.2), ("sync", 5.2, 5.4),
                                                  ("other", 5.4, 6.0)]
    assert (step.start, step.end) == (0.0, 6.0)
    by_phase = {p: sum(b - a for q, a, b in step.segments if q == p) for p in PHASES}
    assert all(by_phase[p] == pytest.approx(phases[p]) for p in PHASES)  # what the plain clock charged
    t[0] = 7.0
    clock.end_step()
    assert clock.last_step is not None and clock.last_step.segments == [("other", 6.0, 7.0)]


def test_a_traced_watch_keeps_the_losses_and_each_kept_steps_timeline() -> None:
    plain = seed_loop(400)
    with trainspeed.watch(trace=True) as w:
        watched = seed_loop(400)
    assert watched == plain
    r = w.measurements()
    assert r.trace is not None and 0 < len(r.trace.steps) <= PLOT_STEPS
    kept = {s.index: s for s in r.steps.samples}
    for step in r.trace.steps:
        assert step.segments and step.start <= step.segments[0][1] and step.segments[-1][2] <= step.end
        assert all(a[2] <= b[1] for a, b in zip(step.segments, step.segments[1:]))  # in order, no overlap
        record = kept[step.index]  # the same step the plots keep, with the same phases
        for phase in ("forward", "backward", "optimizer", "sync"):
            noted = sum(b - a for p, a, b in step.segments if p == phase)
            assert noted == pytest.approx(record.phases[phase], abs=1e-9)
        # loss.item() of a CPU tensor: on the timeline with its line, no sync (no segment of the sync phase)
        assert [(op, site.rsplit(":", 1)[0], host) for op, site, _, _, host in step.reads] == \
            [("item", watched_file(), True)]
    assert {p for s in r.trace.steps for p, *_ in s.segments} >= {"forward", "backward", "optimizer"}
    assert not any(p == "sync" for s in r.trace.steps for p, *_ in s.segments)


def watched_file() -> str:
    import watched_loops

    return watched_loops.__file__


def test_the_trace_is_bounded_by_the_plots_steps_however_long_the_run() -> None:
    clock = [0.0]
    w = Watcher(warmup=1, profile_steps=0, sample_hz=1e-4, now=lambda: clock[0], detail_every=2, trace=True)
    with w:
        fake_clock_run(w, clock, 4000)
    trace = w.measurements().trace
    assert trace is not None and len(trace.steps) == PLOT_STEPS
    assert isinstance(w.clock, TracingClock) and not w.clock.recording and w.clock.segments == []


def test_on_cuda_each_kept_step_gets_its_phases_device_spans(monkeypatch: Any) -> None:
    fake_cuda_events(monkeypatch)
    model, optimizer, x = tiny_step()
    with Watcher(warmup=1, profile_steps=0, trace=True) as w:
        as_if_on_cuda(w)  # as if the model's first input had been on a GPU
        for _ in range(30):
            optimizer.zero_grad()
            model(x).sum().backward()
            optimizer.step()
    trace = w.measurements().trace
    assert trace is not None and trace.steps
    spans = trace.steps[-1].device
    assert {p for p, *_ in spans} >= {"forward", "backward", "optimizer"}
    assert all(t1 == pytest.approx(5e-4) for _, _, t1 in spans)  # the fake events: 0.5 ms apart, each


def test_where_the_window_is_torch_profiler_its_ops_come_along(monkeypatch: Any) -> None:
    monkeypatch.setattr(profile_window, "compiled_code_seen", lambda: True)  # the window then is torch.profiler
    model = nn.Linear(16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with Watcher(warmup=1, profile_steps=2, trace=True) as w:
        for _ in range(20):
            optimizer.zero_grad()
            model(torch.randn(8, 16)).sum().backward()
            optimizer.step()
    trace = w.measurements().trace
    assert trace is not None and trace.ops and {op.track for op in trace.ops} == {"host"}
    assert any("addmm" in op.name for op in trace.ops) and all(op.end >= op.start for op in trace.ops)
    assert trace.steps and trace.ops[0].start < trace.steps[0].start  # the window's steps come before the kept ones


def test_without_trace_the_clock_is_the_plain_one() -> None:
    with Watcher(warmup=1, profile_steps=0) as w:
        seed_loop(20)
    assert type(w.clock).__name__ == "PhaseClock" and w.measurements().trace is None
