"""The user's warnings name the user's line while the watcher's wrappers sit between the user's code and torch."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator

import pytest
import torch

from trainspeed.doctor import Doctor


@pytest.fixture(autouse=True)
def _torch_warns_every_time() -> Iterator[None]:
    """torch says this warning once a process (TORCH_WARN_ONCE); every time here, whatever ran before."""
    before = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    yield
    torch.set_warn_always(before)


def _train(steps: int = 6) -> list[float]:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    history = []
    for _ in range(steps):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        history.append(float(loss))  # torch warns here: a tensor that requires grad made a Python float
    return history


def test_a_warning_from_torch_through_a_counted_read_names_the_users_line() -> None:
    with pytest.warns(UserWarning, match="requires_grad=True to a scalar") as seen, Doctor(warmup=1):
        _train()
    assert seen and {w.filename for w in seen} == {__file__}, [(w.filename, w.lineno) for w in seen]


def test_the_users_filters_apply_to_their_module_as_unwatched() -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*requires_grad", module=re.escape(__name__))
        with pytest.raises(UserWarning, match="requires_grad"), Doctor(warmup=1):
            _train()


def test_nothing_is_left_installed_after_watching() -> None:
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        before_show, before_filters = warnings.showwarning, list(warnings.filters)
        with Doctor(warmup=1):
            assert warnings.showwarning is not before_show
            _train()
        assert warnings.showwarning is before_show and list(warnings.filters) == before_filters
