"""What a stack sample of the training thread says: the user's line it charges, the training loop's line it runs under,
the library and the training framework it runs in, and what the DataLoader was running.

Stack samples are taken while no named phase is open, and name the innermost line of the user's code: that is how
time in "other" gets a file:line (a log record flushed to disk each step shows up as the line that logs). They are
taken while the script waits on a DataLoader too, and name what the DataLoader was running: the line of a transform
or a `__getitem__`, another package's function, or the DataLoader's own code (collating, waiting on its workers). On
steps watched only at their edges the per-call hooks are out, so the phase clock cannot say "inside forward"; the
stack itself says it there: a sample with a module call, autograd, an optimizer, a DataLoader or torch.save on the
stack belongs to a named phase and is skipped.
"""

from __future__ import annotations

import linecache
import os
from typing import Any

import torch

from trainspeed.watch.lines import line_of
from trainspeed.watch.sites import WORKER_WAIT
from trainspeed.watch.syncs import READ_CODES

_READ_PLAIN, _READ_ANY = READ_CODES

_TORCH = os.path.dirname(torch.__file__)
_STDLIB = os.path.dirname(os.__file__)
_SKIP = (_TORCH, os.path.dirname(os.path.dirname(os.path.abspath(__file__))), _STDLIB, "<frozen")
PHASE_FILES = tuple(os.path.join(_TORCH, *parts) for parts in (
    ("nn", "modules", "module.py"),  # forward: every module call goes through Module._call_impl
    ("autograd",),  # backward
    ("optim",),  # optimizer step and zero_grad
    ("utils", "data"),  # data
    ("serialization.py",),  # checkpoint
))
"""Source files whose frames on the main thread's stack mean a named phase is running."""


_WATCHER = os.path.dirname(os.path.abspath(__file__)) + os.sep
"""The watcher's own source: a sample running it, under the user's line, is the watcher's time."""
_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
"""All of trainspeed's source: a sample whose innermost frame outside torch and the standard library runs it (the
watcher, the demo's own loop, the CLI) charges no line of the user's: the lines around it (the launcher
`.venv/bin/trainspeed`, a test calling the demo) did not make that time."""


def _is_site(filename: str) -> bool:
    """Whether a frame of this file can be a site of 'other': the user's code, not torch's, ours, the standard
    library's, an installed package's or generated code's."""
    return not filename.startswith(_SKIP) and "site-packages" not in filename and not filename.startswith("<")


def sites_of(frame: Any, loop: frozenset[int] = frozenset()) -> tuple[str | None, str | None]:
    """The user's file:line a stack sample in "other" charges, and the line of the training loop's own code
    (`loop`: the ids of the user's code objects on the stack at a step's end, `loop_codes`) that the sample
    runs under: the same line, or the loop's line that called the function the sample is in. (None, None)
    when the stack shows a named phase (PHASE_FILES), a counted host read (the sync phase), trainspeed's own
    code at work (the watcher's wrappers around a module call or backward, outside the phase they time: the cost
    of watching, which no line of the script has; the demo's loop; the CLI) or no user code."""
    site = outer = None
    while frame is not None:
        code = frame.f_code
        name = code.co_filename
        if code is _READ_PLAIN or code is _READ_ANY or name.startswith(PHASE_FILES):
            return None, None
        if site is None:
            if name.startswith(_OURS):
                return None, None
            if _is_site(name):
                site = f"{name}:{line_of(frame)}"
        if outer is None and id(code) in loop:
            outer = f"{name}:{line_of(frame)}"
        frame = frame.f_back
    return site, (outer if site is not None else None)


def loop_codes(frame: Any) -> tuple[Any, ...]:
    """The code objects of the user's frames on the stack from `frame` outward (the training loop and the
    functions around it, seen at a step's end), for `sites_of`."""
    codes = []
    while frame is not None:
        if _is_site(frame.f_code.co_filename):
            codes.append(frame.f_code)
        frame = frame.f_back
    return tuple(codes)


_DATA = os.path.join(_TORCH, "utils", "data") + os.sep
DATA_MACHINERY = (
    ("dataloader.py:_try_get_data", WORKER_WAIT),
    ("dataloader.py:_get_data", WORKER_WAIT),
    ("_utils/collate.py", "collating samples into a batch"),
    ("_utils/fetch.py", "fetching a batch's samples one index at a time"),
    ("_utils/pin_memory.py", "pinning the batch's memory"),
    ("sampler.py", "drawing the batch's indices"),
    ("dataset.py", "indexing torch's own Dataset"),
)
"""What the DataLoader's own functions do, by the end of "file:function" under torch/utils/data (the first match)."""


def data_site(frame: Any) -> tuple[str, str | None] | None:
    """Where a sample taken while the script waits on a DataLoader spends its time, and the library its innermost
    frame runs in: the innermost line of the user's own code the DataLoader called (a transform, a Dataset's
    `__getitem__`, a collate_fn) as file:line; else the innermost function of another package it called, as
    "PIL/Image.py:resize"; else the DataLoader's own innermost function, as
    "torch/utils/data/_utils/collate.py:collate" (its wait on worker processes among them). None: no DataLoader
    code on the stack, or the watcher's own code at work inside it (counting a read a transform made)."""
    innermost, package, site = frame, None, None
    while frame is not None:
        code = frame.f_code
        name = code.co_filename
        if name.startswith(_DATA):
            where = site or package or f"torch/utils/data/{name[len(_DATA):].replace(os.sep, '/')}:{code.co_name}"
            return where, library_of(innermost)
        if site is None:
            if name.startswith(_WATCHER):
                return None
            if _is_site(name):
                site = f"{name}:{line_of(frame)}"
            if package is None and not name.startswith(_TORCH):
                package = _package_function(frame)
        frame = frame.f_back
    return None


def machinery_of(where: str) -> str | None:
    """What a data site in the DataLoader's own code does (`DATA_MACHINERY`); None for any other site."""
    if not where.startswith("torch/utils/data/"):
        return None
    return next((what for end, what in DATA_MACHINERY if end in where), "the DataLoader's own code")


def _package_path(filename: str) -> str | None:
    """A source file's path inside site-packages ("lightning/pytorch/loops/fit_loop.py"), with os.sep; None for a
    file of no installed package."""
    _, found, rest = filename.partition("site-packages" + os.sep)
    return rest if found else None


def _package_function(frame: Any) -> str | None:
    """A frame of an installed package as "lightning/pytorch/loops/fit_loop.py:advance"; None for any other."""
    rest = _package_path(frame.f_code.co_filename)
    return None if rest is None else f"{rest.replace(os.sep, '/')}:{frame.f_code.co_name}"


def library_of(frame: Any) -> str | None:
    """The library the innermost Python frame of a sample runs in, as an import name ("torch.distributions",
    "numpy", "json"); None where that frame is the user's own code (a C function it calls has no frame)."""
    if frame is None:
        return None
    name = frame.f_code.co_filename
    if name.startswith(_TORCH + os.sep):
        parts = name[len(_TORCH) + 1:].split(os.sep)
        return "torch" if len(parts) == 1 or parts[0].startswith("_") else f"torch.{parts[0]}"
    rest = _package_path(name)
    if rest is not None:
        return rest.split(os.sep)[0].removesuffix(".py")
    if name.startswith(_STDLIB + os.sep):
        return name[len(_STDLIB) + 1:].split(os.sep)[0].removesuffix(".py")
    return None


FRAMEWORK_PACKAGES = frozenset({"lightning", "pytorch_lightning", "lightning_fabric", "transformers", "accelerate",
                                "ignite", "skorch"})


def framework_function(frame: Any) -> str | None:
    """The innermost frame of a training framework in a sample, as "lightning/pytorch/loops/fit_loop.py:advance"
    (None: no framework's code on the stack)."""
    while frame is not None:
        rest = _package_path(frame.f_code.co_filename)
        if rest is not None and rest.split(os.sep, 1)[0] in FRAMEWORK_PACKAGES:
            return _package_function(frame)
        frame = frame.f_back
    return None


def site_and_library(frame: Any, loop: frozenset[int] = frozenset()
                     ) -> tuple[str | None, str | None, str | None, str | None]:
    """`sites_of`, `library_of` and `framework_function` of one sample."""
    site, outer = sites_of(frame, loop)
    if site is None:
        return None, None, None, None
    return site, outer, library_of(frame), framework_function(frame)


def source_of(site: str) -> str:
    """The source text of a file:line site ("" if unavailable)."""
    path, _, line = site.rpartition(":")
    try:
        return linecache.getline(path, int(line)).strip()
    except ValueError:
        return ""
