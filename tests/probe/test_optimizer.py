"""The optimizer probe: one step on the run's parameter shapes, as configured and fused, on fresh tensors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainspeed.probe import optimizer as probe
from trainspeed.probe.optimizer import spec_of, step_ms

FUSED_ON_CPU = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 4)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8)) for _ in range(5)])


def test_the_spec_holds_the_shapes_and_the_settings_the_class_takes() -> None:
    opt = torch.optim.AdamW(_model().parameters(), lr=3e-4, foreach=False)
    spec = spec_of(opt)
    assert spec is not None and spec.cls is torch.optim.AdamW and len(spec.shapes) == 20
    assert spec.shapes[0] == (8, 8) and spec.dtype == torch.float32 and spec.device == "cpu"
    assert spec.foreach is False and spec.fused is None and spec.settings["lr"] == 3e-4
    # AdamW keeps Adam's decoupled_weight_decay among its defaults, and its constructor refuses it
    assert "decoupled_weight_decay" not in spec.settings and "foreach" not in spec.settings


@pytest.mark.skipif(not FUSED_ON_CPU, reason="fused optimizers on the CPU need torch 2.4")
def test_steps_are_timed_on_fresh_tensors_and_the_users_are_untouched() -> None:
    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    before = [p.detach().clone() for p in model.parameters()]
    spec = spec_of(opt)
    assert spec is not None
    configured, fused = step_ms(spec, fused=None), step_ms(spec, fused=True)
    assert configured is not None and fused is not None and configured > 0 and fused > 0
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before))
    assert all(torch.equal(p.grad, torch.ones_like(p)) for p in model.parameters())
    assert not opt.state  # the user's optimizer never stepped


def test_no_fused_kernel_or_too_many_elements_is_no_measurement(monkeypatch) -> None:
    spec = spec_of(torch.optim.RMSprop(_model().parameters()))
    assert spec is not None and step_ms(spec, fused=True) is None  # RMSprop has no fused implementation
    assert step_ms(spec, fused=None) is not None
    monkeypatch.setattr(probe, "PROBE_ELEMENTS", 100)
    assert step_ms(spec, fused=None) is None
    mixed = torch.optim.SGD([torch.zeros(3, requires_grad=True), torch.zeros(3, dtype=torch.float64, requires_grad=True)])
    assert spec_of(mixed) is None


def test_building_and_stepping_a_new_optimizer_is_timed_against_a_kept_ones_step(monkeypatch) -> None:
    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    before = [p.detach().clone() for p in model.parameters()]
    spec = spec_of(opt)
    assert spec is not None
    built: list[int] = []
    real_init = torch.optim.Adam.__init__

    def counting(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        built.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "__init__", counting)
    times = probe.rebuild_ms(spec, repeats=3)
    assert times is not None and times[0] > 0 and times[1] > 0
    assert len(built) == 1 + 3 + 1  # the first use, one per timed build, the kept one
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before)) and not opt.state
    monkeypatch.setattr(probe, "PROBE_ELEMENTS", 100)
    assert probe.rebuild_ms(spec) is None
