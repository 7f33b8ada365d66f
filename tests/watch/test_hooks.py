"""Hooks: a per-call patch made while the per-call hooks are out goes in only when they come back."""

from __future__ import annotations

import dataclasses

import torch

from trainspeed.watch.edges import PhaseEdges
from trainspeed.watch.events import Events
from trainspeed.watch.hooks import Hooks
from trainspeed.watch.phases import PhaseClock


def _events() -> Events:
    """Events that nobody hears."""
    return Events(*([lambda *args, **kwargs: None] * len(dataclasses.fields(Events))))


class _PausedSGD(torch.optim.SGD):
    pass


def test_an_optimizer_class_seen_while_paused_is_wrapped_at_resume_and_put_back_at_uninstall() -> None:
    clock = PhaseClock()
    hooks = Hooks(_events(), PhaseEdges(clock.now, trace=False))
    opened: list[str] = []
    enter = hooks.edges.clock.enter
    hooks.edges.clock.enter = lambda phase: (opened.append(phase), enter(phase))[-1]  # type: ignore[method-assign]
    opt = _PausedSGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    before = _PausedSGD.__dict__.get("step")  # torch's hooked step, if the first instance put one here
    opt.param_groups[0]["params"][0].grad = torch.ones(1)
    hooks.install()
    try:
        hooks.pause()
        hooks.watch_optimizer(_PausedSGD)
        assert _PausedSGD.__dict__.get("step") is before  # out while paused: the class is left alone
        opt.step()
        assert opened == []
        hooks.resume()
        opt.step()
        assert opened == ["optimizer"]
    finally:
        hooks.uninstall()
    assert _PausedSGD.__dict__.get("step") is before
