"""Checkpoints of a watched run: `torch.save` calls (and a framework's whole checkpoint), grouped into checkpoints.

`CheckpointTracker` owns the counts; the hooks time the saves as the checkpoint phase.
"""

from __future__ import annotations

from trainspeed.watch.result import Checkpoints


class CheckpointTracker:
    def __init__(self) -> None:
        self.saves = 0
        """Checkpoints in the whole run (warm-up included: a script's count); `saved` groups the calls."""
        self.calls = 0
        self._steps = (-1, -1)
        """Steps seen at the first and the last of them."""

    def saved(self, steps_seen: int) -> None:
        """A torch.save returned. Saves with no training step between them are one checkpoint (Hugging Face's
        Trainer saves the optimizer, the scheduler, the RNG states and its arguments in four calls)."""
        self.calls += 1
        if self.saves and self._steps[1] == steps_seen:
            return
        self.saves += 1
        first = self._steps[0]
        self._steps = (steps_seen if first < 0 else first, steps_seen)

    def part(self) -> Checkpoints:
        every = (self._steps[1] - self._steps[0]) / (self.saves - 1) if self.saves > 1 else None
        return Checkpoints(self.saves, self.calls, every)
