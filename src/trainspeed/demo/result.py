"""Result objects of `trainspeed demo`."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainspeed._render import Renders


@dataclass(frozen=True)
class DemoRun:
    """One device x variant run of the seed's Iris job."""

    device: str
    variant: str
    epochs: int
    seconds: float
    """Wall time of the training loop, device synchronised at both ends."""
    us_per_epoch: float
    syncs: int
    """Host reads of tensor values during the timed loop, counted as they happened."""
    syncs_by_op: dict[str, int]
    final_loss: float
    """The loss of the last epoch."""
    test_accuracy: float
    chunk_seconds: list[float] = field(repr=False)
    """Time of each equal chunk of epochs (host clock on CPU, CUDA events on a GPU)."""
    losses: list[float] = field(repr=False)
    recorded_epochs: list[int] = field(repr=False)
    log_lines: list[str] = field(repr=False)
    """What the loop printed (kept off the terminal so the progress bar stays readable)."""
    strategy: str = ""
    """For the `fit` variant: what it chose (e.g. "cpu:replay")."""

    @property
    def records(self) -> int:
        return len(self.losses)


@dataclass(frozen=True)
class DemoResult(Renders):
    """All runs of the demo, and the explanation computed from them."""

    epochs: int
    devices: list[str]
    runs: list[DemoRun]
    explanation: list[str]
    torch_threads: int

    def run(self, device: str, variant: str) -> DemoRun | None:
        """The run of one device and variant, if it was made."""
        for r in self.runs:
            if r.device == device and r.variant == variant:
                return r
        return None
