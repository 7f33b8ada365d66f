"""A watched run's timeline as a Chrome trace-event JSON object, which ui.perfetto.dev and chrome://tracing open.

One process, one track (a "thread") per kind of span: the kept steps; the host's phases within them; the host
reads with the line that made them; on CUDA the phases' device spans; and the profiler window's host ops and
device kernels where it was torch.profiler. Times are microseconds from the first span. The steps are those
the per-step plots keep (the detailed steps, at most PLOT_STEPS), so the file's size does not grow with the
run's length.
"""

from __future__ import annotations

from typing import Any

from trainspeed.watch.result import WatchResult
from trainspeed.watch.trace import Trace

SCHEMA = "trainspeed.trace/1"
DEVICE_PHASES = ("h2d", "forward", "backward", "optimizer")
TRACKS = {"steps": 1, "host phases": 2, "host reads": 3, "device phases (CUDA events)": 4,
          "profiler window: host ops": 5, "profiler window: device kernels": 6}


def _event(name: str, track: str, t0: float, t1: float, origin: float, args: dict[str, Any] | None = None,
           cat: str = "trainspeed") -> dict[str, Any]:
    event = {"name": name, "cat": cat, "ph": "X", "pid": 1, "tid": TRACKS[track],
             "ts": round((t0 - origin) * 1e6, 3), "dur": round(max(t1 - t0, 0.0) * 1e6, 3)}
    if args:
        event["args"] = args
    return event


def _device_anchor(segments: list[tuple[str, float, float]]) -> float | None:
    """Where a step's device spans start on the host's clock: the first device phase's host edge, where its
    first CUDA event was recorded."""
    return next((t0 for phase, t0, _ in segments if phase in DEVICE_PHASES), None)


def trace_events(trace: Trace, title: str = "trainspeed doctor") -> list[dict[str, Any]]:
    starts = [s.start for s in trace.steps] + [op.start for op in trace.ops]
    if not starts:
        return []
    origin = min(starts)
    events: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": title}}]
    events += [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}}
               for name, tid in TRACKS.items()]
    events += [{"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid, "args": {"sort_index": tid}}
               for tid in TRACKS.values()]
    for step in trace.steps:
        by_phase: dict[str, float] = {}
        for phase, t0, t1 in step.segments:
            by_phase[phase] = by_phase.get(phase, 0.0) + (t1 - t0) * 1e3
        events.append(_event(f"step {step.index}", "steps", step.start, step.end, origin,
                             {"step": step.index, "host_ms": {p: round(ms, 4) for p, ms in by_phase.items()}}))
        events += [_event(phase, "host phases", t0, t1, origin, cat="phase") for phase, t0, t1 in step.segments]
        events += [_event(f"{op} at {site}", "host reads", t0, t1, origin, {"op": op, "where": site, "sync": not host},
                          cat="host read" if host else "sync")
                   for op, site, t0, t1, host in step.reads]
        anchor = _device_anchor(step.segments)
        if step.device and anchor is not None:
            events += [_event(phase, "device phases (CUDA events)", anchor + t0, anchor + t1, origin,
                              {"placed": "from the step's first CUDA event, at its host edge"}, cat="device")
                       for phase, t0, t1 in step.device]
    for op in trace.ops:
        track = "profiler window: device kernels" if op.track == "device" else "profiler window: host ops"
        events.append(_event(op.name, track, op.start, op.end, origin, cat="window"))
    return events


def chrome_trace(result: WatchResult, title: str = "trainspeed doctor") -> dict[str, Any]:
    """The trace-event object of a run watched with trace=True (ValueError without a trace)."""
    trace = result.trace
    if trace is None:
        raise ValueError("this run was not watched with trace=True")
    return {
        "traceEvents": trace_events(trace, title),
        "displayTimeUnit": "ms",
        "otherData": {"schema": SCHEMA, "title": title, "device": trace.device, "steps": len(trace.steps),
                      "window_ops": len(trace.ops), "notes": trace.notes},
    }
