"""The cell-loop probe: a recurrent cell stepped in Python against its fused layer, on fresh modules."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from trainspeed.probe.rnn import PROBE_ELEMENTS, cell_loop_ms
from trainspeed.watch.cells import CellLoop


def test_each_cell_is_timed_against_its_fused_layer_and_leaves_the_random_state_to_the_caller() -> None:
    for loop in (CellLoop("LSTMCell", 8, 16, True, None), CellLoop("GRUCell", 8, 16, True, None),
                 CellLoop("RNNCell", 8, 16, False, "relu")):
        timed = cell_loop_ms(loop, batch=4, length=6, repeats=2)
        assert timed is not None and timed[0] > 0 and timed[1] > 0
    # too large a sequence to hold twice, or no sequence at all: not probed
    assert cell_loop_ms(CellLoop("LSTMCell", 1024, 1024, True, None), batch=PROBE_ELEMENTS // 1024, length=2) is None
    assert cell_loop_ms(CellLoop("LSTMCell", 8, 16, True, None), batch=4, length=1) is None
    assert torch.is_grad_enabled()


def test_a_reading_that_waited_for_a_core_counts_less_its_wait() -> None:
    """Beside busy processes the fused layer read slower than the stepped cell it replaces: each reading is taken
    less its threads' wait for a core (here a stand-in wait: every reading of the fused layer waited three quarters
    of its time), and the stepped cell's readings, on free cores, as they were."""
    import time

    calls, started, spans = [0], [0.0], []

    def waited() -> float:  # per reading: a call before it (from here), one after (its wait); stepped, then fused
        calls[0] += 1
        if calls[0] % 4 == 3:
            started[0] = time.perf_counter()
        if calls[0] % 4 == 0:
            spans.append(time.perf_counter() - started[0])
            return 0.75 * spans[-1]
        return 0.0

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        timed = cell_loop_ms(CellLoop("LSTMCell", 8, 16, True, None), batch=4, length=6, repeats=3, waited=waited)
    finally:
        torch.set_num_threads(threads)
    assert timed is not None and timed[0] > 0
    # each fused reading less three quarters of a span a little longer than it: under a quarter of the span
    assert 0.0 < timed[1] <= 0.25 * sorted(spans[1:])[1] * 1e3
    assert calls[0] == 4 * 4  # every reading of both, the untimed first round too


def test_beside_busy_processes_both_are_timed_on_one_threads_cpu_time(monkeypatch) -> None:
    """Where other processes held the cores, the readings are this thread's CPU time on one intra-op thread: a
    thread's CPU time is its work, which no wait for a core stretches (a stand-in clock here: a second a reading)."""
    import trainspeed.probe.rnn as rnn

    before = torch.get_num_threads()
    seen: list[int] = []
    ticks = iter(range(1000))

    def cpu_clock() -> float:
        seen.append(torch.get_num_threads())
        return float(next(ticks))

    monkeypatch.setattr(rnn.time, "thread_time", cpu_clock)
    monkeypatch.setattr(rnn.time, "perf_counter", lambda: pytest.fail("wall time read"))
    timed = cell_loop_ms(CellLoop("GRUCell", 8, 16, True, None), batch=4, length=6, repeats=3, loaded=True)
    assert timed == (1000.0, 1000.0) and set(seen) == {1}
    assert torch.get_num_threads() == before


def test_a_cells_call_adds_the_same_ops_at_every_time_step() -> None:
    """The ops one call of the cell adds, forward and backward: a loop over five time steps runs three calls' more
    than one over two, whatever the batch (counted here on the run's own kind of loop, as the rule's share takes it)."""
    from torch import nn

    from trainspeed.probe.rnn import _step_through, cell_call_ops
    from trainspeed.watch.op_counter import OpCounter

    for loop in (CellLoop("LSTMCell", 8, 16, True, None), CellLoop("GRUCell", 8, 16, False, None),
                 CellLoop("RNNCell", 8, 16, True, "relu")):
        per_call = cell_call_ops(loop)
        assert per_call is not None and per_call > 0
        cell = getattr(nn, loop.kind)(loop.input_size, loop.hidden_size, bias=loop.bias)
        counts = []
        for batch, length in ((7, 2), (5, 5)):
            counter = OpCounter()
            with counter:
                _step_through([cell], loop, torch.randn(batch, length, loop.input_size))
            counts.append(counter.ops)
        assert counts[1] - counts[0] == 3 * per_call


def test_a_long_sequence_is_timed_in_fewer_rounds() -> None:
    """Rounds of 0.1 s: two fit the probe's 0.25 s, three are taken (the least); rounds of a millisecond: all five;
    never more than asked."""
    from trainspeed.probe.rnn import LEAST_ROUNDS, PROBE_S, _rounds

    assert _rounds(0.1, 5) == LEAST_ROUNDS == 3 and _rounds(0.001, 5) == 5 and _rounds(PROBE_S / 4, 5) == 4
    assert _rounds(0.1, 2) == 2 and _rounds(0.0, 5) == 5


def test_a_short_run_is_settled_and_timed_on_its_second_call_of_each_round(monkeypatch) -> None:
    """A stand-in clock: the fused layer's first call in the process takes 35 ms and each call after the other run's
    twice its 1 ms, as nn.LSTM's did on a CPU (BENCHMARKS.md, "Where the code's constants come from"); the stepped
    cell 5 ms. Its readings are its own steps' (1 ms), not its first calls' nor those after the other's; a long run
    (0.3 s) gets neither the settling calls nor the untimed ones."""
    import trainspeed.probe.rnn as rnn

    now, calls = [0.0], {"cell": 0, "layer": 0, "long": 0}
    last = [""]

    def run(name: str, steady: float) -> Callable[[], None]:
        def call() -> None:
            took = 0.035 if not calls[name] and name == "layer" else steady
            if last[0] not in ("", name):
                took *= 2
            now[0] += took
            calls[name] += 1
            last[0] = name
        return call

    monkeypatch.setattr(rnn.time, "perf_counter", lambda: now[0])
    assert rnn._medians_ms([run("cell", 0.005), run("layer", 0.001)], 5, "cpu", lambda: 0.0) == [
        pytest.approx(5.0), pytest.approx(1.0)]
    # two settling calls (the second as long as the first: settled), and the first round's 87 ms (the first calls and
    # the settling ones) leave LEAST_ROUNDS rounds in PROBE_S, each a call untimed and one timed
    assert calls["layer"] == 1 + 2 + 2 * rnn.LEAST_ROUNDS and calls["cell"] == 1 + 1 + 2 * rnn.LEAST_ROUNDS
    now[0], last[0] = 0.0, ""
    assert rnn._medians_ms([run("long", 0.3)], 5, "cpu", lambda: 0.0) == [pytest.approx(300.0)]
    assert calls["long"] == 1 + rnn.LEAST_ROUNDS


def test_a_stack_of_cells_is_timed_against_the_layer_of_as_many_layers_in_the_runs_dtype(monkeypatch) -> None:
    """Two stacked float64 nn.LSTMCells (the sine-wave predictor's lstm1 and lstm2) against nn.LSTM(num_layers=2) in
    float64: the probe's modules and input are the run's dtype, a call of the first cell counts the second's ops too,
    and the stepped loop over a sequence longer than PROBE_STEPS is timed over that many steps and scaled to its
    length (the fused layer over the whole sequence)."""
    from torch import nn

    import trainspeed.probe.rnn as rnn

    loop = CellLoop("LSTMCell", 1, 12, True, None, dtype="float64", layers=2)
    cells = rnn._cells(loop, "cpu")
    assert [(c.input_size, c.hidden_size, c.weight_ih.dtype) for c in cells] == [(1, 12, torch.float64),
                                                                                 (12, 12, torch.float64)]
    one = rnn.cell_call_ops(CellLoop("LSTMCell", 1, 12, True, None))
    two = rnn.cell_call_ops(loop)
    assert one is not None and two is not None and two > one
    seen: list[tuple[int, ...]] = []
    built: list[nn.Module] = []
    real_module = rnn._module

    def module(*args, **kwargs):  # type: ignore[no-untyped-def]
        built.append(real_module(*args, **kwargs))
        return built[-1]

    lengths: list[int] = []
    real_step = rnn._step_through

    def step_through(cells, loop, x):  # type: ignore[no-untyped-def]
        lengths.append(x.shape[1])
        real_step(cells, loop, x)

    def medians(runs, repeats, device, waited):  # type: ignore[no-untyped-def]
        for run in runs:
            run()
        return [8.0, 2.0]

    real_randn = torch.randn

    def randn(*shape, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(tuple(shape))
        return real_randn(*shape, **kwargs)

    monkeypatch.setattr(rnn, "_module", module)
    monkeypatch.setattr(rnn, "_medians_ms", medians)
    monkeypatch.setattr(rnn, "_step_through", step_through)
    monkeypatch.setattr(rnn.torch, "randn", randn)
    assert rnn.cell_loop_ms(loop, batch=3, length=4 * rnn.PROBE_STEPS) == (32.0, 2.0)
    assert seen == [(3, 4 * rnn.PROBE_STEPS, 1)] and lengths == [rnn.PROBE_STEPS]
    fused = built[-1]
    assert isinstance(fused, nn.LSTM) and fused.num_layers == 2 and fused.weight_ih_l0.dtype == torch.float64
    assert rnn.cell_loop_ms(loop, batch=3, length=10) == (8.0, 2.0) and lengths[-1] == 10  # a short one: whole
