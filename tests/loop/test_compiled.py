"""The compiled path's graph rewrite and its compile-time memory."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from trainspeed.loop import compiled
from trainspeed.loop.compiled import load_times, save_times, spell_out_alpha


def test_alpha_is_spelled_out_so_inductor_cannot_drop_it() -> None:
    def update(p, a, b):
        return torch.add(p, torch.mm(a, b), alpha=-0.5)

    args = (torch.randn(2, 2), torch.randn(2, 3), torch.randn(3, 2))
    gm = make_fx(update)(*args)
    spell_out_alpha(gm)
    adds = [n for n in gm.graph.nodes if n.target is torch.ops.aten.add.Tensor]
    assert adds and all("alpha" not in n.kwargs for n in adds)
    torch.testing.assert_close(gm(*args), update(*args))


def test_compile_times_are_remembered_first_as_cold_then_warm(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(compiled, "_COMPILED_HERE", set())
    assert load_times(tmp_path, "k") is None
    save_times(tmp_path, "k", 20.0, 40e-6)
    assert load_times(tmp_path, "k") == {"cold_s": 20.0, "step_s": 40e-6}
    save_times(tmp_path, "k", 0.5, 30e-6)  # again in this process: in-memory caches, not remembered
    assert load_times(tmp_path, "k") == {"cold_s": 20.0, "step_s": 40e-6}
    compiled._COMPILED_HERE.clear()  # as a new process would
    save_times(tmp_path, "k", 2.5, 36e-6)
    assert load_times(tmp_path, "k") == {"cold_s": 20.0, "warm_s": 2.5, "step_s": 36e-6}
    (tmp_path / "compile_times.json").write_text("not json")
    assert load_times(tmp_path, "k") is None
