"""The watcher on real CPU loops: steps, phases, sync sites, no effect on results, bounded memory."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import watched_loops
from torch import nn
from torch.optim import optimizer as optimizer_module
from torch.utils.data import DataLoader, TensorDataset
from watched_loops import (
    OPTIMIZER,
    TimedSGD,
    as_if_on_cuda,
    fake_clock_run,
    fake_cuda_events,
    seed_loop,
    stamped_cuda_events,
    tiny_step,
)

import trainspeed
from trainspeed.watch import Watcher


def test_watching_does_not_change_the_losses_bit_for_bit() -> None:
    plain = seed_loop(300)
    with trainspeed.watch() as w:
        watched = seed_loop(300)
    assert watched == plain
    assert w.measurements().steps.seen == 300


def _compiled_loop(steps: int) -> list[float]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    compiled = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    losses = []
    for _ in range(steps):
        loss = nn.functional.cross_entropy(compiled(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.mark.skipif(not any(shutil.which(cc) for cc in ("g++", "c++", "clang++")),
                    reason="torch.compile's CPU code needs a C++ compiler")
def test_watching_a_torch_compiled_model_does_not_change_its_losses_bit_for_bit() -> None:
    # the window's op and FLOP modes ran the compiled model eagerly for 3 steps: another rounding, and a
    # compiled MLP's loss differed from step 26 on; the hooks are in before the model is compiled, as under
    # `trainspeed doctor`
    try:
        plain = _compiled_loop(60)
        with Watcher() as w:
            watched = _compiled_loop(60)
    finally:
        torch._dynamo.reset()  # its compiled code is no later test's (conftest zeroes the count of graphs)
    assert watched == plain
    assert any("torch.profiler alone" in note for note in w.measurements().notes)
    assert w.measurements().window.compiled


def test_steps_phases_and_sync_sites() -> None:
    with Watcher(warmup=2, profile_steps=2) as w:
        seed_loop(50)
    r = w.measurements()
    assert r.steps.seen == 50 and r.steps.measured == 46  # warm-up and profiled steps left out
    assert r.model.batch_size == 120 and r.model.device == "cpu" and not r.window.compiled
    # loss.item() of a CPU tensor waits for nothing: a read apart, not a sync, its time in the phase it ran in
    assert r.steps.syncs_per_step == 0 and not r.reads.sync_sites and r.phases["sync"].share == 0 and r.steps.host_reads_per_step == 1.0
    assert r.window.ops_per_step and r.window.ops_per_step > 10 and r.window.flops_per_step and r.window.flops_per_step > 0
    assert sum(p.share for p in r.phases.values()) == __import__("pytest").approx(1.0)
    assert r.phases["forward"].host_ms > 0 and r.phases["backward"].host_ms > 0
    site = r.reads.host_read_sites[0]
    loop_file = watched_loops.__file__  # seed_loop's line that reads the loss
    line = next(i for i, text in enumerate(Path(loop_file).read_text().splitlines(), 1)
                if "losses.append(loss.item())" in text)
    assert site.where == f"{loop_file}:{line}" and site.op == "item"
    assert site.count == 50


def test_hooks_are_removed_afterwards() -> None:
    before = (torch.Tensor.backward, torch.save, torch.Tensor.to, torch.Tensor.item, torch.optim.Optimizer.zero_grad)
    with Watcher():
        assert torch.save is not before[1]
    after = (torch.Tensor.backward, torch.save, torch.Tensor.to, torch.Tensor.item, torch.optim.Optimizer.zero_grad)
    assert before == after
    assert not optimizer_module._global_optimizer_pre_hooks and not optimizer_module._global_optimizer_post_hooks


def test_edges_only_steps_keep_one_optimizer_hook_the_step_edge_itself() -> None:
    model, optimizer, x = tiny_step()

    def step() -> None:
        model(x).sum().backward()
        optimizer.step()

    with Watcher(warmup=0, profile_steps=0) as w:
        step()
        assert len(optimizer_module._global_optimizer_pre_hooks) == 1  # detailed: the optimizer phase
        w.hooks.pause()
        assert not optimizer_module._global_optimizer_pre_hooks
        assert list(optimizer_module._global_optimizer_post_hooks.values()) == [w.step_ended]
        step()
        w.hooks.resume()
        step()
    assert w.schedule.seen == 3
    assert not optimizer_module._global_optimizer_pre_hooks and not optimizer_module._global_optimizer_post_hooks


def test_no_optimizer_steps_are_backward_calls() -> None:
    w = torch.ones(3, requires_grad=True)
    with Watcher(warmup=0, profile_steps=0) as watcher:
        for _ in range(7):
            (w * 2).sum().backward()
    r = watcher.measurements()
    assert r.steps.seen == 7 and r.steps.micro_batches_per_step == 1  # no module called: one backward a step


def test_autograd_anomaly_detection_is_timed_where_it_formats_stacks() -> None:
    model, optimizer, x = tiny_step()
    with Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(10):
            model(x).sum().backward()
            optimizer.step()
    assert w.measurements().steps.anomaly_ms_per_step == 0.0
    with torch.autograd.set_detect_anomaly(True), Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(10):
            model(x).sum().backward()
            optimizer.step()
    r = w.measurements()
    # a part of each detailed step's time: their mean under the slowest step (not the median step, which a slow
    # moment of a shared machine during the detailed steps put under it: 2.56 ms against 2.07, 2026-11-26)
    assert r.steps.anomaly_ms_per_step is not None and 0 < r.steps.anomaly_ms_per_step < max(r.steps.times_ms)
    import torch.fx.traceback as fx_traceback

    assert not hasattr(fx_traceback.format_stack, "__wrapped__")  # put back


def test_steps_limit_stops_the_loop_quietly() -> None:
    with Watcher(steps=5) as w:
        seed_loop(100)
    assert w.measurements().steps.seen == 5


def test_the_profiler_windows_own_synchronize_is_not_the_scripts(monkeypatch) -> None:
    # torch.profiler synchronises the device as it stops; torch.cuda.synchronize is a no-op stand-in here
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    model, optimizer, x = tiny_step()
    with Watcher(warmup=1, profile_steps=2) as w:
        close = w.window._close

        def closing(steps: int) -> None:
            torch.cuda.synchronize()  # as torch.profiler's stop() does
            close(steps)

        w.window._close = closing  # type: ignore[method-assign]
        stop = w.window._close_early

        def close_at_stop() -> None:  # a run that ends inside the window closes it in stop()
            torch.cuda.synchronize()
            stop()

        w.window._close_early = close_at_stop  # type: ignore[method-assign]
        for _ in range(6):
            model(x).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            torch.cuda.synchronize()  # the script's own
    sites = [s for s in w.measurements().reads.sync_sites if s.op == "torch.cuda.synchronize"]
    assert [s.count for s in sites] == [6] and sites[0].where.endswith(f"test_session.py:{_line_of('the script')}")


def test_cuda_events_are_recorded_on_detailed_steps_only(monkeypatch) -> None:
    # each event is a CUDA call or two: dear next to a tiny GPU step; a copy to the device (h2d) is
    # timed at the step's edges on every step, its device span only on the detailed ones
    made = fake_cuda_events(monkeypatch)
    model, optimizer, x = tiny_step()
    with Watcher(warmup=1, profile_steps=0, detail_every=4) as w:
        as_if_on_cuda(w)  # as if the model's first input had been on a GPU
        made_by_kind = {True: 0, False: 0}
        for _ in range(2000):
            detailed, before = w.schedule.detailed, len(made)  # a step runs from one optimizer step to the next
            optimizer.zero_grad()
            w.edges.enter("h2d")  # what the hook on Tensor.to does around a copy to the GPU, on every step
            w.edges.exit("h2d")
            model(x).sum().backward()
            optimizer.step()
            made_by_kind[detailed] += len(made) - before
    records = w.samples.measured.items
    assert {r.detailed for r in records} == {True, False}
    assert all((r.device_ms is not None) == r.detailed for r in records)
    assert made_by_kind[True] > 0 and made_by_kind[False] == 0


def test_an_optimizer_closure_s_kernels_are_not_the_optimizer_s(monkeypatch) -> None:
    """optimizer.step(closure) runs forward and backward inside the step (LBFGS, Lightning): on a GPU the
    optimizer's device span stops while the closure runs. On the H200 of 2026-11-27 Lightning's optimizer phase
    spanned 3.41 ms of the device per step, its forward and backward inside it, where the GPU worked 0.42 ms."""
    device_now = stamped_cuda_events(monkeypatch)  # the closure's forward and backward take 10 ms of it
    model, optimizer, x = tiny_step()

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = model(x).sum()
        loss.backward()
        device_now[0] += 10.0
        return loss

    with Watcher(warmup=1, profile_steps=0, detail_every=1) as w:
        as_if_on_cuda(w)
        for _ in range(12):
            optimizer.step(closure)
            device_now[0] += 1.0  # between steps: no phase's
    detailed = [r for r in w.samples.measured.items if r.device_ms is not None]
    assert detailed and all(r.device_ms.get("optimizer", 0.0) == 0.0 for r in detailed)


def _gpu_bound_run(monkeypatch, steps: int) -> Watcher:
    """Steps whose launches take the host 1 ms per phase and 1 ms of other work, and the GPU 20 ms of forward,
    40 of backward and 1 of optimizer, with nothing that waits for it: the host runs ahead into CUDA's queue."""
    device_now, clock = stamped_cuda_events(monkeypatch), [0.0]
    w = Watcher(warmup=1, profile_steps=0, detail_every=1, now=lambda: clock[0], sample_hz=5)
    with w:
        as_if_on_cuda(w)
        for _ in range(steps):
            for phase, device_ms in (("forward", 20.0), ("backward", 40.0), ("optimizer", 1.0)):
                w.edges.enter(phase)
                clock[0] += 0.001
                device_now[0] += device_ms
                w.edges.exit(phase)
            clock[0] += 0.001
            w.step_ended(OPTIMIZER)  # type: ignore[arg-type]
        # the watch stops: the device still has a second of queued work
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: clock.__setitem__(0, clock[0] + 1.0))
    return w


def test_a_gpu_the_host_runs_ahead_of_sets_the_step_time(monkeypatch) -> None:
    """The wide MLP on an H200 over 60 steps (2026-11-28): a host median of 29 ms where the GPU worked 70.5 ms a
    step ("243% of the step"). A step is the longer of the host's wall and the device's span."""
    r = _gpu_bound_run(monkeypatch, 20).measurements()
    assert r.steps.median_ms == pytest.approx(61.0) and r.steps.p90_ms == pytest.approx(61.0)
    assert r.steps.mean_ms == pytest.approx(61.0) and r.steps.host_median_ms == pytest.approx(4.0)
    # forward, backward and optimizer split as the GPU ran them; other is the host's 1 ms
    assert r.phases["forward"].share == pytest.approx(20 / 62)
    assert r.phases["backward"].share == pytest.approx(40 / 62)
    assert r.phases["other"].share == pytest.approx(1 / 62)
    assert any("the GPU set the pace" in note for note in r.notes)
    # the loop: 19 host steps after the first one's end, one median step for that first one, and the backlog
    assert r.steps.loop_s == pytest.approx(19 * 0.004 + 0.061 + 1.0)


def test_a_host_that_waits_for_its_gpu_keeps_its_own_step_time(monkeypatch) -> None:
    """Where the host's step is longer than the device's span (a host-bound step, or a GPU-bound one whose queue
    is full), the host's wall is the step: nothing changes."""
    device_now, clock = stamped_cuda_events(monkeypatch), [0.0]
    with Watcher(warmup=1, profile_steps=0, detail_every=1, now=lambda: clock[0], sample_hz=5) as w:
        as_if_on_cuda(w)
        for _ in range(20):
            w.edges.enter("forward")
            clock[0] += 0.003
            device_now[0] += 0.2
            w.edges.exit("forward")
            clock[0] += 0.001
            w.step_ended(OPTIMIZER)  # type: ignore[arg-type]
    r = w.measurements()
    assert r.steps.median_ms == pytest.approx(4.0) and r.steps.host_median_ms is None
    assert r.phases["forward"].share == pytest.approx(0.75)


def test_making_and_recording_a_cuda_event_is_no_phases_time(monkeypatch) -> None:
    """On a detailed CUDA step every phase edge makes and records an event, a few us of the watcher's
    own each: after a phase closes, that used to fall into "other"."""
    made = fake_cuda_events(monkeypatch)
    clock = [0.0]
    record = torch.cuda.Event.record

    def slow_record(self: Any) -> None:
        record(self)
        clock[0] += 1.0  # an event's cost, made obvious

    monkeypatch.setattr(torch.cuda.Event, "record", slow_record)
    w = Watcher(warmup=0, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=1)
    with w:
        as_if_on_cuda(w)
        for _ in range(20):
            w.edges.enter("forward")
            clock[0] += 0.5
            w.edges.exit("forward")
            clock[0] += 0.25  # the script's own other work
            w.step_ended(OPTIMIZER)  # type: ignore[arg-type]
    assert len(made) == 40
    assert all(r.wall_s == pytest.approx(0.75) and r.phases["forward"] == pytest.approx(0.5)
               and r.phases["other"] == pytest.approx(0.25) for r in w.samples.measured.items)


def _line_of(marker: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if marker in line and "_line_of" not in line)


def test_an_explicit_device_synchronize_is_a_sync_at_its_line(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    waited: list[int] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: waited.append(1))  # the GPU's wait, faked
    model, optimizer, x = tiny_step()
    with Watcher(warmup=0, profile_steps=0) as w:
        for _ in range(5):
            model(x).sum().backward()
            torch.cuda.synchronize(); line = sys._getframe().f_lineno  # noqa: E702
            optimizer.step()
    assert len(waited) == 5
    r = w.measurements()
    assert r.steps.syncs_per_step == 1.0 and r.phases["sync"].share > 0
    [site] = r.reads.sync_sites
    assert (site.op, site.count, site.where) == ("torch.cuda.synchronize", 5, f"{__file__}:{line}")


def test_a_read_made_inside_torch_is_charged_to_the_users_line_that_called_it() -> None:
    # a function whose code lives in torch's directory, as torch's own helpers that read do
    inside = {}
    exec(compile("def norm(t):\n    return t.norm().item()\n", os.path.join(os.path.dirname(torch.__file__), "fake_helper.py"),
                 "exec"), inside)
    norm = inside["norm"]
    model, optimizer, x = tiny_step()
    with Watcher(warmup=0, profile_steps=0) as w:
        for _ in range(4):
            model(x).sum().backward()
            norm(x); first = sys._getframe().f_lineno  # noqa: E702
            norm(x); second = sys._getframe().f_lineno  # noqa: E702
            optimizer.step()
    sites = {s.where: s.count for s in w.measurements().reads.host_read_sites}
    assert sites == {f"{__file__}:{first}": 4, f"{__file__}:{second}": 4}  # one torch line, two callers


def test_index_tensors_slicing_a_memmap_are_reads_of_cpu_tensors_at_the_users_line(tmp_path: Path) -> None:
    # a char-level GPT's get_batch: 0-d tensors from torch.randint slice a numpy memmap, each slice calling the
    # index tensor's __index__ inside numpy. They wait for nothing (the tensors are on the host on any machine):
    # no syncs, and their place is the script's line, not numpy's
    import numpy as np

    path = tmp_path / "train.bin"
    np.arange(4096, dtype=np.uint16).tofile(path)
    data = np.memmap(path, dtype=np.uint16, mode="r")
    model = nn.Embedding(4096, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    block, batch = 16, 4
    with Watcher(warmup=0, profile_steps=0) as w:
        for _ in range(6):
            ix = torch.randint(len(data) - block, (batch,))
            x = torch.stack([torch.from_numpy(data[i:i + block].astype(np.int64)) for i in ix]); line = sys._getframe().f_lineno  # noqa: E501, E702
            model(x).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
    r = w.measurements()
    assert r.steps.syncs_per_step == 0 and not r.reads.sync_sites and r.phases["sync"].share == 0
    assert r.steps.host_reads_per_step == 2 * batch  # two __index__ per slice: its start i and its end, the tensor i + block
    [site] = r.reads.host_read_sites
    assert (site.where, site.op, site.count) == (f"{__file__}:{line}", "__index__", 6 * 2 * batch)


def test_reads_of_cpu_tensors_stop_counting_once_anything_is_copied_to_a_device() -> None:
    """`model.to("cuda")` comes before the loop, whose first `for` over a DataLoader reads CPU tensors
    (the sampler's `randperm(n).tolist()`, the seeds' `.item()`) before any forward reveals the device."""
    t = torch.arange(4)
    with Watcher(warmup=0, profile_steps=0, sample_hz=5) as w:
        t.sum().item()  # a CPU run so far: counted as a read of a CPU tensor
        w.h2d(64, False, False)  # what the hook on Tensor.to reports after a copy to a device
        t.tolist()
        t.sum().item()
    r = w.measurements()
    assert [s.count for s in r.reads.host_read_sites] == [1] and not r.reads.sync_sites


def test_the_profiler_windows_own_time_goes_to_no_step() -> None:
    """On CUDA, torch.profiler's stop and the reading of its trace take a second or more, between the
    window's last step and the first measured one: that step, and the sums, must not count it."""
    clock = [0.0]
    w = Watcher(warmup=2, profile_steps=3, sample_hz=5, now=lambda: clock[0], detail_every=10**9)
    close = w.window._close

    def slow_close(steps: int) -> None:
        close(steps)
        clock[0] += 100.0  # what torch.profiler's stop costs on a GPU, made obvious

    w.window._close = slow_close  # type: ignore[method-assign]
    with w:
        fake_clock_run(w, clock, 200)
    assert w.window.part().ops_per_step is not None  # the window did close, slowly
    seconds, wall = w.clock.summed() or ({}, 0.0)
    assert wall == pytest.approx(200 - w.schedule.settled_at)  # 1 s steps, every one summed (no quiet tail yet)
    assert all(r.wall_s == 1.0 for r in w.samples.measured.items)
    assert w.measurements().phases["other"].share == pytest.approx(0.15)


def test_a_step_wrapper_someone_kept_calls_straight_through_once_the_watcher_is_gone() -> None:
    """An LR scheduler made while watched wraps the optimizer's step as it finds it (the watcher's
    wrapper); after the watcher stops, that reference still steps, and touches no clock."""
    model = nn.Linear(3, 1)
    opt = TimedSGD(model.parameters(), lr=0.1)
    x = torch.ones(4, 3)
    w = Watcher(warmup=0, profile_steps=0, sample_hz=5, detail_every=1)
    with w:
        for _ in range(3):
            model(x).sum().backward()
            opt.step()
        scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    before = dict(w.clock.totals), w.clock.stack[:]
    weight = model.weight.detach().clone()
    model(x).sum().backward()
    opt.step()
    scheduler.step()
    assert not torch.equal(weight, model.weight) and opt.param_groups[0]["lr"] == pytest.approx(0.05)
    assert (dict(w.clock.totals), w.clock.stack) == before


def test_ops_outside_every_phase_are_counted_and_timed_apart() -> None:
    # a functional loss outside every module call: its ops (log_softmax, the detach autograd saves, nll_loss)
    # are "other"'s; the forward's ops are not, nor the read's (item()'s op is the sync phase's), nor the
    # profiler range torch closes around the optimizer step the window opens in
    model, opt, x = tiny_step()
    y = torch.zeros(8, dtype=torch.long)
    with Watcher(warmup=1, profile_steps=2) as w:
        for _ in range(10):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss.item()
    r = w.measurements()
    assert r.window.other_ops_per_step == 3
    assert r.window.other_op_ms_per_step is not None and r.window.other_op_ms_per_step > 0
    assert r.window.ops_per_step is not None and r.window.ops_per_step > 10


def _busy_batches(steps: int, seconds: float) -> Any:
    """A data generator that spends `seconds` of pure Python per batch, over three lines."""
    for _ in range(steps):
        end = time.perf_counter() + seconds / 3
        while time.perf_counter() < end:
            pass
        end = time.perf_counter() + seconds / 3
        while time.perf_counter() < end:
            pass
        end = time.perf_counter() + seconds / 3
        while time.perf_counter() < end:
            pass
        yield torch.randn(8, 4)


def test_the_training_loops_line_gathers_the_samples_of_the_functions_it_calls() -> None:
    model, optimizer, _ = tiny_step()
    with Watcher(warmup=2, profile_steps=0, sample_hz=500) as w:
        for x in _busy_batches(60, 0.003):
            loop_line = f"{__file__}:{sys._getframe().f_lineno - 1}"
            model(x).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
    r = w.measurements()
    generator = _busy_batches.__code__.co_firstlineno
    # samples in the generator's lines, each line with a part of its time
    assert any(generator < int(s.where.rsplit(":", 1)[1]) <= generator + 12 for s in r.sites.other)
    top = r.sites.loop[0]
    assert top.where == loop_line and top.code.startswith("for x in _busy_batches")
    assert top.share_of_other > r.sites.other[0].share_of_other


def test_the_cpu_window_counts_the_ops_of_the_edge_phases_apart() -> None:
    # a TensorDataset batched row by row: every row is a `dataset[i]` (one index op per tensor), the batch a stack
    model, optimizer, _ = tiny_step()
    data = TensorDataset(torch.randn(512, 4), torch.randn(512, 3))
    with Watcher(warmup=2, profile_steps=3) as w:
        for x, y in DataLoader(data, batch_size=8):
            loss = ((model(x) - y) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss.item()
    r = w.measurements()
    assert r.window.edge_ops_per_step is not None and r.window.ops_per_step is not None
    # 8 rows x 2 tensors indexed, 2 stacks, and the read's one op at least; the step's own ops are not among them
    assert 8 * 2 + 2 + 1 <= r.window.edge_ops_per_step < r.window.ops_per_step - 10


def test_a_sleeping_thread_of_the_scripts_leaves_the_samples_on_the_lines_that_ran() -> None:
    # tqdm's monitor thread, started by any progress bar, sleeps all run long: the sampler still takes the short
    # switch interval, and the generator's busy lines get their samples (with the script's 5 ms interval they got
    # none: the samples landed where the main thread released the GIL, its torch ops)
    import threading

    release = threading.Event()
    sleeper = threading.Thread(target=release.wait, daemon=True)
    sleeper.start()
    try:
        model, optimizer, _ = tiny_step()
        with Watcher(warmup=2, profile_steps=0, sample_hz=500) as w:
            for x in _busy_batches(60, 0.003):
                model(x).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
    finally:
        release.set()
        sleeper.join()
    first = _busy_batches.__code__.co_firstlineno
    busy_lines = {first + 4, first + 5, first + 7, first + 8, first + 10, first + 11}  # the three busy-wait loops
    on_them = sum(s.samples for s in w.measurements().sites.other if int(s.where.rsplit(":", 1)[1]) in busy_lines)
    assert on_them >= 5
