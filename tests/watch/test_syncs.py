"""SyncCounter counts host reads as they happen, once each, and leaves torch as it found it."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from trainspeed.watch import SyncCounter


def test_each_kind_of_host_read_counts_once() -> None:
    x, v = torch.tensor(2.5), torch.arange(3.0)
    with SyncCounter() as c:
        x.item()
        _ = f"{x:.3f}"  # __format__ calls item() inside: still one read
        float(x)
        int(x)
        bool(x)
        v.tolist()
        repr(v)  # formatting reads many elements: one read
        np.asarray(v)
    assert c.count == 8
    assert c.by_op["item"] == 1 and c.by_op["__format__"] == 1 and c.by_op["__repr__"] == 1


def test_moves_within_the_host_are_not_reads() -> None:
    v = torch.arange(3.0)
    with SyncCounter() as c:
        v.cpu()
        v.to("cpu")
        v.to(torch.float64)
        v + 1
    assert c.count == 0


def test_values_are_untouched_and_methods_restored() -> None:
    before = {name: torch.Tensor.__dict__.get(name) for name in ("item", "__format__", "tolist")}
    x = torch.tensor(1.25)
    with SyncCounter():
        assert x.item() == 1.25 and f"{x:.2f}" == "1.25" and float(x) == 1.25
    after = {name: torch.Tensor.__dict__.get(name) for name in ("item", "__format__", "tolist")}
    assert before == after


def test_nested_counters_both_count() -> None:
    x = torch.tensor(1.0)
    with SyncCounter() as outer:
        x.item()
        with SyncCounter() as inner:
            x.item()
        x.item()
    assert (outer.count, inner.count) == (3, 1)


def test_a_training_step_makes_no_host_read() -> None:
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with SyncCounter() as c:
        loss = torch.nn.functional.cross_entropy(model(torch.randn(8, 4)), torch.randint(0, 3, (8,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert c.count == 0


def test_a_counter_for_a_gpu_run_leaves_cpu_tensors_reads_out() -> None:
    # on a GPU run, reading a CPU tensor (a DataLoader sampler's randperm(n).tolist()) waits for nothing
    t = torch.arange(4)
    with SyncCounter() as gpu_run:
        gpu_run.count_device_reads_only()
        t.tolist()
        t.sum().item()
        f"{t[0]}"
    assert gpu_run.count == 0
    with SyncCounter() as gpu_run, SyncCounter() as cpu_run:  # a counter that counts them all wins
        gpu_run.count_device_reads_only()
        t.sum().item()
    assert cpu_run.count == 1 and gpu_run.count == 1
    with SyncCounter() as again:  # the setting belongs to its counter, not to the process
        t.sum().item()
    assert again.count == 1


def test_reads_of_cpu_tensors_are_told_from_synchronisations() -> None:
    # a read of a CPU tensor waits for nothing: tallied with its host flag set, and its seconds are not the
    # synchronisations' (time_reads, which a quiet run's catch-up adds to the sync phase)
    seen: list[tuple[str, bool]] = []
    with SyncCounter() as c:
        before = c.time_reads(lambda op, t0, t1, frame, host: seen.append((op, host)))
        torch.tensor(2.0).item()
        int(torch.tensor(3))
        SyncCounter.record("torch.cuda.synchronize", 0.0, 0.5, sys._getframe())  # a synchronisation seen elsewhere
        after = c.time_reads(None)
    assert seen == [("item", True), ("__int__", True), ("torch.cuda.synchronize", False)]
    assert after - before == 0.5
    assert {(op, host) for _, op, _, _, host in c.sites()} == set(seen)


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(n for n, text in enumerate(f, start=1) if text.rstrip().endswith(f"# {marker}"))


def test_reads_are_tallied_by_their_line_and_a_counter_sees_only_its_own() -> None:
    x = torch.tensor(3.0)
    with SyncCounter() as outer:
        for _ in range(4):
            x.item()  # four reads
        with SyncCounter() as inner:  # starts after those four: they are not its own
            x.item()  # one read
            float(x)  # another
    mine = {(where.rsplit(":", 1)[1], op, n) for where, op, n, _, _ in inner.sites()}
    assert mine == {(str(_line_of("one read")), "item", 1), (str(_line_of("another")), "__float__", 1)}
    theirs = {(where.rsplit(":", 1)[1], op): n for where, op, n, _, _ in outer.sites()}
    assert theirs[(str(_line_of("four reads")), "item")] == 4 and outer.count == 6
    assert all(seconds >= 0 for _, _, _, seconds, _ in outer.sites()) and outer.seconds() > 0
    assert all(host for *_, host in outer.sites())  # CPU tensors: no synchronisation
    from trainspeed.watch.syncs import _REGISTRY

    assert not _REGISTRY.tally and not _REGISTRY.active  # nothing kept once the last counter leaves
    assert inner.count == 2 and outer.by_op == {"item": 5, "__float__": 1}  # figures kept after exit


def test_a_counter_can_stop_and_restart_its_callback_and_still_counts_every_read() -> None:
    x, calls = torch.tensor(1.0), []
    with SyncCounter(on_read=lambda op, t0, t1, frame, host: calls.append((op, t1 >= t0))) as c:
        x.item()
        c.time_reads(None)
        x.item()
        x.tolist()
        c.time_reads(lambda op, t0, t1, frame, host: calls.append((op, frame.f_code.co_name)))
        x.tolist()
    this = sys._getframe().f_code.co_name
    assert c.count == 4 and calls == [("item", True), ("tolist", this)]


def test_a_read_seen_by_another_wrapper_counts_for_every_active_counter() -> None:
    seen = []
    with SyncCounter() as a, SyncCounter(on_read=lambda op, t0, t1, frame, host: seen.append((op, t1 - t0))) as b:
        SyncCounter.record("torch.cuda.synchronize", 1.0, 1.5, sys._getframe())  # a synchronize
    for counter in (a, b):
        [(where, op, n, seconds, host)] = counter.sites()
        assert not host
        assert where.endswith(f":{_line_of('a synchronize')}") and (op, n, seconds) == ("torch.cuda.synchronize", 1, 0.5)
    assert seen == [("torch.cuda.synchronize", 0.5)]


def test_reads_on_another_thread_nest_on_their_own() -> None:
    # while the watched thread is inside a read, a read on a second thread still counts, and a read inside a read
    # there counts once. A TorchFunctionMode runs the script's code inside a read: torch hands the mode the
    # wrapped method, which the mode calls again (a read inside a read, counted once)
    import threading

    from torch.overrides import TorchFunctionMode

    from trainspeed.watch.syncs import reading

    x = torch.tensor(2.5)
    seen: list[bool] = []

    def other() -> None:
        _ = f"{x:.2f}"  # __format__ calls item() inside: one read
        x.item()
        seen.append(reading())

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if getattr(func, "__name__", "") == "item":
                seen.append(reading())  # inside the read of x.item() below
                t = threading.Thread(target=other)
                t.start()
                t.join()
            return func(*args, **(kwargs or {}))

    with SyncCounter() as c:
        with Mode():
            assert x.item() == 2.5  # the mode's own func(*args) inside: one read
        seen.append(reading())
    assert c.by_op == {"item": 2, "__format__": 1} and seen == [True, False, False]


def _read(method: object, x: torch.Tensor) -> object:
    return method(x)  # one place: its tally entry is remembered by the wrapper between reads  # type: ignore[operator]


def test_a_wrapper_kept_after_its_counter_left_counts_for_the_next_one() -> None:
    x = torch.tensor(1.0)
    with SyncCounter():
        kept = torch.Tensor.item  # the wrapper, as a script's `read = torch.Tensor.item` would keep it
        for _ in range(3):
            _read(kept, x)
    with SyncCounter() as later:
        for _ in range(2):
            _read(kept, x)  # the old wrapper, from the same place, into the table the new counter reads
    assert later.count == 2


def test_switching_the_callback_tells_the_seconds_read_so_far() -> None:
    # the watcher takes a quiet run's read seconds from two switches, without building the sites
    with SyncCounter() as c:
        SyncCounter.record("item", 0.0, 2.0, sys._getframe())
        start, seconds = c.time_reads(None), c.seconds()
        SyncCounter.record("item", 1.0, 1.25, sys._getframe())
        SyncCounter.record("tolist", 3.0, 3.5, sys._getframe())
        end = c.time_reads(lambda *a: None)
    assert (start, seconds) == (2.0, 2.0) and end - start == 0.75 == c.seconds() - seconds


def test_the_reads_without_arguments_count_through_their_slots_and_keep_torchs_errors() -> None:
    x, i = torch.tensor(3.0), torch.tensor(2)
    with SyncCounter() as c:
        assert bool(x) and int(x) == 3 and complex(x) == 3 and [10, 20, 30][i] == 30 and x.tolist() == 3.0
        with pytest.raises(TypeError, match="takes no arguments"):
            x.item(1)  # passed to torch, which raises its own error: no read
    assert c.by_op == {"__bool__": 1, "__int__": 1, "__complex__": 1, "__index__": 1, "tolist": 1}


def _optimizer_steps(optimizer_class: type, steps: int, **options: object) -> SyncCounter:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    optimizer = optimizer_class(model.parameters(), **options)
    x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
    with SyncCounter() as c:
        for _ in range(steps):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss.item()  # the script's one read a step
    return c


@pytest.mark.parametrize("optimizer_class", [torch.optim.Adam, torch.optim.AdamW, torch.optim.NAdam, torch.optim.RAdam])
@pytest.mark.parametrize("foreach", [False, True])
def test_an_optimizers_step_counters_which_torch_keeps_on_the_host_are_no_reads(optimizer_class: type, foreach: bool) -> None:
    # Adam and its kin read each parameter's step counter with .item() on every step; without capturable or fused,
    # torch keeps those on the host on every device: no sync, and not the script's `optimizer.step()` line's read
    c = _optimizer_steps(optimizer_class, 3, foreach=foreach)
    assert c.by_op == {"item": 3} and [n for _, _, n, _, _ in c.sites()] == [3]


def test_the_optimizers_reads_of_values_on_a_device_still_count(monkeypatch: pytest.MonkeyPatch) -> None:
    # ASGD reads eta and its step counter through _get_value, for each of the 4 parameter tensors, each step; it keeps
    # eta on the parameters' device, so on a GPU those reads wait for it. Here the tensors are on the CPU; then the
    # wrapper is told they are not (what is_cpu says of a CUDA tensor)
    on_host = _optimizer_steps(torch.optim.ASGD, 2, foreach=False).count
    monkeypatch.setattr(torch.Tensor, "is_cpu", property(lambda t: False))
    on_device = _optimizer_steps(torch.optim.ASGD, 2, foreach=False).count
    assert on_device - on_host == 2 * 4 * 2


def test_a_read_made_inside_an_installed_library_is_charged_to_the_users_line(tmp_path: Path) -> None:
    # numpy's memmap indexes in Python (numpy/_core/memmap.py): a 0-d tensor as a slice bound is read there,
    # by the user's line that sliced

    path = tmp_path / "data.bin"
    np.arange(1000, dtype=np.uint16).tofile(path)
    data = np.memmap(path, dtype=np.uint16, mode="r")
    ix = torch.randint(0, 900, (4,))
    with SyncCounter() as counter:
        batch = [data[i:i + 8] for i in ix]  # the user's line
    line = sys._getframe().f_lineno - 1
    assert len(batch) == 4
    assert [(where, op, n) for where, op, n, _, _ in counter.sites()] == [(f"{__file__}:{line}", "__index__", 8)]
