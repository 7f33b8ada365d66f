"""The seed's workload: MinMax-scaled Iris, 80/20 split (random_state=42), MLP 4 -> 10 -> 3."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class IrisSplit:
    """Train and test tensors on the CPU (float32 features, int64 labels)."""

    x_train: torch.Tensor  # (120, 4)
    y_train: torch.Tensor  # (120,)
    x_test: torch.Tensor  # (30, 4)
    y_test: torch.Tensor  # (30,)

    def to(self, device: torch.device | str) -> IrisSplit:
        """The same split on another device."""
        return IrisSplit(*(t.to(device) for t in (self.x_train, self.y_train, self.x_test, self.y_test)))


def load_iris_split(random_state: int = 42, test_size: float = 0.2) -> IrisSplit:
    """scikit-learn's bundled Iris, split and scaled exactly as the seed does (no download)."""
    from sklearn.datasets import load_iris
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import MinMaxScaler

    iris = load_iris()
    x_train, x_test, y_train, y_test = train_test_split(
        iris.data, iris.target, test_size=test_size, random_state=random_state
    )
    scaler = MinMaxScaler()
    x_train = scaler.fit_transform(x_train)
    x_test = scaler.transform(x_test)  # scaled with the training set's range, as the seed does
    return IrisSplit(
        torch.tensor(x_train, dtype=torch.float32), torch.tensor(y_train, dtype=torch.int64),
        torch.tensor(x_test, dtype=torch.float32), torch.tensor(y_test, dtype=torch.int64),
    )


class IrisMLP(nn.Module):
    """The seed's MLP: Linear(4, 10) -> ReLU -> Linear(10, 3)."""

    def __init__(self, hidden: int = 10) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, hidden)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(hidden, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.relu(self.fc1(x)))  # (N, 4) -> (N, 3)


def make_iris_mlp(seed: int = 0) -> IrisMLP:
    """An IrisMLP initialised from `seed` without touching the caller's global RNG state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return IrisMLP()
