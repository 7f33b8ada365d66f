"""The model tracker's batch size where a sequence layer takes time first (nn.LSTM's default): the batch is the
input's second dimension, whether the layer is the model or inside it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainspeed.watch import Watcher


class WordModel(nn.Module):
    """A word language model as the classic examples write it: (time, batch) token windows, a time-first LSTM."""

    def __init__(self, batch_first: bool = False) -> None:
        super().__init__()
        self.encoder = nn.Embedding(50, 8)
        self.rnn = nn.LSTM(8, 12, batch_first=batch_first)
        self.decoder = nn.Linear(12, 50)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.encoder(tokens))
        return self.decoder(out).view(-1, 50)


def _watched(model: nn.Module, x: torch.Tensor, loss_of: object) -> Watcher:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with Watcher(warmup=1, profile_steps=0) as w:
        for _ in range(4):
            loss = loss_of(model(x))  # type: ignore[operator]
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return w


def _train(model: nn.Module, x: torch.Tensor, loss_of: object) -> int | None:
    return _watched(model, x, loss_of).measurements().model.batch_size


@pytest.mark.parametrize("batch_first", [False, True])
def test_a_language_models_batch_is_the_time_first_lstms_second_dimension(batch_first: bool) -> None:
    torch.manual_seed(0)
    time_steps, batch = 7, 4  # (35, 20) in the classic example: 35 was read as the batch
    shape = (batch, time_steps) if batch_first else (time_steps, batch)
    tokens = torch.randint(0, 50, shape)
    target = torch.randint(0, 50, (time_steps * batch,))
    got = _train(WordModel(batch_first), tokens, lambda out: nn.functional.cross_entropy(out, target))
    assert got == batch


def test_a_time_first_lstm_called_as_the_model_reads_its_batch_from_the_second_dimension() -> None:
    torch.manual_seed(0)
    x = torch.randn(9, 3, 5)  # (time, batch, features)
    assert _train(nn.GRU(5, 6), x, lambda out: out[0].pow(2).mean()) == 3


@pytest.mark.parametrize("batch_first", [False, True])
def test_the_memory_estimate_builds_a_language_models_batches_along_its_batch_dimension(batch_first: bool) -> None:
    """The probes after the run copy one sample of the model's input without its batch dimension: (35,) tokens of
    a time-first model fed (35, 20), whose larger batches are (35, b), not (b, 20)."""
    time_steps, batch = 7, 4
    tokens = torch.randint(0, 50, (batch, time_steps) if batch_first else (time_steps, batch))
    target = torch.randint(0, 50, (time_steps * batch,))
    subject = _watched(WordModel(batch_first), tokens, lambda out: nn.functional.cross_entropy(out, target)).subject()
    assert subject.input_spec == ([time_steps], torch.int64) and subject.batch_dim == (0 if batch_first else 1)


def test_cells_stacked_on_the_first_are_its_layers() -> None:
    """The sine-wave predictor's lstm1 (1, 51) and lstm2 (51, 51), called in turn, are a stack of two (nn.LSTM's
    num_layers=2); a cell of another hidden size, of another kind, or called less often is not in the stack."""
    from trainspeed.watch.model import ModelTracker

    def stack(*cells: nn.Module, calls: tuple[int, ...] | None = None) -> int:
        tracker = ModelTracker()
        for i, cell in enumerate(cells):
            for _ in range((calls or (3,) * len(cells))[i]):
                tracker.cell_called(cell)
        return tracker.stacked()

    first, second, third = nn.LSTMCell(1, 51), nn.LSTMCell(51, 51), nn.LSTMCell(51, 51)
    assert stack(first, second) == 2 and stack(first, second, third) == 3 and stack(first) == 1
    assert stack(first, nn.LSTMCell(51, 32)) == 1 and stack(first, nn.GRUCell(51, 51)) == 1
    assert stack(first, second, calls=(3, 2)) == 1 and ModelTracker().stacked() == 1
    tracker = ModelTracker()
    assert tracker.cell_called(first) and not tracker.cell_called(second)  # the first cell's calls are the loop's
    assert tracker.cell is not None and tracker.cell.dtype == "float32"
    tracker = ModelTracker()
    tracker.cell_called(nn.LSTMCell(1, 8).double())
    assert tracker.cell is not None and tracker.cell.dtype == "float64"
