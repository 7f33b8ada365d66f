"""The CPU's op/FLOP window: dispatch modes, no torch.profiler."""

from __future__ import annotations

import pytest
import torch

from trainspeed.watch.profile_window import OpCounter, ProfileWindow, busy_ns


def test_op_counter_counts_dispatched_ops_and_leaves_results_alone() -> None:
    a, b = torch.randn(4, 3), torch.randn(3, 2)
    with OpCounter() as counter:
        out = torch.relu(a @ b) + 1
    assert counter.ops == 3  # mm, relu, add
    assert torch.equal(out, torch.relu(a @ b) + 1)


def test_cpu_window_counts_per_step_without_the_profiler() -> None:
    window = ProfileWindow(steps=2)
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    profiled = []
    for index in range(5):  # warm-up 1: steps 1 and 2 are counted
        (a @ b).sum()
        profiled.append(window.on_step_end(index, warmup=1, cuda=False))
    assert profiled == [False, True, True, False, False]
    assert window.ops_per_step == 2 and window.kernels_per_step is None
    assert window.flops_per_step == 2 * 8 * 16 * 4


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


def test_op_counter_counts_and_times_the_ops_outside_apart_and_not_the_profilers_own() -> None:
    a, b = torch.randn(4, 3), torch.randn(3, 2)
    outside = [False]
    with OpCounter(lambda: outside[0]) as counter:
        with torch.autograd.profiler.record_function("a range"):  # torch's own range ops: no work
            a @ b
            outside[0] = True
            torch.relu(a) + 1
    assert counter.ops == 3 and counter.outside_ops == 2  # mm inside; relu and add outside
    assert counter.outside_s > 0


def test_the_profiler_window_counts_flops_once_with_the_op_counter_inside() -> None:
    # the CUDA window (torch.profiler) run on the CPU: the op counter inside it makes the profiler
    # record every op twice, the second inside the first; FLOPs and ops are still counted once
    model, x = torch.nn.Linear(32, 16), torch.randn(64, 32)
    figures = []
    for outside in (None, lambda: True):
        window = ProfileWindow(steps=2, outside=outside)
        for index in range(4):
            model(x).sum().backward()
            window.on_step_end(index, warmup=1, cuda=True)
        figures.append((window.ops_per_step, window.flops_per_step, window.outside_ops_per_step))
    (ops, flops, none), (ops_counted, flops_counted, outside_ops) = figures
    assert flops == flops_counted == 2 * (2 * 64 * 32 * 16)  # forward's addmm, backward's weight-grad mm
    assert ops == ops_counted and none is None and outside_ops and outside_ops >= ops


def test_cpu_window_times_each_op_by_dtype_with_its_flops() -> None:
    window = ProfileWindow(steps=2)
    a, b = torch.randn(8, 16, dtype=torch.float64), torch.randn(16, 4, dtype=torch.float64)
    c, d = torch.randn(8, 16), torch.randn(16, 4)
    for index in range(4):  # warm-up 1: steps 1 and 2 are counted
        (a @ b).relu()
        (c @ d).relu()
        window.on_step_end(index, warmup=1, cuda=False)
    rows = {(row.op, row.dtype): row for row in window.op_times or []}
    assert set(rows) == {("aten.mm", "float64"), ("aten.mm", "float32"), ("aten.relu", "float64"),
                         ("aten.relu", "float32")}
    assert all(row.calls == 1 and row.ms > 0 for row in rows.values())
    assert rows["aten.mm", "float64"].arithmetic and not rows["aten.relu", "float64"].arithmetic
    # mm ran in two dtypes: FlopCounterMode counts by op, so neither gets a share it cannot prove
    assert rows["aten.mm", "float64"].flops is None and rows["aten.relu", "float32"].flops is None
    ms = [row.ms for row in window.op_times or []]
    assert ms == sorted(ms, reverse=True)
    assert window.op_ms_per_step == sum(ms)


def test_op_table_keeps_the_slowest_ops_and_every_one_with_arithmetic() -> None:
    from trainspeed.watch.profile_window import op_rows, op_table

    ops = torch.ops.aten
    step = {(ops.add.default.overloadpacket, torch.float32): [10, 0.010],
            (ops.mul.default.overloadpacket, torch.float32): [5, 0.005],
            (ops.mm.default.overloadpacket, torch.bfloat16): [3, 0.001],
            (ops.detach.default.overloadpacket, None): [1, 0.0005]}
    rows = op_table(op_rows([step, step], {ops.mm.default.overloadpacket: 6e6}), keep=1)
    assert [(r.op, r.dtype) for r in rows] == [("aten.add", "float32"), ("aten.mm", "bfloat16")]
    assert rows[1].arithmetic and rows[1].flops == 3e6 and rows[1].calls == 3 and rows[1].ms == pytest.approx(1.0)


def test_a_stall_in_one_step_of_the_window_is_no_ops_time() -> None:
    # the seed's log_softmax: 40 us a call, but the VM lost its core for 4 ms during one step's call;
    # an op that runs twice as often in one step as in the next keeps its time per call
    from trainspeed.watch.profile_window import op_rows

    ops = torch.ops.aten
    log_softmax, add = ops._log_softmax.default.overloadpacket, ops.add.default.overloadpacket
    steps = [{(log_softmax, torch.float32): [1, 40e-6], (add, torch.float32): [2, 20e-6]},
             {(log_softmax, torch.float32): [1, 4040e-6], (add, torch.float32): [4, 40e-6]},
             {(log_softmax, torch.float32): [1, 41e-6]}]
    rows = {row.op: row for row in op_rows(steps, {})}
    assert rows["aten._log_softmax"].ms == pytest.approx(0.040) and rows["aten._log_softmax"].calls == 1
    assert rows["aten.add"].calls == 2 and rows["aten.add"].ms == pytest.approx(0.020)


def test_the_window_keeps_each_steps_ops_apart() -> None:
    window = ProfileWindow(steps=3, outside=lambda: True)
    a = torch.randn(8, 8)
    counters = []
    for index in range(5):  # warm-up 1: steps 1, 2 and 3 are counted; step 2 runs relu twice
        for _ in range(2 if index == 2 else 1):
            a.relu()
        counters.append(window.counter)
        window.on_step_end(index, warmup=1, cuda=False)
    counter = counters[1]
    assert counter is not None and counter.by_op == {}
    assert [sum(calls for calls, _ in table.values()) for table in counter.steps_by_op] == [1, 2, 1]
    assert [ops for ops, _ in counter.outside_steps] == [1, 2, 1]
    assert window.outside_ops_per_step == pytest.approx(4 / 3)
    assert window.outside_op_ms_per_step == pytest.approx(4 / 3 * 1e3 * min(s / n for n, s in counter.outside_steps))


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
    assert window.ops_per_step is not None and window.ops_per_step >= 1 and window.op_times is None


def test_an_ops_wait_for_a_core_is_not_its_time() -> None:
    # each op's threads are said to have waited 1 s for a core (the reading after each op): an op is then its wall
    # time less that, never less than nothing
    readings = []

    def waited() -> float:
        readings.append(1)
        return 1.0 if len(readings) % 2 == 0 else 123.0  # the reading before each op is not the op's

    counter = OpCounter(by_op=True, waited=waited)
    with counter:
        torch.ones(3) + torch.ones(3)
    counter.end_step()
    assert len(readings) == 2 * counter.ops
    assert all(seconds == 0.0 for _, seconds in counter.steps_by_op[0].values())
    plain = OpCounter(by_op=True)
    with plain:
        torch.ones(3) + torch.ones(3)
    plain.end_step()
    assert all(seconds > 0.0 for _, seconds in plain.steps_by_op[0].values())


def test_the_op_counter_counts_the_flops_flop_counter_mode_counts() -> None:
    """One dispatch mode for the window (FlopCounterMode stacked on the op counter sent each op through Python
    twice): the same FLOPs, op by op, on convolutions, matmuls, attention and their backward."""
    from torch.utils.flop_counter import FlopCounterMode

    from trainspeed.watch.profile_window import OpCounter

    torch.manual_seed(0)
    conv, linear = torch.nn.Conv2d(3, 8, 3), torch.nn.Linear(8 * 6 * 6, 16)
    q = torch.randn(2, 4, 10, 8, requires_grad=True)

    def step() -> None:
        x = conv(torch.randn(4, 3, 8, 8)).relu().flatten(1)
        att = torch.nn.functional.scaled_dot_product_attention(q, q, q)
        (linear(x).sum() + torch.bmm(att.flatten(0, 1), att.flatten(0, 1).mT).sum()).backward()

    theirs = FlopCounterMode(display=False)
    with theirs:
        step()
    ours = OpCounter(flops=True)
    with ours:
        step()
    assert ours.total_flops == theirs.get_total_flops() > 0
    assert {str(op): n for op, n in (ours.flop_counts or {}).items() if n} == \
        {str(op): n for op, n in theirs.get_flop_counts()["Global"].items() if n}


def test_a_higher_order_op_run_eagerly_under_the_op_counter_runs_as_it_is() -> None:
    """torch.cond (flex_attention is another) run eagerly inside the window: torch raised "There was no rule
    registered for HigherOrderOperator cond" in the user's script under a mode that did not take them."""
    from trainspeed.watch.profile_window import OpCounter

    x = torch.randn(4, 4)

    def branchy(t: torch.Tensor) -> torch.Tensor:
        return torch.cond(t.sum() > 0, lambda u: u.sin(), lambda u: u.cos(), (t,))

    counter = OpCounter(by_op=True, flops=True)
    with counter:
        y = branchy(x)
    assert torch.equal(y, x.sin() if x.sum() > 0 else x.cos()) and counter.ops >= 1
