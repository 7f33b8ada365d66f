"""The cell-loop probe: a recurrent cell stepped in Python against its fused layer, on fresh modules."""

from __future__ import annotations

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
