"""The sharded collectives' timer and FSDP2's units, on a one-rank gloo group in this process: what is timed, as
which phase, in forward or backward, synchronous or waited for."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist

from trainspeed.watch.collectives import Call, CollectiveTimer, summarise
from trainspeed.watch.comm import union_s
from trainspeed.watch.fsdp_units import UnitsTracker


@pytest.fixture
def group() -> Iterator[None]:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def all_gather(out: torch.Tensor, inp: torch.Tensor, **kw: object) -> object:
    """torch >= 2.12's name, else the older one (what FSDP2 calls in each)."""
    return (getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor)(out, inp, **kw)


def reduce_scatter(out: torch.Tensor, inp: torch.Tensor, **kw: object) -> object:
    return (getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor)(out, inp, **kw)


def timer() -> tuple[CollectiveTimer, list[str]]:
    edges: list[str] = []
    t = CollectiveTimer(lambda p: edges.append(f"+{p}"), lambda p: edges.append(f"-{p}"))
    return t, edges


def test_union_and_a_step_summary() -> None:
    assert union_s([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)]) == pytest.approx(4.0)
    calls = [Call("all_gather", False, 100, 0.0, 1.0, 1.0), Call("all_gather", True, 100, 2.0, 2.5, 0.25),
             Call("reduce_scatter", True, 100, 2.2, 3.0, 0.8)]
    step = summarise(calls)
    assert step["all_gather"].calls == 2 and step["all_gather"].nbytes == 200
    assert step["all_gather"].comm_s == pytest.approx(1.5) and step["all_gather"].exposed_s == pytest.approx(1.25)
    assert (step["all_gather"].backward_calls, step["all_gather"].backward_exposed_s) == (1, 0.25)
    assert step["reduce_scatter"].backward_exposed_s == pytest.approx(0.8)


def test_a_synchronous_collective_is_the_comm_phase_and_an_async_one_its_wait(group: None) -> None:
    t, edges = timer()
    originals = (dist.all_gather_into_tensor, dist.reduce_scatter_tensor, dist.distributed_c10d.Work.wait)
    t.install()
    try:
        out, inp = torch.zeros(8), torch.ones(8)
        all_gather(out, inp)
        assert edges == ["+comm", "-comm"] and torch.equal(out, inp)
        work = reduce_scatter(torch.zeros(8), torch.ones(8), async_op=True)
        assert work is not None and len(t.calls) == 1  # in flight until waited for
        work.wait()  # type: ignore[attr-defined]
        assert edges == ["+comm", "-comm"] * 3
        calls = t.take()
        assert [(c.kind, c.nbytes, c.backward) for c in calls] == [("all_gather", 32, False),
                                                                   ("reduce_scatter", 32, False)]
        assert all(c.waited_s > 0 and c.done >= c.issued for c in calls)
        assert t.waited_s == pytest.approx(sum(c.waited_s for c in calls)) and t.used and not t.take()
        # a wait on a work the timer did not issue is left alone; the probe's calls are not the run's
        with t.untimed():
            all_gather(out, inp)
        assert not t.calls and len(edges) == 6
    finally:
        t.uninstall()
    assert (dist.all_gather_into_tensor, dist.reduce_scatter_tensor, dist.distributed_c10d.Work.wait) == originals


def test_a_collective_in_backward_is_told_so(group: None) -> None:
    t, _ = timer()
    t.install()
    try:
        x = torch.ones(4, requires_grad=True)

        def gather_in_backward(grad: torch.Tensor) -> torch.Tensor:
            out = torch.zeros(4)
            all_gather(out, grad)
            return out

        y = x * 2
        y.register_hook(gather_in_backward)
        y.sum().backward()
        assert [c.backward for c in t.take()] == [True]
    finally:
        t.uninstall()


def test_fully_shard_units_and_their_hooks(group: None) -> None:
    from torch.distributed.fsdp import fully_shard  # the wrapper is read from the module at each call

    t, _ = timer()
    units = UnitsTracker(lambda: t.waited_s)
    t.install()
    units.install()
    try:
        import torch.distributed.fsdp as fsdp

        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
        for layer in (model[0], model[1]):
            fsdp.fully_shard(layer)
        fsdp.fully_shard(model, reshard_after_forward=False)
        model(torch.randn(3, 4)).sum().backward()
        layout = units.part()
        assert layout is not None
        assert layout.units == 3 and layout.unit_bytes == [4 * (4 * 8 + 8), 4 * (8 * 8 + 8), 4 * (8 * 2 + 2)]
        assert layout.root_bytes == 4 * (8 * 2 + 2) and layout.resharding == 2
        host = units.take_host()
        assert {"pre_forward", "post_forward", "pre_backward", "post_backward"} <= set(host)
        assert all(v >= 0 for v in host.values()) and not units.take_host()
    finally:
        units.uninstall()
        t.uninstall()
    assert fully_shard is fsdp.fully_shard or not getattr(fsdp.fully_shard, "_trainspeed", False)


def test_fsdp_is_wrapped_as_the_script_imports_it_and_never_imported_for_it() -> None:
    """Importing torch.distributed.fsdp (DTensor, sympy) cost every watched script half a second of start-up; the
    tracker wraps fully_shard and FSDP2's hooks as their modules load instead, and undoes it at the end."""
    import subprocess
    import sys

    code = """
import sys, torch
from trainspeed.watch.fsdp_units import UnitsTracker
units = UnitsTracker(lambda: 0.0)
units.install()
assert "torch.distributed.fsdp" not in sys.modules, "imported for the script"
from torch.distributed.fsdp import fully_shard
from torch.distributed.fsdp._fully_shard._fsdp_state import FSDPState
assert getattr(fully_shard, "_trainspeed", False) and getattr(FSDPState._pre_forward, "_trainspeed", False)
units.uninstall()
import torch.distributed.fsdp as fsdp
assert not getattr(fsdp.fully_shard, "_trainspeed", False) and not getattr(FSDPState._pre_forward, "_trainspeed", False)
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
