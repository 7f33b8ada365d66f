"""The CPU's op counter: each op counted, timed by op and dtype, its FLOPs, and how long its calls run."""

from __future__ import annotations

import pytest
import torch

from trainspeed.watch.op_counter import OpCounter


def test_op_counter_counts_dispatched_ops_and_leaves_results_alone() -> None:
    a, b = torch.randn(4, 3), torch.randn(3, 2)
    with OpCounter() as counter:
        out = torch.relu(a @ b) + 1
    assert counter.ops == 3  # mm, relu, add
    assert torch.equal(out, torch.relu(a @ b) + 1)


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


def test_op_table_keeps_the_slowest_ops_and_every_one_with_arithmetic() -> None:
    from trainspeed.watch.op_counter import op_rows, op_table

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
    from trainspeed.watch.op_counter import op_rows

    ops = torch.ops.aten
    log_softmax, add = ops._log_softmax.default.overloadpacket, ops.add.default.overloadpacket
    steps = [{(log_softmax, torch.float32): [1, 40e-6], (add, torch.float32): [2, 20e-6]},
             {(log_softmax, torch.float32): [1, 4040e-6], (add, torch.float32): [4, 40e-6]},
             {(log_softmax, torch.float32): [1, 41e-6]}]
    rows = {row.op: row for row in op_rows(steps, {})}
    assert rows["aten._log_softmax"].ms == pytest.approx(0.040) and rows["aten._log_softmax"].calls == 1
    assert rows["aten.add"].calls == 2 and rows["aten.add"].ms == pytest.approx(0.020)


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


def test_an_op_s_calls_are_counted_by_their_work_at_its_least_time_per_unit_of_work() -> None:
    """How long an op's calls run (`least_per_work`, `phase_calls`): by the work of a call (its FLOPs, else the
    elements it gave), at the op's least wall time per unit of work over its calls, which a wait for a core only
    lengthens: each call's threads said to have waited far past its wall time leave the op's time nothing, not its
    length."""
    counter = OpCounter(by_op=True, waited=lambda: 1.0, phase=lambda: "forward", flops=True)
    big, small = torch.randn(256, 256), torch.randn(4, 256)
    with counter:
        for _ in range(3):
            big @ big
        small @ big
        big.relu()
        torch._foreach_add_([small, small], 1.0)  # in place, giving nothing: the elements it changed
    counter.end_step()
    mm = torch.ops.aten.mm.default.overloadpacket
    relu = torch.ops.aten.relu.default.overloadpacket
    foreach_add = torch.ops.aten._foreach_add_.Scalar.overloadpacket
    assert counter.steps_by_op[0][mm, torch.float32] == [4, 0.0]
    flops_big, flops_small = 2 * 256**3, 2 * 4 * 256 * 256
    assert counter.phase_calls == {"forward": {(mm, torch.float32, flops_big): 3, (mm, torch.float32, flops_small): 1,
                                               (relu, torch.float32, 256 * 256): 1,
                                               (foreach_add, torch.float32, 2 * 4 * 256): 1}}
    assert counter.least_per_work[mm, torch.float32] > 0.0 and counter.least_per_work[relu, torch.float32] > 0.0


def test_the_op_counter_counts_the_flops_flop_counter_mode_counts() -> None:
    """One dispatch mode for the window (FlopCounterMode stacked on the op counter sent each op through Python
    twice): the same FLOPs, op by op, on convolutions, matmuls, attention and their backward."""
    from torch.utils.flop_counter import FlopCounterMode

    from trainspeed.watch.op_counter import OpCounter

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
    from trainspeed.watch.op_counter import OpCounter

    x = torch.randn(4, 4)

    def branchy(t: torch.Tensor) -> torch.Tensor:
        return torch.cond(t.sum() > 0, lambda u: u.sin(), lambda u: u.cos(), (t,))

    counter = OpCounter(by_op=True, flops=True)
    with counter:
        y = branchy(x)
    assert torch.equal(y, x.sin() if x.sum() > 0 else x.cos()) and counter.ops >= 1


def test_an_ops_phase_is_where_most_of_its_work_ran_and_the_table_ranks_the_steps_own_apart() -> None:
    from collections import Counter

    from trainspeed.watch.op_counter import main_phases, op_rows, op_table

    mm, stack, div = torch.ops.aten.mm, torch.ops.aten.stack, torch.ops.aten.div
    phases = main_phases({"forward": Counter({(mm, torch.float32, 64): 3}),
                          "backward": Counter({(mm, torch.float32, 64): 6, (div, torch.float32, 1024): 2}),
                          "optimizer": Counter({(div, torch.float32, 6_400_000): 2}),
                          "data": Counter({(stack, torch.float32, 8): 64})})
    # as many divisions in the backward as in the optimizer, the optimizer's on 6,250 times the elements
    assert phases == {(mm, torch.float32): "backward", (stack, torch.float32): "data",
                      (div, torch.float32): "optimizer"}
    steps = [{(mm, torch.float32): [9, 0.009], (stack, torch.float32): [64, 0.064]}]
    rows = op_rows(steps, {}, phases)
    assert [(r.op, r.phase, r.in_step) for r in rows] == [("aten.stack", "data", False), ("aten.mm", "backward", True)]
    table = op_table(rows, keep=1)  # one of the step's own and one of the others, whichever is slower
    assert {r.op for r in table} == {"aten.stack", "aten.mm"}


def test_a_counter_made_before_torch_compile_is_loaded_counts_without_loading_it() -> None:
    """torch wraps a dispatch mode's __torch_dispatch__ in torch._dynamo.disable, whose first call imports
    torch._dynamo (about 2 s of a core): a process that never compiles does not pay for it under the window."""
    import subprocess
    import sys

    code = ("import sys, torch\n"
            "from trainspeed.watch.op_counter import op_counter\n"
            "c = op_counter(flops=True)\n"
            "with c:\n"
            "    torch.ones(4, 4) @ torch.ones(4, 4)\n"
            "print(c.ops, 'torch._dynamo' in sys.modules, type(c).compile_safe)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] != "0" and out[1:] == ["False", "False"]


def test_a_counter_made_once_torch_compile_is_loaded_keeps_it_out_of_its_frames() -> None:
    import torch._dynamo  # noqa: F401  (the process has torch.compile's machinery)

    from trainspeed.watch.op_counter import op_counter

    counter = op_counter()
    assert type(counter).compile_safe and isinstance(counter, OpCounter)
    assert type(counter).__torch_dispatch__ is not OpCounter.__torch_dispatch__  # torch's torch._dynamo.disable
    with counter:
        torch.ones(3).add_(1)
    assert counter.ops == 2
