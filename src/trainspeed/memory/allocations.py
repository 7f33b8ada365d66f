"""Allocator events (the CPU's, the CUDA caching allocator's), read from torch.profiler, and the peak of their
running sum."""

from __future__ import annotations

from typing import Any


def allocation_peak(events: list[tuple[int, int]]) -> int:
    """Peak of the running sum of (time, +/- bytes) allocator events, taken from zero."""
    live = peak = 0
    for _, delta in sorted(events):
        live += delta
        peak = max(peak, live)
    return peak


def profiler_allocations(prof: Any, device_type: str = "cpu") -> list[tuple[int, int]]:
    """(time ns, +/- bytes) of every allocator event on `device_type` in a finished torch.profiler run
    (profile_memory=True)."""
    from torch._C._profiler import _EventType

    found: list[tuple[int, int]] = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        ev = stack.pop()
        if ev.tag == _EventType.Allocation and ev.extra_fields.device.type == device_type:
            found.append((ev.start_time_ns, int(ev.extra_fields.alloc_size)))
        stack.extend(ev.children)
    return found
