"""A frame's place in the source as the reports name it, `file:line`."""

from __future__ import annotations

from typing import Any


def line_of(frame: Any) -> int:
    """The line a frame runs; where Python has none to give (3.11+ answers None for a frame caught between
    instructions, as a sampled frame of another thread can be: python/cpython#94485), its function's first line,
    so that a report never names "file.py:None"."""
    line = frame.f_lineno
    return line if line is not None else frame.f_code.co_firstlineno


def frame_site(frame: Any) -> str:
    """"file:line" of a frame."""
    return f"{frame.f_code.co_filename}:{line_of(frame)}"
