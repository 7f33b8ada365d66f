"""Result objects of `trainspeed demo`."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainspeed._render import Renders
from trainspeed.diagnose.rules.brief import plural

FASTER = 1.5
"""A thread count the load leaves is given its own row when its start ran at least this much faster."""


@dataclass(frozen=True)
class Start:
    """What the short start measured on one device."""

    device: str
    epochs: int
    """Epochs per variant chosen from it."""
    us_per_epoch: dict[int, float]
    """The seed loop's time per epoch in the start, by torch thread count (the CPU's: torch's and the load's)."""
    threads: int
    """torch's intra-op threads as the demo found them."""
    others_cores: float | None
    """Cores other processes kept busy during the start (None: not read, or not a CPU)."""
    cores: int

    @property
    def best_threads(self) -> int:
        """The thread count whose start ran fastest."""
        return min(self.us_per_epoch, key=lambda k: self.us_per_epoch[k])

    @property
    def extra_threads(self) -> int | None:
        """The thread count that gets a row of its own: the load's, where it ran FASTER than torch's."""
        best = self.best_threads
        if best == self.threads or self.us_per_epoch[self.threads] < FASTER * self.us_per_epoch[best]:
            return None
        return best


def row_name(device: str, threads: int | None) -> str:
    """A table row's device: "cpu", or "cpu, 1 thread" for the row at the threads the load leaves."""
    return device if threads is None else f"{device}, {plural(threads, 'thread')}"


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
    threads: int | None = None
    """torch's intra-op threads for this run where the demo set them (the row at the threads the machine's load
    leaves); None: as torch found them (`DemoResult.torch_threads`)."""

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
    starts: list[Start] = field(default_factory=list)
    """The short timed starts that chose `epochs` (none where --epochs was given)."""

    def run(self, device: str, variant: str) -> DemoRun | None:
        """The run of one device and variant at torch's threads, if it was made."""
        for r in self.runs:
            if r.device == device and r.variant == variant and r.threads is None:
                return r
        return None
