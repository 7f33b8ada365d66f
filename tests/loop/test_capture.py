"""Capturing a step and replaying it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainspeed.loop.capture import CaptureRefused, capture_step


def _job():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    x, y = torch.randn(16, 3), torch.randn(16, 1)

    def step(*args):
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(args[-2]), args[-1])
        loss.backward()
        opt.step()
        return loss.detach()

    step(x, y)  # momentum buffers exist from here on
    state = [*model.parameters(), *(s["momentum_buffer"] for s in opt.state.values())]
    return model, opt, step, state, x, y


def test_replay_repeats_the_eager_steps_exactly() -> None:
    model, opt, step, state, x, y = _job()
    twin_model, twin_opt, twin_step, _, _, _ = _job()
    captured = capture_step(step, [*state, x, y])  # runs the first step for real
    expected = [twin_step(x, y) for _ in range(6)]
    with torch.no_grad():
        got = [captured.replay(*state, x, y) for _ in range(5)]
    expected = expected[1:]
    assert [g.item() for g in got] == [e.item() for e in expected]
    for p, q in zip(model.parameters(), twin_model.parameters()):
        assert torch.equal(p, q)
    assert "detach" not in captured.source and "profiler" not in captured.source
    assert captured.ops > 10 and captured.capture_seconds > 0


def test_a_step_that_reads_a_value_on_the_host_is_refused() -> None:
    w = torch.ones(3, requires_grad=True)

    def step(w, x):
        loss = (w * x).sum()
        if loss.item() > 0:  # a data-dependent branch
            loss = loss * 2
        return loss.detach()

    with pytest.raises(CaptureRefused, match="reads tensor values on the host"):
        capture_step(step, [w, torch.ones(3)])
