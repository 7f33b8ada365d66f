"""What the DataLoader's worker processes run while they make batches: stack samples taken inside each worker.

The training process's own samples of a wait on workers say only that it waited. While watching, torch's worker
loop (`torch.utils.data._utils.worker._worker_loop`, what each worker process runs) is wrapped: a worker forked from
the watched process (Linux's default) starts a thread that samples its main thread at 50 Hz and, while it makes a
batch (torch's fetcher on the stack: the Dataset's `__getitem__`, the transforms, the collate_fn), tallies the place
`data_site` names, as the training process's sampler does. Each worker writes its tallies to a file of the watch's
folder every second and as it ends (a temporary file, then renamed), and the watch merges them as it stops. A worker
started by spawn (macOS and Windows' default) imports this module afresh and runs the loop as it is. Nothing the
worker computes changes: the thread only reads its stack.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch.utils.data._utils.worker as worker_module

from trainspeed.watch.frames import thread_frame

PERIOD_S = 0.02
FLUSH_S = 1.0
_FETCH = os.path.join("utils", "data", "_utils", "fetch.py")

Site = Callable[[Any], "tuple[str, str | None] | None"]
"""A frame -> (the place a sample names, the library its innermost frame ran in): the sampler's `data_site`."""

_state: dict[str, Any] = {"folder": None, "loop": None, "site": None}
"""The watch's folder while one is on, torch's own worker loop (put back when it stops), and what names a sample."""


def start(site: Site) -> str | None:
    """Wrap torch's worker loop, its samples named by `site` and tallied to a new folder (its path; None where it
    cannot be made)."""
    if _state["folder"] is not None:
        return None  # another watch in this process has it
    try:
        folder = tempfile.mkdtemp(prefix="trainspeed-workers-")
    except OSError:
        return None
    _state["folder"], _state["loop"], _state["site"] = folder, worker_module._worker_loop, site
    worker_module._worker_loop = _sampled_loop
    return folder


def stop(folder: str | None) -> tuple[Counter[str], Counter[tuple[str, str]]]:
    """Put torch's worker loop back and merge the workers' tallies: (samples by site, by site and library)."""
    samples: Counter[str] = Counter()
    inside: Counter[tuple[str, str]] = Counter()
    if folder is None or _state["folder"] != folder:
        return samples, inside
    worker_module._worker_loop = _state["loop"]
    _state["folder"] = _state["loop"] = _state["site"] = None
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                found = json.load(f)
            samples.update(found["samples"])
            inside.update({(site, library): n for site, library, n in found["inside"]})
        except (OSError, ValueError, KeyError, TypeError):  # a file a worker was killed writing
            continue
    shutil.rmtree(folder, ignore_errors=True)
    return samples, inside


def _sampled_loop(*args: Any, **kwargs: Any) -> Any:
    """torch's worker loop, with a sampling thread beside it where the worker was forked from a watched process."""
    folder, loop, site = _state["folder"], _state["loop"], _state["site"]
    if loop is None:  # a spawned worker imported this module afresh: torch's loop is its own there
        return worker_module._worker_loop(*args, **kwargs)
    halt = threading.Event()
    thread = None
    try:
        thread = threading.Thread(target=_sample, args=(threading.get_ident(), folder, site, halt), daemon=True,
                                  name="trainspeed-worker-sampler")
        thread.start()
    except Exception:  # no thread: the worker runs unwatched
        thread = None
    try:
        return loop(*args, **kwargs)
    finally:
        halt.set()
        if thread is not None:
            thread.join(timeout=2 * FLUSH_S)


def worker_site(frame: Any, site: Site) -> tuple[str, str | None] | None:
    """Where a worker's sample falls while it makes a batch (`site`), or None while it waits for indices or hands a
    batch over (no fetcher on the stack)."""
    f = frame
    while f is not None and not f.f_code.co_filename.endswith(_FETCH):
        f = f.f_back
    return site(frame) if f is not None else None


def _sample(main_id: int, folder: str, site: Site, halt: threading.Event) -> None:
    samples: Counter[str] = Counter()
    inside: Counter[tuple[str, str]] = Counter()
    path = os.path.join(folder, f"worker-{os.getpid()}.json")
    ticks = 0
    while not halt.wait(PERIOD_S):
        try:
            found = worker_site(thread_frame(main_id), site)  # no frame kept past this line
        except Exception:
            found = None
        if found is not None:
            where, library = found
            samples[where] += 1
            if library is not None:
                inside[where, library] += 1
        ticks += 1
        if ticks * PERIOD_S >= FLUSH_S:
            ticks = 0
            _write(path, samples, inside)
    _write(path, samples, inside)


def _write(path: str, samples: Counter[str], inside: Counter[tuple[str, str]]) -> None:
    if not samples:
        return
    try:
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump({"samples": dict(samples), "inside": [[s, lib, n] for (s, lib), n in inside.items()]}, f)
        os.replace(path + ".tmp", path)
    except OSError:  # the watch has stopped and removed its folder
        pass
