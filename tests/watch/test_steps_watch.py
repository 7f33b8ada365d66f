"""The end of each watched step: quiet runs, the step sample and the detailed steps, exact counts and shares on a fake clock."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
import torch
from torch import nn
from torch.optim import optimizer as optimizer_module
from watched_loops import OPTIMIZER, TimedSGD, as_if_on_cuda, fake_clock_run, fake_cuda_events, seed_loop, tiny_step

from trainspeed.watch import Watcher
from trainspeed.watch.samples import PLOT_STEPS, RESERVOIR_SIZE, Reservoir
from trainspeed.watch.schedule import DETAIL_BLOCK, SWITCHES_PER_DOUBLING


def test_quiet_steps_count_exactly_and_every_kept_step_times_only_itself() -> None:
    """Once the step sample is full, the steps it will pass over run quiet (their end only counts
    them): the sample keeps the very steps it would keep otherwise, each timed alone, and every
    count (steps, reads) stays exact, also when asked mid-run."""
    clock = [0.0]
    w = Watcher(warmup=2, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=4)
    w.samples.measured = Reservoir(size=32, seed=1)
    w.start()
    try:
        quiet = fake_clock_run(w, clock, 3000)
        assert w.measurements().steps.measured == 3000 - w.schedule.settled_at  # mid-run: quiet steps counted
        quiet += fake_clock_run(w, clock, 2000)
    finally:
        w.stop()
    r = w.measurements()
    assert quiet > 3000 and r.steps.seen == 5000 and r.steps.measured == 5000 - w.schedule.settled_at
    same = Reservoir[int](size=32, seed=1)  # the sample's choice, offered every measured step in turn
    for i in range(r.steps.measured):
        same.add(i) if same.wants() else same.skip()
    assert sorted(rec.index - w.schedule.settled_at for rec in w.samples.measured.items) == sorted(same.items)
    assert all(rec.wall_s == 1.0 and rec.syncs == 1 and rec.phases["forward"] == 0.75
               and abs(rec.phases["sync"] - 0.1) < 1e-9 for rec in w.samples.measured.items)
    # the loop's time: from the first step's end to the last's, and one median step for the first (its clock ran
    # from the watch's start), quiet steps and all: 5000 steps of 1 s
    assert r.steps.loop_s == 5000.0
    (site,) = r.reads.sync_sites
    assert site.count == 5000 and abs(site.total_ms - 5000 * 100.0) < 1e-3


def test_a_cuda_run_goes_quiet_between_detailed_runs_only(monkeypatch) -> None:
    """On CUDA the detailed steps record events at their phase edges and are kept with them, so a quiet
    run (whose steps keep nothing) starts only on edges-only steps; there the steps run quiet as off
    CUDA, and the kept ones still time only themselves."""
    made = fake_cuda_events(monkeypatch)
    clock = [0.0]
    w = Watcher(warmup=2, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=4)
    w.samples.measured = Reservoir(size=16, seed=1)
    quiet = {True: 0, False: 0}
    with w:
        as_if_on_cuda(w)  # as if the model's first input had been on a GPU
        for _ in range(3000):
            detailed, before = w.schedule.detailed, len(made)
            quiet[detailed] += fake_clock_run(w, clock, 1)
            assert detailed or len(made) == before
    assert quiet[False] > 1000 and quiet[True] == 0 and len(w.samples.plots) == PLOT_STEPS
    assert not w.edges.events and w.measurements().steps.measured == 3000 - w.schedule.settled_at
    records = w.samples.measured.items
    assert {r.detailed for r in records} == {True, False} and all(r.wall_s == 1.0 for r in records)
    assert all((r.device_ms is not None) == r.detailed for r in records)


def test_the_split_of_forward_backward_and_the_rest_comes_from_every_detailed_step() -> None:
    """Every seventh step's forward takes 0.75 s, the others' 0.25 s. A sample of 16 steps holds a
    handful of detailed ones; the clock's sums over every detailed step give the split exactly."""
    clock = [0.0]
    w = Watcher(warmup=2, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=4)
    w.samples.measured = Reservoir(size=16, seed=1)
    detailed_at: list[bool] = []
    with w:
        for _ in range(5000):
            long = w.schedule.seen % 7 == 0
            detailed_at.append(w.schedule.detailed)
            w.edges.enter("forward")
            clock[0] += 0.75 if long else 0.25
            w.edges.exit("forward")
            clock[0] += 0.25 if long else 0.75
            w.step_ended(OPTIMIZER)  # type: ignore[arg-type]
    seconds, wall = w.clock.summed() or ({}, 0.0)
    summed = range(w.schedule.settled_at, w.schedule.settled_at + round(wall))  # 1 s steps (a quiet tail is left out)
    detailed = [i for i in summed if detailed_at[i]]
    exact = sum(0.75 if i % 7 == 0 else 0.25 for i in detailed) / len(detailed)
    shares = w.measurements().phases
    assert len(detailed) > 1000 and sum(r.detailed for r in w.samples.measured.items) < 16
    assert shares["forward"].share == pytest.approx(exact, abs=1e-9)
    assert shares["other"].share == pytest.approx(1 - exact, abs=1e-9)


def test_forward_host_time_is_the_median_of_a_sample_of_detailed_steps_alone() -> None:
    """The step sample holds about one detailed step in `detail_every`; forward's median host time comes
    from a sample of the detailed steps alone, the very one a reservoir offered every detailed step
    would keep, each step timed alone although both samples' passed-over steps run quiet."""
    clock = [0.0]
    w = Watcher(warmup=2, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=4)
    w.samples.measured = Reservoir(size=16, seed=1)
    detailed_at: list[bool] = []
    quiet = 0
    with w:
        for _ in range(8000):
            quiet += w.schedule.seen < w.schedule.quiet_until
            detailed_at.append(w.schedule.detailed)
            forward = (w.schedule.seen % 101) / 100  # 0 to 1 s, spread evenly: median 0.5 s
            w.edges.enter("forward")
            clock[0] += forward
            w.edges.exit("forward")
            clock[0] += 1.0 - forward
            w.step_ended(OPTIMIZER)  # type: ignore[arg-type]
    assert w.samples.detailed is not None
    kept = w.samples.detailed.items
    same = Reservoir[int](seed=5)  # the detailed sample's choice, offered every measured detailed step in turn
    for i in range(w.schedule.settled_at, 8000):
        if detailed_at[i]:
            same.add(i) if same.wants() else same.skip()
    assert sorted(r.index for r in kept) == sorted(same.items) and len(kept) == RESERVOIR_SIZE
    assert all(r.detailed and abs(r.wall_s - 1.0) < 1e-6 and abs(r.phases["forward"] - (r.index % 101) / 100) < 1e-6
               for r in kept)  # each kept step timed alone (the fake clock's sums round in the last bits)
    assert sum(r.detailed for r in w.samples.measured.items) < 16 and quiet > 4000
    assert w.measurements().phases["forward"].host_ms == pytest.approx(500, abs=100)


def test_hook_switches_grow_with_the_log_of_the_run_and_stop_at_the_process_budget(monkeypatch) -> None:
    """Every pause and resume of the per-call hooks modifies torch.nn.Module's class; CPython 3.13+
    stops caching a class's lookups after 1 000 modifications. Detailed runs double in length every
    SWITCHES_PER_DOUBLING runs (their share stays), and a process stops switching at its budget."""
    from trainspeed.watch import patching as patching_module

    def detailed_runs(steps: int, budget: int) -> tuple[Watcher, int, int]:
        monkeypatch.setattr(patching_module, "RESUME_BUDGET", budget)
        monkeypatch.setattr(patching_module, "_resumes", [0])
        clock = [0.0]
        w = Watcher(warmup=0, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=2)
        detailed = 0
        with w:
            for _ in range(steps):
                detailed += w.schedule.detailed
                fake_clock_run(w, clock, 1)
        return w, patching_module._resumes[0], detailed

    w, resumes, detailed = detailed_runs(40_000, 10**6)
    assert SWITCHES_PER_DOUBLING * 2 < resumes < SWITCHES_PER_DOUBLING * 4  # 64-step runs: over 300 of them
    assert 0.4 < detailed / 40_000 < 0.6 and not w.schedule.notes
    w, resumes, detailed = detailed_runs(40_000, 20)
    assert resumes == 21  # the budget's 20, then stop() puts the hooks back in before taking every patch out
    assert len(w.schedule.notes) == 1 and "detailed steps stopped" in w.schedule.notes[0]
    assert not w.schedule.detailed and detailed < 20 * DETAIL_BLOCK * 2


def test_steps_limit_is_exact_across_quiet_steps() -> None:
    clock = [0.0]
    w = Watcher(warmup=0, profile_steps=0, sample_hz=5, now=lambda: clock[0], steps=2345)
    w.samples.measured = Reservoir(size=16, seed=1)
    with w:
        fake_clock_run(w, clock, 10_000)
    assert w.schedule.seen == 2345 and w.measurements().steps.measured == 2345 - w.schedule.settled_at


def test_an_all_reduce_turning_up_in_a_quiet_run_is_not_taken_for_one_steps() -> None:
    """A DDP made in the middle of a quiet run: the first all-reduce spans come in a step whose clock
    started with the quiet steps; that step is passed over, and the later steps are timed alone."""
    clock = [0.0]
    w = Watcher(warmup=0, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=10**9)
    w.samples.measured = Reservoir(size=16, seed=1)
    with w:
        fake_clock_run(w, clock, 2000)
        while w.schedule.seen + 1 >= w.schedule.quiet_until:  # run on to a step well inside a quiet run
            fake_clock_run(w, clock, 1)
        w.ranks.comm.backend = "gloo"  # what CommTimer notes when a DDP is made
        w.ranks.comm.spans.append((clock[0], clock[0] + 0.2, 1024))
        kept_before = w.samples.measured.items[:]
        fake_clock_run(w, clock, 1000)
    assert w.schedule.quiet_until == 0 and not w.ranks.comm.spans and not w.ranks.comm_steps.items
    assert all(rec.wall_s == 1.0 for rec in w.samples.measured.items) and w.samples.measured.items != kept_before


def test_a_rare_checkpoint_gets_its_exact_share_whichever_steps_the_sample_keeps() -> None:
    """A 5 s checkpoint every 100th step of a 1 s loop: a sample of 16 steps of 5 000 holds one
    checkpoint step or none, but the checkpoint and sync shares come from sums over every measured
    step, quiet ones included (those the script ends inside a quiet run aside)."""
    clock = [0.0]
    w = Watcher(warmup=2, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=10**9)
    w.samples.measured = Reservoir(size=16, seed=1)
    with w:
        fake_clock_run(w, clock, 5000, checkpoint_every=100)
    seconds, wall = w.clock.summed() or ({}, 0.0)
    steps = round(seconds["sync"] / 0.1)  # one 0.1 s read per step: how many steps the sums hold
    checkpoints = sum(1 for i in range(w.schedule.settled_at, w.schedule.settled_at + steps) if i % 100 == 99)
    assert steps > 4900 and abs(seconds["sync"] - 0.1 * steps) < 1e-6
    assert abs(seconds["checkpoint"] - 5.0 * checkpoints) < 1e-6 and abs(wall - steps - 5.0 * checkpoints) < 1e-6
    assert sum(rec.phases["checkpoint"] > 0 for rec in w.samples.measured.items) <= 1  # the sample alone would miss it
    r = w.measurements()
    assert abs(r.phases["checkpoint"].share - seconds["checkpoint"] / wall) < 1e-9
    assert abs(r.phases["sync"].share - seconds["sync"] / wall) < 1e-9


def test_the_optimizer_phase_is_the_whole_step_call_and_the_edges_own_work_no_steps() -> None:
    """torch runs Python of its own around every optimizer step (a profiler range, the loops over the
    step hooks) before the pre hooks and after the post hooks: that is optimizer time, not "other".
    And what the watcher does at a step's end is no step's time at all."""
    clock = [0.0]

    def tick(seconds: float) -> Any:
        def hook(*_: Any) -> None:
            clock[0] += seconds
        return hook

    model = nn.Linear(3, 1)
    opt = TimedSGD(model.parameters(), lr=0.1)
    model.register_forward_pre_hook(tick(0.5))  # forward: 0.5 s
    x = torch.ones(4, 3)
    original_step = TimedSGD.__dict__.get("step")  # its own, or none (then SGD's hooked step serves it)
    head = optimizer_module.register_optimizer_step_pre_hook(tick(0.3))  # before the watcher's pre hook
    w = Watcher(warmup=2, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=1)
    keep = w._keep

    def slow_keep(record: Any) -> None:  # the watcher's bookkeeping, made obvious
        keep(record)
        clock[0] += 7.0

    w._keep = slow_keep  # type: ignore[method-assign]
    try:
        with w:
            tail = optimizer_module.register_optimizer_step_post_hook(tick(0.2))  # after the watcher's
            try:
                for _ in range(40):
                    loss = model(x).sum()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    clock[0] += 0.1  # the script's own work: other
            finally:
                tail.remove()
    finally:
        head.remove()
    assert TimedSGD.__dict__.get("step") is original_step  # put back
    later = w.samples.measured.items  # from step 2: the class is patched as the first step ends
    assert len(later) == 38 and all(r.wall_s == pytest.approx(1.1) for r in later)  # 0.5 + 0.3 + 0.2 + 0.1, no 7 s
    assert all(r.phases["optimizer"] == pytest.approx(0.5) and r.phases["other"] == pytest.approx(0.1)
               for r in later)
    result = w.measurements()
    assert result.phases["optimizer"].share == pytest.approx(0.5 / 1.1)
    assert result.phases["other"].share == pytest.approx(0.1 / 1.1)


def test_memory_stays_bounded_over_a_million_steps() -> None:
    class FakeOptimizer:
        pass

    opt = FakeOptimizer()
    w = Watcher(warmup=0, profile_steps=0, sample_hz=5)

    def steps(n: int) -> None:
        for _ in range(n):
            w.edges.enter("forward")
            w.edges.exit("forward")
            w.step_ended(opt)  # type: ignore[arg-type]

    w.start()
    try:
        steps(500_000)
        tracemalloc.start()  # traced for a window late in the run: it must not grow there
        before = tracemalloc.get_traced_memory()[0]
        steps(50_000)
        grown = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        steps(450_000)
    finally:
        w.stop()
    r = w.measurements()
    assert r.steps.seen == 1_000_000
    assert len(w.samples.measured.items) <= RESERVOIR_SIZE and len(w.samples.plots) <= 400 and len(w.samples.pending) <= 256
    assert w.samples.detailed is not None and len(w.samples.detailed.items) == RESERVOIR_SIZE
    assert grown < 256 * 1024  # 50 000 steps added under 256 KiB: no per-step growth


def test_sampled_detail_watches_some_steps_in_full_and_every_step_at_its_edges() -> None:
    call = torch.nn.Module.__call__
    with Watcher(warmup=1, profile_steps=1, detail_every=4) as w:
        watched = seed_loop(600)
        now = torch.nn.Module.__call__
        assert now is call or getattr(now, "__wrapped__", None) is call
    assert watched == seed_loop(600)
    assert torch.nn.Module.__call__ is call  # back as it was, paused or not when the run ended
    records = w.samples.measured.items
    detailed = [r for r in records if r.detailed]
    light = [r for r in records if not r.detailed]
    assert detailed and light
    assert len(w.samples.plots) >= 50 + 32  # every detailed step: the first ones, then at least one more run
    assert all(r.phases["forward"] == 0 for r in light) and all(r.phases["forward"] > 0 for r in detailed)
    assert all(r.host_reads == 1 and r.syncs == 0 for r in records)  # reads are counted on every step
    r = w.measurements()
    assert r.steps.seen == 600 and r.steps.host_reads_per_step == 1.0 and r.reads.host_read_sites[0].count == 600
    assert sum(p.share for p in r.phases.values()) == __import__("pytest").approx(1.0)
    assert r.phases["forward"].share > 0.05 and r.phases["backward"].share > 0.05
    assert all(s.detailed for s in r.steps.samples)


class _Sleepy(nn.Module):
    """A segment whose forward takes 20 ms however it is called (its first call or autograd's recompute)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import time

        time.sleep(0.02)
        return torch.relu(self.linear(x))


@pytest.mark.parametrize("reentrant", [False, True])
def test_activation_checkpointings_recompute_is_backwards_time_not_a_second_forward(reentrant: bool) -> None:
    from torch.utils.checkpoint import checkpoint

    segment, head = _Sleepy(), nn.Linear(8, 1)
    optimizer = torch.optim.SGD([*segment.parameters(), *head.parameters()], lr=0.01)
    x = torch.randn(4, 8, requires_grad=True)
    with Watcher(warmup=1, profile_steps=0, detail_every=1) as w:
        for _ in range(6):
            loss = head(checkpoint(segment, x, use_reentrant=reentrant)).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    r = w.measurements()
    assert r.steps.seen == 6 and r.steps.micro_batches_per_step == 1
    # the segment's sleep once in forward, once more in backward (its recompute, timed apart); a second forward
    # counted in the forward phase would be 40 ms
    assert 20 <= r.phases["forward"].host_ms < 35
    assert r.steps.recompute_ms_per_step is not None and r.steps.recompute_ms_per_step >= 19.5
    # backward holds the recompute (its median against the recompute's mean: one sleep that overran moves the mean)
    assert r.phases["backward"].host_ms >= 0.85 * r.steps.recompute_ms_per_step


_RECOMPILED = """
import torch
from torch import nn
from trainspeed.watch import Watcher

model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
compiled = torch.compile(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
try:
    compiled(torch.randn(4, 8)).sum().backward()  # compiled before the watch: the first compile is not the run's
except Exception as exc:  # no C++ compiler for the inductor here
    raise SystemExit(f"skip: {type(exc).__name__}")
with Watcher(warmup=1, profile_steps=0) as w:
    for rows in (4, 4, 4, 4, 3, 4, 4, 2):  # a batch of 3 rows: a recompile (then dynamic: 2 rows take that code)
        loss = compiled(torch.randn(rows, 8)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
r = w.measurements()
print(r.machine.compiles.count if r.machine.compiles else 0, r.machine.compiles.seconds if r.machine.compiles else 0.0)
"""


def test_a_recompile_during_the_measured_steps_is_counted_with_its_time() -> None:
    # in a process of its own: a graph compiled here would mark every later watch of this process as compiled
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _RECOMPILED], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and "skip:" in proc.stderr:
        pytest.skip(f"torch.compile does not run here ({proc.stderr.strip()})")
    assert proc.returncode == 0, proc.stderr[-2000:]
    count, seconds = proc.stdout.split()[-2:]
    assert int(count) == 1 and float(seconds) > 0


def test_a_recurrent_cell_stepped_in_the_model_s_forward_is_counted_per_step() -> None:
    """An nn.LSTMCell called once per time step inside the model's forward (nested module calls): its calls per
    step and its shape, for launch_bound's fused-layer advice; an evaluation's calls under no_grad are not counted."""
    from torch import nn

    from trainspeed.watch import Watcher

    class Stepped(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cell = nn.GRUCell(4, 8)
            self.head = nn.Linear(8, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.zeros(x.shape[0], 8)
            for t in range(x.shape[1]):
                h = self.cell(x[:, t], h)
            return self.head(h)

    torch.manual_seed(0)
    model, x, y = Stepped(), torch.randn(5, 7, 4), torch.randint(0, 2, (5,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with Watcher(warmup=2, profile_steps=0, detail_every=1) as w:
        for _ in range(12):
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                model(x)  # a check under no_grad: not the training step's cell calls
    loop = w.measurements().model.cell_loop
    assert loop is not None and (loop.kind, loop.input_size, loop.hidden_size, loop.calls_per_step) == ("GRUCell", 4,
                                                                                                       8, 7.0)
    assert loop.layer() == "nn.GRU(4, 8, batch_first=True)"


def test_a_cell_loop_of_two_stacked_cells_in_an_lbfgs_closure_is_as_long_as_the_sequence() -> None:
    """Two cells stacked and stepped over 6 time steps, the model called by LBFGS's closure several times a step: the
    loop's length is the sequence's, not the cells' calls over the step (which counted both cells and every closure
    call: "over 3200 time steps" on a 200-step sequence)."""

    class Stacked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.one, self.two, self.head = nn.LSTMCell(1, 5), nn.LSTMCell(5, 5), nn.Linear(5, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h1 = c1 = h2 = c2 = torch.zeros(x.shape[0], 5)
            for t in range(x.shape[1]):
                h1, c1 = self.one(x[:, t:t + 1], (h1, c1))
                h2, c2 = self.two(h1, (h2, c2))
            return self.head(h2)

    torch.manual_seed(0)
    model, x, y = Stacked(), torch.randn(3, 6), torch.randn(3, 1)
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
    closures = []

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        closures.append(1)
        return loss

    with Watcher(warmup=2, profile_steps=0, detail_every=1) as w:
        for _ in range(6):
            before = len(closures)
            optimizer.step(closure)
            per_step = len(closures) - before
    loop = w.measurements().model.cell_loop
    assert per_step >= 2  # the closure ran several times in the last steps
    assert loop is not None and (loop.kind, loop.input_size, loop.hidden_size) == ("LSTMCell", 1, 5)
    assert loop.calls_per_step == 6 * loop.passes_per_step and loop.passes_per_step >= 2
    assert loop.length() == 6


@pytest.mark.parametrize("warmup", [None, 3])
def test_a_run_of_few_long_steps_profiles_one_step_and_measures_the_rest(warmup: int | None) -> None:
    """A first step whose forward takes a second or more (LBFGS with its closure, a large model on a CPU): where no
    warm-up was named, one warm-up step and one profiled step, so a 4-step run leaves two measured steps and the
    window's op counts; a warm-up the user named stays (4 steps then end inside the window)."""
    mlp, optimizer, x = tiny_step()
    clock = [0.0]

    class Slow(nn.Module):  # its forward takes 2.5 s on the fake clock the first time, 0.1 s after
        def __init__(self) -> None:
            super().__init__()
            self.mlp, self.calls = mlp, 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            clock[0] += 2.5 if self.calls == 0 else 0.1
            self.calls += 1
            return self.mlp(x)

    model = Slow()
    w = Watcher(warmup=warmup, sample_hz=5, now=lambda: clock[0])
    with w:
        clock[0] += 30.0  # the script's setup before its loop: the first step's time, not its forward's
        for _ in range(4):
            loss = model(x).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    r = w.measurements()
    notes = " ".join(r.notes)
    if warmup is None:
        assert (w.schedule.warmup, w.schedule.opens_at, w.schedule.settled_at) == (1, 1, 2)
        assert r.steps.measured == 2 and r.window.ops_per_step is not None and r.window.ops_per_step > 0
        assert ("the first step's forward, backward and optimizer took 2.5 s: one warm-up step and one under the "
                "profiler window") in notes
    else:
        assert (w.schedule.warmup, w.schedule.settled_at) == (3, 6) and r.window.ops_per_step is None
        assert "the first step's" not in notes and "ended inside the profiler window" in notes
