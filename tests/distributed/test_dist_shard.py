"""Each rank's rows of a batch, and the loss weights that make uneven shares exact."""

from __future__ import annotations

import pytest
import torch

from trainspeed.distributed.checks import compare, fingerprint
from trainspeed.distributed.shard import loss_weight, shard_rows
from trainspeed.errors import DistError


@pytest.mark.parametrize("rows, world", [(120, 2), (7, 2), (10, 3), (2, 4), (1, 1)])
def test_shares_cover_the_batch_once_in_order(rows: int, world: int) -> None:
    parts = [shard_rows(rows, r, world) for r in range(world)]
    assert parts[0][0] == 0 and parts[-1][1] == rows
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
    sizes = [stop - start for start, stop in parts]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("rows, world", [(7, 2), (10, 3), (5, 4)])
def test_weighted_mean_losses_average_to_the_whole_batch_mean(rows: int, world: int) -> None:
    values = torch.arange(rows, dtype=torch.float64) ** 2
    ddp = sum(values[slice(*shard_rows(rows, r, world))].mean() * loss_weight(rows, r, world)
              for r in range(world)) / world  # what DDP's gradient average sees
    assert float(ddp) == pytest.approx(float(values.mean()))


def test_fingerprints_tell_layout_from_values() -> None:
    torch.manual_seed(0)
    a = fingerprint(torch.nn.Linear(4, 3))
    torch.manual_seed(1)
    b = fingerprint(torch.nn.Linear(4, 3))
    assert compare([a, a]) is None
    note = compare([a, b])
    assert note is not None and "rank(s) 1" in note and "broadcast rank 0's values" in note
    with pytest.raises(DistError, match=r"rank 1's model differs from rank 0's \(2 parameters, first weight \(5, 4\)"):
        compare([a, fingerprint(torch.nn.Linear(4, 5))])
