"""A frame's file:line: never "file.py:None"."""

from __future__ import annotations

import sys
from types import SimpleNamespace

from trainspeed.watch.lines import frame_site, line_of


def test_a_frame_without_a_line_is_named_by_its_function_s_first_line() -> None:
    here = sys._getframe()
    assert line_of(here) == here.f_lineno and frame_site(here) == f"{__file__}:{here.f_lineno}"
    # Python 3.11+ gives f_lineno None for a frame between instructions (python/cpython#94485): a sampled frame of
    # another thread, as the DataLoader's wait was once named "digits_cnn.py:None"
    code = SimpleNamespace(co_filename="digits_cnn.py", co_firstlineno=41)
    caught = SimpleNamespace(f_lineno=None, f_code=code)
    assert line_of(caught) == 41 and frame_site(caught) == "digits_cnn.py:41"
