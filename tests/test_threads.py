"""torch's intra-op threads set for a block and put back."""

from __future__ import annotations

import pytest
import torch

from trainspeed.threads import intra_op_threads


def test_the_threads_are_set_inside_the_block_and_put_back_after_it_even_on_error() -> None:
    before = torch.get_num_threads()
    with intra_op_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError), intra_op_threads(1):
        raise ValueError
    assert torch.get_num_threads() == before
    with intra_op_threads(None):  # left as they are
        assert torch.get_num_threads() == before
