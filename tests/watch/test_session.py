"""The watcher on real CPU loops: steps, phases, sync sites, no effect on results, bounded memory."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.optim import optimizer as optimizer_module
from torch.utils.data import DataLoader, TensorDataset

import trainspeed
from trainspeed.watch import Watcher
from trainspeed.watch.session import DETAIL_BLOCK, PLOT_STEPS, SWITCHES_PER_DOUBLING
from trainspeed.watch.stats import RESERVOIR_SIZE, Reservoir
from trainspeed.workloads import load_iris_split, make_iris_mlp


def _seed_loop(epochs: int) -> list[float]:
    d = load_iris_split()
    model = make_iris_mlp(seed=0)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = []
    for _ in range(epochs):
        loss = criterion(model(d.x_train), d.y_train)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def _tiny_step() -> tuple[nn.Module, torch.optim.Optimizer, torch.Tensor]:
    """The Iris MLP, its SGD optimizer and a batch of 8 random inputs."""
    model = make_iris_mlp(seed=0)
    return model, torch.optim.SGD(model.parameters(), lr=0.01), torch.randn(8, 4)


def test_watching_does_not_change_the_losses_bit_for_bit() -> None:
    plain = _seed_loop(300)
    with trainspeed.watch() as w:
        watched = _seed_loop(300)
    assert watched == plain
    assert w.measurements().steps_seen == 300


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
    assert w.measurements().compiled


def test_steps_phases_and_sync_sites() -> None:
    with Watcher(warmup=2, profile_steps=2) as w:
        _seed_loop(50)
    r = w.measurements()
    assert r.steps_seen == 50 and r.steps_measured == 46  # warm-up and profiled steps left out
    assert r.syncs_per_step == 1.0 and r.batch_size == 120 and r.device == "cpu" and not r.compiled
    assert r.ops_per_step and r.ops_per_step > 10 and r.flops_per_step and r.flops_per_step > 0
    assert sum(p.share for p in r.phases.values()) == __import__("pytest").approx(1.0)
    assert r.phases["forward"].host_ms > 0 and r.phases["backward"].host_ms > 0
    site = r.sync_sites[0]
    assert site.where == f"{__file__}:{_line_of('losses.append(loss.item())')}" and site.op == "item"
    assert site.count == 50


def test_hooks_are_removed_afterwards() -> None:
    before = (torch.Tensor.backward, torch.save, torch.Tensor.to, torch.Tensor.item, torch.optim.Optimizer.zero_grad)
    with Watcher():
        assert torch.save is not before[1]
    after = (torch.Tensor.backward, torch.save, torch.Tensor.to, torch.Tensor.item, torch.optim.Optimizer.zero_grad)
    assert before == after
    assert not optimizer_module._global_optimizer_pre_hooks and not optimizer_module._global_optimizer_post_hooks


def test_edges_only_steps_keep_one_optimizer_hook_the_step_edge_itself() -> None:
    model, optimizer, x = _tiny_step()

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
    assert w.steps_seen == 3
    assert not optimizer_module._global_optimizer_pre_hooks and not optimizer_module._global_optimizer_post_hooks


def test_no_optimizer_steps_are_backward_calls() -> None:
    w = torch.ones(3, requires_grad=True)
    with Watcher(warmup=0, profile_steps=0) as watcher:
        for _ in range(7):
            (w * 2).sum().backward()
    r = watcher.measurements()
    assert r.steps_seen == 7 and r.micro_batches_per_step == 1  # no module called: one backward a step


def _accumulating_loop(steps: int, micro: int) -> list[float]:
    """The Iris MLP trained on micro-batches of one sample, `micro` of them accumulated per optimizer step
    (as /tmp's unseen per-sample script did); returns each step's last loss."""
    d = load_iris_split()
    model = make_iris_mlp(seed=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = []
    for step in range(steps):
        optimizer.zero_grad()
        for j in range(micro):
            k = (step * micro + j) % len(d.y_train)
            loss = nn.functional.cross_entropy(model(d.x_train[k:k + 1]), d.y_train[k:k + 1]) / micro
            loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_backward_calls_before_the_first_optimizer_step_are_its_micro_batches_not_steps() -> None:
    # the first optimizer step comes after 8 backward calls: until then steps were backward calls, and the
    # warm-up, the profiler window and the samples had been spent on micro-batches (91 "steps" of 60)
    plain = _accumulating_loop(40, 8)
    with Watcher(warmup=2, profile_steps=2) as w:
        watched = _accumulating_loop(40, 8)
    assert watched == plain
    r = w.measurements()
    assert r.steps_seen == 40 and r.steps_measured == 36
    assert r.micro_batches_per_step == 8 and r.batch_size == 1
    assert r.ops_per_step is not None and r.ops_per_step > 8 * 10  # the window saw whole steps
    assert r.phases["backward"].host_ms > 4 * r.phases["optimizer"].host_ms
    assert any("after 8 backward calls" in note for note in r.notes)


def test_a_step_with_one_forward_and_backward_is_one_micro_batch() -> None:
    # a loss module is an outermost module call too, and a second optimizer's steps (a GAN's) share the passes
    with Watcher(warmup=1, profile_steps=0) as w:
        _seed_loop(20)
    assert w.measurements().micro_batches_per_step == 1
    model, optimizer, x = _tiny_step()
    other = torch.optim.SGD(model.parameters(), lr=0.0)
    with Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(20):
            model(x).sum().backward()
            optimizer.step()
            model(x).sum().backward()
            other.step()
    assert w.measurements().micro_batches_per_step == 1


def _rebuilding_loop(steps: int) -> list[float]:
    """A new Adam built at every step, inside the loop (as /tmp's unseen script did)."""
    torch.manual_seed(0)
    model, _, x = _tiny_step()
    losses = []
    for _ in range(steps):
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        loss = model(x).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_a_new_optimizer_built_every_step_delimits_the_steps_and_is_counted() -> None:
    # the first optimizer is gone after its step: the next one delimits the steps (2 steps seen of 800 before,
    # where each new optimizer that did not reuse the first one's id stepped as a second optimizer)
    plain = _rebuilding_loop(60)
    with Watcher(warmup=2, profile_steps=2) as w:
        watched = _rebuilding_loop(60)
    assert watched == plain
    r = w.measurements()
    assert r.steps_seen == 60 and r.optimizers_built == 59
    assert r.optimizer_build_ms is not None and r.optimizer_build_ms > 0
    assert r.micro_batches_per_step == 1 and r.model_calls_per_step == 1


def test_an_optimizer_that_steps_twice_without_the_first_delimits_the_steps_from_then_on() -> None:
    # a second stage with its own optimizer, the first one kept: its steps were all "another optimizer's"
    model, first, x = _tiny_step()
    second = torch.optim.SGD(model.parameters(), lr=0.001)
    with Watcher(warmup=1, profile_steps=0) as w:
        for optimizer, steps in ((first, 10), (second, 30)):
            for _ in range(steps):
                model(x).sum().backward()
                optimizer.step()
    r = w.measurements()
    assert r.steps_seen == 39 and r.optimizer_changes == 1  # the second one's first step is its rival's
    assert r.optimizers_built == 0  # built before the first step
    # a critic stepped 5 times per generator step: the critic delimits the steps, the generator's step is shared
    with Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(12):
            model(x).sum().backward()
            first.step()
            for _ in range(5):
                model(x).sum().backward()
                second.step()
    assert w.measurements().steps_seen == 12 * 5 - 1 + 1


def test_autograd_grad_is_a_backward_pass_and_delimits_steps_without_an_optimizer() -> None:
    model, _, x = _tiny_step()
    params = list(model.parameters())

    def loop(steps: int) -> list[float]:
        losses = []
        for _ in range(steps):
            loss = model(x).square().mean()
            grads = torch.autograd.grad(loss, params)
            with torch.no_grad():
                for p, g in zip(params, grads):
                    p -= 0.01 * g
            losses.append(loss.item())
        return losses

    with Watcher(warmup=1, profile_steps=2) as w:
        loop(12)
    r = w.measurements()
    assert r.steps_seen == 12
    assert r.phases["backward"].host_ms > 0 and r.micro_batches_per_step == 1


def _gradient_penalty_loop(steps: int) -> list[float]:
    """A WGAN-GP critic's step: autograd.grad of the critic's output over a leaf input, with create_graph."""
    torch.manual_seed(0)
    critic = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(critic.parameters(), lr=0.01)
    losses = []
    for _ in range(steps):
        mix = torch.randn(32, 2).requires_grad_(True)
        g, = torch.autograd.grad(critic(mix).sum(), mix, create_graph=True)
        loss = critic(mix).mean() + ((g.norm(2, dim=1) - 1) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_a_gradient_penalty_over_a_leaf_input_runs_and_is_no_micro_batch() -> None:
    # torch's FlopCounterMode hooked every module input (its module tracker): autograd.grad over a leaf input
    # then raised "A leaf node was passed to _will_engine_execute_node" from the user's code, in the CPU window
    plain = _gradient_penalty_loop(20)
    with Watcher(warmup=2, profile_steps=3) as w:
        watched = _gradient_penalty_loop(20)
    assert watched == plain
    r = w.measurements()
    assert r.flops_per_step is not None and r.flops_per_step > 0
    assert r.steps_seen == 20 and r.micro_batches_per_step == 1  # create_graph: a term of the loss, not a pass


def test_an_lbfgs_closures_passes_are_inside_its_step_not_micro_batches() -> None:
    model, _, x = _tiny_step()
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=4)

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        return loss

    with Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(10):
            optimizer.step(closure)
    r = w.measurements()
    assert r.steps_seen == 10 and not any("backward calls" in note for note in r.notes)
    assert r.micro_batches_per_step == 1 and r.model_calls_per_step == 0


def test_the_models_calls_per_step_and_those_fed_an_earlier_calls_output_are_counted() -> None:
    model, optimizer, x = _tiny_step()
    cell = nn.Linear(4, 4)
    cell_opt = torch.optim.SGD(cell.parameters(), lr=0.01)
    with Watcher(warmup=1, profile_steps=0) as w:  # one sample at a time
        for _ in range(8):
            torch.cat([model(x[i:i + 1]) for i in range(8)]).sum().backward()
            optimizer.step()
    r = w.measurements()
    assert r.model_calls_per_step == 8 and r.model_calls_chained == 0 and r.model_calls_after_read == 0
    assert r.batch_size == 1
    with Watcher(warmup=1, profile_steps=0) as w:  # a cell stepped over a sequence
        for _ in range(8):
            h = torch.zeros(1, 4)
            for t in range(6):
                h = torch.tanh(cell(h + x[t:t + 1]))
            h.sum().backward()
            cell_opt.step()
    r = w.measurements()
    assert r.model_calls_per_step == 6 and r.model_calls_chained == 5 and r.model_calls_after_read == 0
    with Watcher(warmup=1, profile_steps=0) as w:  # an agent: each input made from the action the host read
        for _ in range(8):
            obs, logps = x[0:1], []
            for t in range(5):
                out = torch.log_softmax(model(obs), -1)
                action = int(out.argmax())
                logps.append(out[0, action])
                obs = x[t + 1:t + 2] * action
            torch.stack(logps).sum().backward()
            optimizer.step()
    r = w.measurements()
    assert r.model_calls_per_step == 5 and r.model_calls_chained == 0 and r.model_calls_after_read == 4


def test_the_optimizer_that_delimits_the_steps_is_described_as_it_was_made() -> None:
    model, _, x = _tiny_step()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, foreach=False)
    with Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(5):
            model(x).sum().backward()
            optimizer.step()
    info = w.measurements().optimizer
    assert info is not None and info.kind == "Adam" and info.tensors == 4 and info.foreach is False
    assert info.elements == sum(p.numel() for p in model.parameters())
    assert w.optimizer_spec is not None and w.optimizer_spec.shapes[0] == tuple(next(model.parameters()).shape)


def test_autograd_anomaly_detection_is_timed_where_it_formats_stacks() -> None:
    model, optimizer, x = _tiny_step()
    with Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(10):
            model(x).sum().backward()
            optimizer.step()
    assert w.measurements().anomaly_ms_per_step == 0.0
    with torch.autograd.set_detect_anomaly(True), Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(10):
            model(x).sum().backward()
            optimizer.step()
    r = w.measurements()
    assert r.anomaly_ms_per_step is not None and 0 < r.anomaly_ms_per_step < r.median_ms
    import torch.fx.traceback as fx_traceback

    assert not hasattr(fx_traceback.format_stack, "__wrapped__")  # put back


def test_steps_limit_stops_the_loop_quietly() -> None:
    with Watcher(steps=5) as w:
        _seed_loop(100)
    assert w.measurements().steps_seen == 5


def test_dataloader_wait_and_checkpoints_are_phases() -> None:
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    model = nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with tempfile.TemporaryDirectory() as folder, Watcher(warmup=1, profile_steps=1) as w:
        for x, y in DataLoader(data, batch_size=8):
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            torch.save(model.state_dict(), os.path.join(folder, "m.pt"))
    r = w.measurements()
    assert r.phases["data"].host_ms > 0 and r.phases["checkpoint"].host_ms > 0
    assert r.loaders and r.loaders[0].num_workers == 0 and r.loaders[0].batch_size == 8
    # 8 batches, and the 9th ask that ended the pass; fetched row by row from a TensorDataset; for the probes
    # after the run, an item of its shapes and the dataset's rows (not the data)
    assert (r.loaders[0].batches, r.loaders[0].dataset, r.loaders[0].batchable) == (9, "TensorDataset", True)
    (item, rows), = w.loader_probes.values()
    assert [(t.shape, t.dtype) for t in item] == [((8,), torch.float32), ((), torch.int64)] and rows == 64
    assert float(item[0].abs().sum()) == 0.0


class _SlowStartSampler(torch.utils.data.Sampler[int]):
    """A sampler whose every pass starts with a 20 ms wait, as a loader's workers starting would."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):  # type: ignore[no-untyped-def]
        time.sleep(0.02)
        return iter(range(self.n))

    def __len__(self) -> int:
        return self.n


def test_a_loaders_starts_are_counted_and_timed_with_their_first_batch_as_data() -> None:
    data = TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,)))
    loader = DataLoader(data, batch_size=8, sampler=_SlowStartSampler(32))
    model = nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with Watcher(warmup=2, profile_steps=1) as w:
        for _ in range(6):  # 6 epochs of 4 steps: the sums start at step 3, in the first epoch
            for x, y in loader:
                loss = nn.functional.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    r = w.measurements()
    assert r.loader_starts == 5 and r.loader_start_ms is not None and r.loader_start_ms >= 20
    assert r.loader_start_share is not None and 0 < r.loader_start_share <= r.phases["data"].share
    assert r.phases["data"].share > 0.5  # 20 ms a start against tiny steps


def test_an_iterator_made_every_step_starts_and_stops_its_workers_every_step_as_data() -> None:
    data = TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,)))
    loader = DataLoader(data, batch_size=8, num_workers=1)
    model = nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(6):
            x, y = next(iter(loader))  # a new iterator, and a new worker, each step
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    r = w.measurements()
    assert r.loader_starts == 5
    # each dropped iterator joins its worker: data, with the starts, not the next line's "other"
    assert r.phases["data"].share > 0.8 and r.phases["other"].share < 0.1
    assert r.loader_start_share is not None and r.loader_start_share > 0.5


def test_the_profiler_windows_own_synchronize_is_not_the_scripts(monkeypatch) -> None:
    # torch.profiler synchronises the device as it stops; torch.cuda.synchronize is a no-op stand-in here
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    model, optimizer, x = _tiny_step()
    with Watcher(warmup=1, profile_steps=2) as w:
        close = w.window.on_step_end

        def on_step_end(index: int, warmup: int, cuda: bool) -> bool:
            torch.cuda.synchronize()  # as torch.profiler's stop() does
            return close(index, warmup, cuda)

        w.window.on_step_end = on_step_end  # type: ignore[method-assign]
        stop = w.window.close

        def close_at_stop() -> None:  # a run that ends inside the window closes it in stop()
            torch.cuda.synchronize()
            stop()

        w.window.close = close_at_stop  # type: ignore[method-assign]
        for _ in range(6):
            model(x).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            torch.cuda.synchronize()  # the script's own
    sites = [s for s in w.measurements().sync_sites if s.op == "torch.cuda.synchronize"]
    assert [s.count for s in sites] == [6] and sites[0].where.endswith(f"test_session.py:{_line_of('the script')}")


def _fake_cuda_events(monkeypatch) -> list[Any]:
    """torch.cuda.Event replaced by a fake with its interface, on a CPU-only machine; returns the list
    of the events made."""
    made: list[Any] = []

    class FakeEvent:
        def __init__(self, enable_timing: bool = False) -> None:
            made.append(self)

        def record(self) -> None: ...
        def query(self) -> bool: return True
        def synchronize(self) -> None: ...
        def elapsed_time(self, end: "FakeEvent") -> float: return 0.5

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    return made


def test_cuda_events_are_recorded_on_detailed_steps_only(monkeypatch) -> None:
    # each event is a CUDA call or two: dear next to a tiny GPU step; a copy to the device (h2d) is
    # timed at the step's edges on every step, its device span only on the detailed ones
    made = _fake_cuda_events(monkeypatch)
    model, optimizer, x = _tiny_step()
    with Watcher(warmup=1, profile_steps=0, detail_every=4) as w:
        w.device = "cuda"  # as if the model's first input had been on a GPU
        w._set_edges()
        made_by_kind = {True: 0, False: 0}
        for _ in range(2000):
            detailed, before = w.detailed, len(made)  # a step runs from one optimizer step to the next
            optimizer.zero_grad()
            w.enter("h2d")  # what the hook on Tensor.to does around a copy to the GPU, on every step
            w.exit("h2d")
            model(x).sum().backward()
            optimizer.step()
            made_by_kind[detailed] += len(made) - before
    records = w.measured.items
    assert {r.detailed for r in records} == {True, False}
    assert all((r.device_ms is not None) == r.detailed for r in records)
    assert made_by_kind[True] > 0 and made_by_kind[False] == 0


def test_making_and_recording_a_cuda_event_is_no_phases_time(monkeypatch) -> None:
    """On a detailed CUDA step every phase edge makes and records an event, a few us of the watcher's
    own each: after a phase closes, that used to fall into "other"."""
    made = _fake_cuda_events(monkeypatch)
    clock = [0.0]
    record = torch.cuda.Event.record

    def slow_record(self: Any) -> None:
        record(self)
        clock[0] += 1.0  # an event's cost, made obvious

    monkeypatch.setattr(torch.cuda.Event, "record", slow_record)
    w = Watcher(warmup=0, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=1)
    with w:
        w.device = "cuda"
        w._set_edges()
        for _ in range(20):
            w.enter("forward")
            clock[0] += 0.5
            w.exit("forward")
            clock[0] += 0.25  # the script's own other work
            w.step_ended(_OPTIMIZER)  # type: ignore[arg-type]
    assert len(made) == 40
    assert all(r.wall_s == pytest.approx(0.75) and r.phases["forward"] == pytest.approx(0.5)
               and r.phases["other"] == pytest.approx(0.25) for r in w.measured.items)


def _line_of(marker: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if marker in line and "_line_of" not in line)


def test_memory_stays_bounded_over_a_million_steps() -> None:
    class FakeOptimizer:
        pass

    opt = FakeOptimizer()
    w = Watcher(warmup=0, profile_steps=0, sample_hz=5)

    def steps(n: int) -> None:
        for _ in range(n):
            w.enter("forward")
            w.exit("forward")
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
    assert r.steps_seen == 1_000_000
    assert len(w.measured.items) <= RESERVOIR_SIZE and len(w.plot_steps) <= 400 and len(w.pending) <= 256
    assert w.detailed_steps is not None and len(w.detailed_steps.items) == RESERVOIR_SIZE
    assert grown < 256 * 1024  # 50 000 steps added under 256 KiB: no per-step growth


def test_sampled_detail_watches_some_steps_in_full_and_every_step_at_its_edges() -> None:
    call = torch.nn.Module.__call__
    with Watcher(warmup=1, profile_steps=1, detail_every=4) as w:
        watched = _seed_loop(600)
        now = torch.nn.Module.__call__
        assert now is call or getattr(now, "__wrapped__", None) is call
    assert watched == _seed_loop(600)
    assert torch.nn.Module.__call__ is call  # back as it was, paused or not when the run ended
    records = w.measured.items
    detailed = [r for r in records if r.detailed]
    light = [r for r in records if not r.detailed]
    assert detailed and light
    assert len(w.plot_steps) >= 50 + 32  # every detailed step: the first ones, then at least one more run
    assert all(r.phases["forward"] == 0 for r in light) and all(r.phases["forward"] > 0 for r in detailed)
    assert all(r.syncs == 1 and r.phases["sync"] > 0 for r in records)  # reads are timed on every step
    r = w.measurements()
    assert r.steps_seen == 600 and r.syncs_per_step == 1.0 and r.sync_sites[0].count == 600
    assert sum(p.share for p in r.phases.values()) == __import__("pytest").approx(1.0)
    assert r.phases["forward"].share > 0.05 and r.phases["backward"].share > 0.05
    assert all(s.detailed for s in r.step_samples)


def test_an_explicit_device_synchronize_is_a_sync_at_its_line(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    waited: list[int] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: waited.append(1))  # the GPU's wait, faked
    model, optimizer, x = _tiny_step()
    with Watcher(warmup=0, profile_steps=0) as w:
        for _ in range(5):
            model(x).sum().backward()
            torch.cuda.synchronize(); line = sys._getframe().f_lineno  # noqa: E702
            optimizer.step()
    assert len(waited) == 5
    r = w.measurements()
    assert r.syncs_per_step == 1.0 and r.phases["sync"].share > 0
    [site] = r.sync_sites
    assert (site.op, site.count, site.where) == ("torch.cuda.synchronize", 5, f"{__file__}:{line}")


def test_a_read_made_inside_torch_is_charged_to_the_users_line_that_called_it() -> None:
    # a function whose code lives in torch's directory, as torch's own helpers that read do
    inside = {}
    exec(compile("def norm(t):\n    return t.norm().item()\n", os.path.join(os.path.dirname(torch.__file__), "fake_helper.py"),
                 "exec"), inside)
    norm = inside["norm"]
    model, optimizer, x = _tiny_step()
    with Watcher(warmup=0, profile_steps=0) as w:
        for _ in range(4):
            model(x).sum().backward()
            norm(x); first = sys._getframe().f_lineno  # noqa: E702
            norm(x); second = sys._getframe().f_lineno  # noqa: E702
            optimizer.step()
    sites = {s.where: s.count for s in w.measurements().sync_sites}
    assert sites == {f"{__file__}:{first}": 4, f"{__file__}:{second}": 4}  # one torch line, two callers


_OPTIMIZER = object()


def _fake_clock_run(w: Watcher, clock: list[float], steps: int, checkpoint_every: int = 0) -> int:
    """`steps` steps of exactly 1 s on the fake clock `clock`: 0.75 s forward, then a 0.1 s host read
    and 0.15 s of other work, ended by one optimizer's step; returns how many of them ran quiet.
    With `checkpoint_every` N, every step whose index is N-1 modulo N also saves for 5 s."""
    frame, quiet = sys._getframe(), 0
    for _ in range(steps):
        quiet += w.steps_seen < w.quiet_until
        w.enter("forward")
        clock[0] += 0.75
        w.exit("forward")
        w.host_read("item", clock[0], clock[0] + 0.1, frame)
        clock[0] += 0.25
        if checkpoint_every and w.steps_seen % checkpoint_every == checkpoint_every - 1:
            w.enter("checkpoint")
            clock[0] += 5.0
            w.exit("checkpoint")
        w.step_ended(_OPTIMIZER)  # type: ignore[arg-type]
    return quiet


def test_quiet_steps_count_exactly_and_every_kept_step_times_only_itself() -> None:
    """Once the step sample is full, the steps it will pass over run quiet (their end only counts
    them): the sample keeps the very steps it would keep otherwise, each timed alone, and every
    count (steps, reads) stays exact, also when asked mid-run."""
    clock = [0.0]
    w = Watcher(warmup=2, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=4)
    w.measured = Reservoir(size=32, seed=1)
    w.start()
    try:
        quiet = _fake_clock_run(w, clock, 3000)
        assert w.measurements().steps_measured == 3000 - w.settled_at  # mid-run: quiet steps counted
        quiet += _fake_clock_run(w, clock, 2000)
    finally:
        w.stop()
    r = w.measurements()
    assert quiet > 3000 and r.steps_seen == 5000 and r.steps_measured == 5000 - w.settled_at
    same = Reservoir[int](size=32, seed=1)  # the sample's choice, offered every measured step in turn
    for i in range(r.steps_measured):
        same.add(i) if same.wants() else same.skip()
    assert sorted(rec.index - w.settled_at for rec in w.measured.items) == sorted(same.items)
    assert all(rec.wall_s == 1.0 and rec.syncs == 1 and rec.phases["forward"] == 0.75
               and abs(rec.phases["sync"] - 0.1) < 1e-9 for rec in w.measured.items)
    (site,) = r.sync_sites
    assert site.count == 5000 and abs(site.total_ms - 5000 * 100.0) < 1e-3


def test_reads_of_cpu_tensors_stop_counting_once_anything_is_copied_to_a_device() -> None:
    """`model.to("cuda")` comes before the loop, whose first `for` over a DataLoader reads CPU tensors
    (the sampler's `randperm(n).tolist()`, the seeds' `.item()`) before any forward reveals the device."""
    t = torch.arange(4)
    with Watcher(warmup=0, profile_steps=0, sample_hz=5) as w:
        t.sum().item()  # a CPU run so far: counted, as it would sync on a GPU
        w.h2d(64, False, False)  # what the hook on Tensor.to reports after a copy to a device
        t.tolist()
        t.sum().item()
    assert [s.count for s in w.measurements().sync_sites] == [1]


def test_a_cuda_run_goes_quiet_between_detailed_runs_only(monkeypatch) -> None:
    """On CUDA the detailed steps record events at their phase edges and are kept with them, so a quiet
    run (whose steps keep nothing) starts only on edges-only steps; there the steps run quiet as off
    CUDA, and the kept ones still time only themselves."""
    made = _fake_cuda_events(monkeypatch)
    clock = [0.0]
    w = Watcher(warmup=2, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=4)
    w.measured = Reservoir(size=16, seed=1)
    quiet = {True: 0, False: 0}
    with w:
        w.device = "cuda"  # as if the model's first input had been on a GPU
        w._set_edges()
        for _ in range(3000):
            detailed, before = w.detailed, len(made)
            quiet[detailed] += _fake_clock_run(w, clock, 1)
            assert detailed or len(made) == before
    assert quiet[False] > 1000 and quiet[True] == 0 and len(w.plot_steps) == PLOT_STEPS
    assert not w.events and w.measurements().steps_measured == 3000 - w.settled_at
    records = w.measured.items
    assert {r.detailed for r in records} == {True, False} and all(r.wall_s == 1.0 for r in records)
    assert all((r.device_ms is not None) == r.detailed for r in records)


def test_the_split_of_forward_backward_and_the_rest_comes_from_every_detailed_step() -> None:
    """Every seventh step's forward takes 0.75 s, the others' 0.25 s. A sample of 16 steps holds a
    handful of detailed ones; the clock's sums over every detailed step give the split exactly."""
    clock = [0.0]
    w = Watcher(warmup=2, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=4)
    w.measured = Reservoir(size=16, seed=1)
    detailed_at: list[bool] = []
    with w:
        for _ in range(5000):
            long = w.steps_seen % 7 == 0
            detailed_at.append(w.detailed)
            w.enter("forward")
            clock[0] += 0.75 if long else 0.25
            w.exit("forward")
            clock[0] += 0.25 if long else 0.75
            w.step_ended(_OPTIMIZER)  # type: ignore[arg-type]
    seconds, wall = w.clock.summed() or ({}, 0.0)
    summed = range(w.settled_at, w.settled_at + round(wall))  # 1 s steps (a quiet tail is left out)
    detailed = [i for i in summed if detailed_at[i]]
    exact = sum(0.75 if i % 7 == 0 else 0.25 for i in detailed) / len(detailed)
    shares = w.measurements().phases
    assert len(detailed) > 1000 and sum(r.detailed for r in w.measured.items) < 16
    assert shares["forward"].share == pytest.approx(exact, abs=1e-9)
    assert shares["other"].share == pytest.approx(1 - exact, abs=1e-9)


def test_forward_host_time_is_the_median_of_a_sample_of_detailed_steps_alone() -> None:
    """The step sample holds about one detailed step in `detail_every`; forward's median host time comes
    from a sample of the detailed steps alone, the very one a reservoir offered every detailed step
    would keep, each step timed alone although both samples' passed-over steps run quiet."""
    clock = [0.0]
    w = Watcher(warmup=2, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=4)
    w.measured = Reservoir(size=16, seed=1)
    detailed_at: list[bool] = []
    quiet = 0
    with w:
        for _ in range(8000):
            quiet += w.steps_seen < w.quiet_until
            detailed_at.append(w.detailed)
            forward = (w.steps_seen % 101) / 100  # 0 to 1 s, spread evenly: median 0.5 s
            w.enter("forward")
            clock[0] += forward
            w.exit("forward")
            clock[0] += 1.0 - forward
            w.step_ended(_OPTIMIZER)  # type: ignore[arg-type]
    assert w.detailed_steps is not None
    kept = w.detailed_steps.items
    same = Reservoir[int](seed=5)  # the detailed sample's choice, offered every measured detailed step in turn
    for i in range(w.settled_at, 8000):
        if detailed_at[i]:
            same.add(i) if same.wants() else same.skip()
    assert sorted(r.index for r in kept) == sorted(same.items) and len(kept) == RESERVOIR_SIZE
    assert all(r.detailed and abs(r.wall_s - 1.0) < 1e-6 and abs(r.phases["forward"] - (r.index % 101) / 100) < 1e-6
               for r in kept)  # each kept step timed alone (the fake clock's sums round in the last bits)
    assert sum(r.detailed for r in w.measured.items) < 16 and quiet > 4000
    assert w.measurements().phases["forward"].host_ms == pytest.approx(500, abs=100)


def test_hook_switches_grow_with_the_log_of_the_run_and_stop_at_the_process_budget(monkeypatch) -> None:
    """Every pause and resume of the per-call hooks modifies torch.nn.Module's class; CPython 3.13+
    stops caching a class's lookups after 1 000 modifications. Detailed runs double in length every
    SWITCHES_PER_DOUBLING runs (their share stays), and a process stops switching at its budget."""
    from trainspeed.watch import hooks as hooks_module

    def detailed_runs(steps: int, budget: int) -> tuple[Watcher, int, int]:
        monkeypatch.setattr(hooks_module, "RESUME_BUDGET", budget)
        monkeypatch.setattr(hooks_module, "_resumes", [0])
        clock = [0.0]
        w = Watcher(warmup=0, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=2)
        detailed = 0
        with w:
            for _ in range(steps):
                detailed += w.detailed
                _fake_clock_run(w, clock, 1)
        return w, hooks_module._resumes[0], detailed

    w, resumes, detailed = detailed_runs(40_000, 10**6)
    assert SWITCHES_PER_DOUBLING * 2 < resumes < SWITCHES_PER_DOUBLING * 4  # 64-step runs: over 300 of them
    assert 0.4 < detailed / 40_000 < 0.6 and not w.notes
    w, resumes, detailed = detailed_runs(40_000, 20)
    assert resumes == 21  # the budget's 20, then stop() puts the hooks back in before taking every patch out
    assert len(w.notes) == 1 and "detailed steps stopped" in w.notes[0]
    assert not w.detailed and detailed < 20 * DETAIL_BLOCK * 2


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
        _fake_clock_run(w, clock, 200)
    assert w.window.ops_per_step is not None  # the window did close, slowly
    seconds, wall = w.clock.summed() or ({}, 0.0)
    assert wall == pytest.approx(200 - w.settled_at)  # 1 s steps, every one summed (no quiet tail yet)
    assert all(r.wall_s == 1.0 for r in w.measured.items)
    assert w.measurements().phases["other"].share == pytest.approx(0.15)


def test_steps_limit_is_exact_across_quiet_steps() -> None:
    clock = [0.0]
    w = Watcher(warmup=0, profile_steps=0, sample_hz=5, now=lambda: clock[0], steps=2345)
    w.measured = Reservoir(size=16, seed=1)
    with w:
        _fake_clock_run(w, clock, 10_000)
    assert w.steps_seen == 2345 and w.measurements().steps_measured == 2345 - w.settled_at


def test_an_all_reduce_turning_up_in_a_quiet_run_is_not_taken_for_one_steps() -> None:
    """A DDP made in the middle of a quiet run: the first all-reduce spans come in a step whose clock
    started with the quiet steps; that step is passed over, and the later steps are timed alone."""
    clock = [0.0]
    w = Watcher(warmup=0, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=10**9)
    w.measured = Reservoir(size=16, seed=1)
    with w:
        _fake_clock_run(w, clock, 2000)
        while w.steps_seen + 1 >= w.quiet_until:  # run on to a step well inside a quiet run
            _fake_clock_run(w, clock, 1)
        w.comm.backend = "gloo"  # what CommTimer notes when a DDP is made
        w.comm.spans.append((clock[0], clock[0] + 0.2, 1024))
        kept_before = w.measured.items[:]
        _fake_clock_run(w, clock, 1000)
    assert w.quiet_until == 0 and not w.comm.spans and not w.comm_steps.items
    assert all(rec.wall_s == 1.0 for rec in w.measured.items) and w.measured.items != kept_before


def test_a_rare_checkpoint_gets_its_exact_share_whichever_steps_the_sample_keeps() -> None:
    """A 5 s checkpoint every 100th step of a 1 s loop: a sample of 16 steps of 5 000 holds one
    checkpoint step or none, but the checkpoint and sync shares come from sums over every measured
    step, quiet ones included (those the script ends inside a quiet run aside)."""
    clock = [0.0]
    w = Watcher(warmup=2, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=10**9)
    w.measured = Reservoir(size=16, seed=1)
    with w:
        _fake_clock_run(w, clock, 5000, checkpoint_every=100)
    seconds, wall = w.clock.summed() or ({}, 0.0)
    steps = round(seconds["sync"] / 0.1)  # one 0.1 s read per step: how many steps the sums hold
    checkpoints = sum(1 for i in range(w.settled_at, w.settled_at + steps) if i % 100 == 99)
    assert steps > 4900 and abs(seconds["sync"] - 0.1 * steps) < 1e-6
    assert abs(seconds["checkpoint"] - 5.0 * checkpoints) < 1e-6 and abs(wall - steps - 5.0 * checkpoints) < 1e-6
    assert sum(rec.phases["checkpoint"] > 0 for rec in w.measured.items) <= 1  # the sample alone would miss it
    r = w.measurements()
    assert abs(r.phases["checkpoint"].share - seconds["checkpoint"] / wall) < 1e-9
    assert abs(r.phases["sync"].share - seconds["sync"] / wall) < 1e-9


class _TimedSGD(torch.optim.SGD):
    """An SGD of its own class: watching it patches this class's step, not every SGD's."""


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
    opt = _TimedSGD(model.parameters(), lr=0.1)
    model.register_forward_pre_hook(tick(0.5))  # forward: 0.5 s
    x = torch.ones(4, 3)
    original_step = _TimedSGD.__dict__.get("step")  # its own, or none (then SGD's hooked step serves it)
    head = optimizer_module.register_optimizer_step_pre_hook(tick(0.3))  # before the watcher's pre hook
    w = Watcher(warmup=2, profile_steps=0, sample_hz=5, now=lambda: clock[0], detail_every=1)
    keep = w._keep_step

    def slow_keep(record: Any) -> None:  # the watcher's bookkeeping, made obvious
        keep(record)
        clock[0] += 7.0

    w._keep_step = slow_keep  # type: ignore[method-assign]
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
    assert _TimedSGD.__dict__.get("step") is original_step  # put back
    later = w.measured.items  # from step 2: the class is patched as the first step ends
    assert len(later) == 38 and all(r.wall_s == pytest.approx(1.1) for r in later)  # 0.5 + 0.3 + 0.2 + 0.1, no 7 s
    assert all(r.phases["optimizer"] == pytest.approx(0.5) and r.phases["other"] == pytest.approx(0.1)
               for r in later)
    result = w.measurements()
    assert result.phases["optimizer"].share == pytest.approx(0.5 / 1.1)
    assert result.phases["other"].share == pytest.approx(0.1 / 1.1)


def test_a_step_wrapper_someone_kept_calls_straight_through_once_the_watcher_is_gone() -> None:
    """An LR scheduler made while watched wraps the optimizer's step as it finds it (the watcher's
    wrapper); after the watcher stops, that reference still steps, and touches no clock."""
    model = nn.Linear(3, 1)
    opt = _TimedSGD(model.parameters(), lr=0.1)
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
    model, opt, x = _tiny_step()
    y = torch.zeros(8, dtype=torch.long)
    with Watcher(warmup=1, profile_steps=2) as w:
        for _ in range(10):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss.item()
    r = w.measurements()
    assert r.other_ops_per_step == 3
    assert r.other_op_ms_per_step is not None and r.other_op_ms_per_step > 0
    assert r.ops_per_step is not None and r.ops_per_step > 10


def _evaluating_loop(steps: int, every: int, frozen_norm: bool = False, eval_mode: bool = True) -> None:
    """A small model trained on fixed data, evaluated (model.eval() ... model.train()) every `every` steps; with
    `frozen_norm`, trained in eval mode throughout (batch norm frozen, as fine-tuning does); without `eval_mode`,
    evaluated under torch.no_grad() alone, in training mode."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 8), torch.randint(0, 2, (32,))
    if frozen_norm:
        model.eval()
    for step in range(steps):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)  # a no_grad span every step, with no model call
        if not frozen_norm and step % every == every - 1:
            model.train(not eval_mode)
            with torch.no_grad():
                for _ in range(20):
                    model(x)
                    time.sleep(0.0005)
            model.train()
    model.eval()  # a final evaluation with no train() after it: not one of the run's


def test_evaluations_between_steps_are_counted_with_their_share_of_the_run() -> None:
    with Watcher(warmup=3, profile_steps=0) as w:
        _evaluating_loop(60, 10)
    ev = w.measurements().evaluation
    # those ending after steps 10, 20, ... 60: the measured steps start after the 3 warm-up steps
    assert ev is not None and ev.count == 6 and ev.every_steps == 10
    assert ev.mean_ms >= 20 * 0.5 and 0.2 < ev.share < 1.0  # 20 sleeps of 0.5 ms against 10 tiny steps


def test_an_evaluation_under_no_grad_alone_is_counted_and_said_so() -> None:
    with Watcher(warmup=3, profile_steps=0) as w:
        _evaluating_loop(60, 10, eval_mode=False)
    ev = w.measurements().evaluation
    assert ev is not None and ev.by == "no_grad" and ev.count == 6 and ev.every_steps == 10
    assert ev.mean_ms >= 20 * 0.5 and 0.2 < ev.share < 1.0
    with Watcher(warmup=3, profile_steps=0) as w:
        _evaluating_loop(60, 10)
    assert w.measurements().evaluation.by == "model.eval()"  # not counted twice inside model.eval()'s span


def test_the_model_under_no_grad_on_every_step_is_the_steps_work_not_an_evaluation() -> None:
    # a GAN's generator run under no_grad for the critic's step, an agent choosing its action: every step
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 8), torch.randint(0, 2, (32,))
    with Watcher(warmup=3, profile_steps=0) as w:
        for _ in range(40):
            with torch.inference_mode():
                target = model(x).argmax(1)
            loss = nn.functional.cross_entropy(model(x), (target + y) % 2)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    assert w.measurements().evaluation is None


def test_a_model_trained_in_eval_mode_is_not_an_evaluation() -> None:
    with Watcher(warmup=3, profile_steps=0) as w:
        _evaluating_loop(30, 10, frozen_norm=True)
    assert w.measurements().evaluation is None


def _shuffled_loader_loop() -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(2000, 64), torch.randint(0, 2, (2000,)))
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.Adam(model.parameters(), 1e-3)
    for x, y in DataLoader(data, batch_size=32, shuffle=True):
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test_asking_for_the_result_leaves_torchs_random_state_as_unwatched() -> None:
    # the probes after the run (a DataLoader's shuffle and seeds, fresh tensors for the optimizer) draw random
    # numbers: a script that asks for the result and trains on must draw what it would have unwatched
    _shuffled_loader_loop()
    unwatched = torch.rand(3)
    with Watcher() as w:
        _shuffled_loader_loop()
    report = w.result()
    assert report.handover is not None or sys.platform != "linux"  # the loader probes did run
    assert torch.equal(torch.rand(3), unwatched)


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
    model, optimizer, _ = _tiny_step()
    with Watcher(warmup=2, profile_steps=0, sample_hz=500) as w:
        for x in _busy_batches(60, 0.003):
            loop_line = f"{__file__}:{sys._getframe().f_lineno - 1}"
            model(x).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
    r = w.measurements()
    generator = _busy_batches.__code__.co_firstlineno
    # samples in the generator's lines, each line with a part of its time
    assert any(generator < int(s.where.rsplit(":", 1)[1]) <= generator + 12 for s in r.other_sites)
    top = r.loop_sites[0]
    assert top.where == loop_line and top.code.startswith("for x in _busy_batches")
    assert top.share_of_other > r.other_sites[0].share_of_other


def test_the_cpu_window_counts_the_ops_of_the_edge_phases_apart() -> None:
    # a TensorDataset batched row by row: every row is a `dataset[i]` (one index op per tensor), the batch a stack
    model, optimizer, _ = _tiny_step()
    data = TensorDataset(torch.randn(512, 4), torch.randn(512, 3))
    with Watcher(warmup=2, profile_steps=3) as w:
        for x, y in DataLoader(data, batch_size=8):
            loss = ((model(x) - y) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss.item()
    r = w.measurements()
    assert r.edge_ops_per_step is not None and r.ops_per_step is not None
    # 8 rows x 2 tensors indexed, 2 stacks, and the read's one op at least; the step's own ops are not among them
    assert 8 * 2 + 2 + 1 <= r.edge_ops_per_step < r.ops_per_step - 10


def test_a_teacher_called_first_under_no_grad_is_not_taken_for_the_model() -> None:
    torch.manual_seed(0)
    teacher = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 4))
    student = nn.Linear(8, 4)
    optimizer = torch.optim.SGD(student.parameters(), lr=0.1)
    x = torch.randn(16, 8)
    with Watcher(warmup=2, profile_steps=0) as w:
        for _ in range(10):
            with torch.no_grad():
                target = teacher(x).softmax(1)
            loss = nn.functional.kl_div(student(x).log_softmax(1), target, reduction="batchmean")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    assert w.model is not None and w.model() is student
    assert w.measurements().evaluation is None  # the teacher's no_grad calls are not the model's


def test_a_sleeping_thread_of_the_scripts_leaves_the_samples_on_the_lines_that_ran() -> None:
    # tqdm's monitor thread, started by any progress bar, sleeps all run long: the sampler still takes the short
    # switch interval, and the generator's busy lines get their samples (with the script's 5 ms interval they got
    # none: the samples landed where the main thread released the GIL, its torch ops)
    import threading

    release = threading.Event()
    sleeper = threading.Thread(target=release.wait, daemon=True)
    sleeper.start()
    try:
        model, optimizer, _ = _tiny_step()
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
    on_them = sum(s.samples for s in w.measurements().other_sites if int(s.where.rsplit(":", 1)[1]) in busy_lines)
    assert on_them >= 5
