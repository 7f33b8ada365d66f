"""Sync-free loss recording: losses stay on the device until the host needs them.

Each recorded loss is kept as the tensor the step produced (no copy, no host read). Every
`flush_every` pieces they are concatenated into one device tensor; on CUDA that tensor is then
copied without blocking into pinned host memory and an event is recorded behind the copy, so the
host reads it only once the event says it is complete. No step ever waits for the device.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


class LossRecorder:
    def __init__(self, device: torch.device, flush_every: int = 1024) -> None:
        self.device = device
        self.flush_every = flush_every
        self._pending: list[torch.Tensor] = []
        self._flushed: list[tuple[torch.Tensor, torch.cuda.Event | None]] = []
        self.count = 0

    def add(self, losses: torch.Tensor) -> None:
        """Record one loss (0-d) or several in order (1-d), without reading them (pass them detached)."""
        self._pending.append(losses)
        self.count += losses.numel()
        if len(self._pending) >= self.flush_every:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        if all(t.dim() == 0 for t in self._pending):
            block = torch.stack(self._pending)
        else:
            block = torch.cat([t.reshape(-1) for t in self._pending])
        self._pending = []
        if block.device.type == "cuda":
            host = torch.empty(block.shape, dtype=block.dtype, pin_memory=True)
            host.copy_(block, non_blocking=True)
            event = torch.cuda.Event()
            event.record()
            self._flushed.append((host, event))
        else:
            self._flushed.append((block, None))

    def values(self, reduce: Callable[[torch.Tensor], None] | None = None) -> list[float]:
        """Every recorded loss, in order (waits only for copies still in flight).

        `reduce`, if given, is applied in place to the whole history on the device first (under
        torchrun: one all-reduce summing every rank's share of each loss)."""
        if reduce is not None:
            blocks = [b.to(self.device) for b, _ in self._flushed] + [t.reshape(-1) for t in self._pending]
            history = torch.cat(blocks) if blocks else torch.zeros(0, device=self.device)
            reduce(history)
            return history.tolist()
        self._flush()
        for _, event in self._flushed:
            if event is not None:
                event.synchronize()
        blocks = [block for block, _ in self._flushed]
        return torch.cat(blocks).tolist() if blocks else []  # one host read
