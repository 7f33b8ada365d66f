"""Host reads of a watched run: every read of a tensor's value, tallied by the line that made it.

`HostReads` owns the run's `SyncCounter` (watch/syncs.py) and turns its tally into the sites of the result; the
reads of the step running now are the step's counts' (the watcher is handed each read as `on_read`).
"""

from __future__ import annotations

from typing import Any

from trainspeed.watch.sampler import source_of
from trainspeed.watch.sites import Reads, SyncSite
from trainspeed.watch.syncs import ReadCallback, SyncCounter


class HostReads:
    """The run's host reads: counted by line over the whole run, each one handed to `on_read` as it ends (but
    during a quiet run, whose reads only go to their line's tally)."""

    def __init__(self) -> None:
        self.counter = SyncCounter()
        self._on_read: ReadCallback | None = None
        self._quiet_from_s = 0.0
        """The seconds of synchronisation tallied as the quiet run under way started (`wake` takes the difference)."""

    def bind(self, on_read: ReadCallback) -> None:
        """Hand each read to `on_read` (before the watch starts)."""
        self._on_read = on_read
        self.counter = SyncCounter(on_read=on_read)

    def device_seen(self) -> None:
        """The run copies tensors to an accelerator: from now on reading a CPU tensor is no sync."""
        if not self.counter.device_only:
            self.counter.count_device_reads_only()

    def go_quiet(self) -> None:
        """A quiet run starts: reads go only to their line's tally."""
        self._quiet_from_s = self.counter.time_reads(None)

    def wake(self) -> float:
        """The quiet run ends: each read is handed on again. Returns the seconds its reads took."""
        return self.counter.time_reads(self._on_read) - self._quiet_from_s

    def freeze(self) -> None:
        """The reads tallied so far are all there will be (a window is full; its hooks come out a moment later)."""
        self.counter.freeze()

    def count_from_now(self) -> None:
        """The reads tallied so far are left out (a window opens: its reads are counted from here)."""
        self.counter.count_from_now()

    def host_read(self, op: str, t0: float, t1: float, frame: Any) -> None:
        """A host read that the hooks saw (torch.cuda.synchronize) ran from t0 to t1, made by `frame`."""
        self.counter.record(op, t0, t1, frame)

    def start(self) -> None:
        self.counter.__enter__()

    def stop(self) -> None:
        self.counter.__exit__(None, None, None)

    def part(self) -> Reads:
        """The places that read device tensors (the syncs) and those that read CPU tensors, each the most time
        first."""
        merged: dict[tuple[str, str, bool], list[float]] = {}
        for where, op, count, seconds, host in self.counter.sites():  # several instructions of one line merge
            entry = merged.setdefault((where, op, host), [0, 0.0])
            entry[0] += count
            entry[1] += seconds
        sites = sorted(((host, SyncSite(where, op, int(c), t * 1e3, source_of(where)))
                        for (where, op, host), (c, t) in merged.items()), key=lambda hs: hs[1].total_ms, reverse=True)
        return Reads([s for host, s in sites if not host], [s for host, s in sites if host])
