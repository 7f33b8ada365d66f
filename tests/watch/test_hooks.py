"""Hooks: a per-call patch made while the per-call hooks are out goes in only when they come back."""

from __future__ import annotations

from typing import Any

import torch

from trainspeed.watch.hooks import Hooks


class _Listener:
    opening_window = False

    def __init__(self) -> None:
        self.opened: list[str] = []

    def open_host(self, phase: str) -> int:
        self.opened.append(phase)
        return 0

    def close_host(self, depth: int) -> None: ...
    def enter(self, phase: str) -> None: ...
    def exit(self, phase: str) -> None: ...
    def forward_pre(self, module: Any, args: Any, kwargs: Any) -> None: ...
    def step_ended(self, *args: Any) -> None: ...
    def backward_done(self) -> None: ...
    def h2d(self, *args: Any) -> None: ...
    def loader_seen(self, iterator: Any) -> None: ...
    def loader_ran_out(self, iterator: Any) -> None: ...
    def backward_running(self) -> bool:
        return False

    def recomputed(self, seconds: float) -> None: ...
    def loader_started(self, seconds: float, stop: bool = False) -> None: ...
    def host_read(self, *args: Any) -> None: ...
    def anomaly_stack(self, seconds: float) -> None: ...
    def optimizer_built(self, seconds: float) -> None: ...
    def mode_set(self, module: Any, training: bool) -> None: ...
    def grad_off_entered(self) -> None: ...
    def grad_off_left(self) -> None: ...
    def saved(self) -> None: ...


class _PausedSGD(torch.optim.SGD):
    pass


def test_an_optimizer_class_seen_while_paused_is_wrapped_at_resume_and_put_back_at_uninstall() -> None:
    listener = _Listener()
    hooks = Hooks(listener, listener)  # type: ignore[arg-type]
    opt = _PausedSGD([torch.nn.Parameter(torch.ones(1))], lr=0.1)
    before = _PausedSGD.__dict__.get("step")  # torch's hooked step, if the first instance put one here
    opt.param_groups[0]["params"][0].grad = torch.ones(1)
    hooks.install()
    try:
        hooks.pause()
        hooks.watch_optimizer(_PausedSGD)
        assert _PausedSGD.__dict__.get("step") is before  # out while paused: the class is left alone
        opt.step()
        assert listener.opened == []
        hooks.resume()
        opt.step()
        assert listener.opened == ["optimizer"]
    finally:
        hooks.uninstall()
    assert _PausedSGD.__dict__.get("step") is before
