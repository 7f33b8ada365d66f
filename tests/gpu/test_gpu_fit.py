"""On a real CUDA device: fit captures the step as a CUDA graph and keeps the plain loop's numbers."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainspeed import fit
from trainspeed.workloads.iris import load_iris_split, make_iris_mlp

pytestmark = pytest.mark.gpu


def _plain(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, epochs: int) -> list[float]:
    losses = []
    for _ in range(epochs):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("make_opt", [
    lambda p: torch.optim.SGD(p, lr=0.01),
    lambda p: torch.optim.Adam(p, lr=0.01),  # needs capturable=True inside the graph
])
def test_cuda_graph_keeps_the_plain_loops_losses(make_opt) -> None:
    data = load_iris_split().to("cuda")
    model, ref = make_iris_mlp(0).cuda(), make_iris_mlp(0).cuda()
    opt, ref_opt = make_opt(model.parameters()), make_opt(ref.parameters())
    result = fit(model, (data.x_train, data.y_train), nn.CrossEntropyLoss(), opt, 3000, device="cuda",
                 capture=True)
    expected = _plain(ref, ref_opt, data.x_train, data.y_train, 3000)
    assert result.strategy.device.startswith("cuda")
    assert result.timings.steps_by_runner.get("graph", 0) > 2000, result.strategy.explain
    assert max(abs(a - b) for a, b in zip(result.losses, expected)) < 1e-5
    assert len(result.losses) == 3000


def test_auto_device_races_cpu_and_cuda() -> None:
    data = load_iris_split()
    model = make_iris_mlp(0)
    result = fit(model, (data.x_train, data.y_train), nn.CrossEntropyLoss(),
                 torch.optim.SGD(model.parameters(), lr=0.01), 200)
    assert any("on cpu vs" in line for line in result.strategy.explain)
