"""A background thread that samples what the main thread is doing, and the GPU, at a low rate.

Stack samples are taken while no named phase is open, and name the innermost line of the
user's code: that is how time in "other" gets a file:line (a log record flushed to disk each
step shows up as the line that logs). They are taken while the script waits on a DataLoader too, and
name what the DataLoader was running: the line of a transform or a `__getitem__`, another package's
function, or the DataLoader's own code (collating, waiting on its workers). On steps watched only at their edges the per-call hooks
are out, so the phase clock cannot say "inside forward"; the stack itself says it there: a
sample with a module call, autograd, an optimizer, a DataLoader or torch.save on the stack
belongs to a named phase and is skipped. GPU utilisation and memory come from NVML; the process's
CPU use and thread count from psutil. All buffers are bounded.
"""

from __future__ import annotations

import collections
import linecache
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil
import torch

from trainspeed.watch import worker_sampler
from trainspeed.watch.core_sharing import CoreSharing
from trainspeed.watch.lines import line_of
from trainspeed.watch.result import WORKER_WAIT
from trainspeed.watch.syncs import READ_CODES

_READ_PLAIN, _READ_ANY = READ_CODES

_TORCH = os.path.dirname(torch.__file__)
_STDLIB = os.path.dirname(os.__file__)
_SKIP = (_TORCH, os.path.dirname(os.path.dirname(os.path.abspath(__file__))), _STDLIB, "<frozen")
TIMELINE_MAX = 20_000
SWITCH_S = 0.00002
"""The interpreter's switch interval while no other Python thread is busy. The sampler waits for the GIL, and with
Python's 5 ms the main thread hands it over at its next release - most often a torch op - so the lines of a
pure-Python loop got no samples and the torch op after it all of them (a generator's 3 ms of Python per batch: 48 of
52 samples on its `yield torch.randn(...)`, none on the loop; 2026-11-23). A sample lands where the main thread
hands the GIL over: at 0.2 ms, the next release of work shorter than that still drew the sample, and a Pillow
augmentation line that released it for 150 us of each sample's 190 us was given 68% to 77% of the data wait's
samples against the 60% its own clock read (examples/realistic/pil_augment.py, four runs, 2026-11-28); at 20 us,
65% to 71%. The sampler asks for the GIL once a sample, so the shorter interval costs the main thread nothing more.
While another Python thread is busy (OTHERS_BUSY) the script's interval stays: a shorter one would switch between
them more often."""
OTHERS_BUSY = 0.05
"""Python threads other than the main one and the sampler that used more than this share of a core since the last
look are busy. Idle ones do not compete for the GIL: tqdm's monitor thread, started by any progress bar and asleep
all but once every ten seconds, kept the script's interval for a whole run (and a test's samples off the lines of
a generator) while the rule was "no other Python thread at all"."""
LOOK_S = (0.1, 1.0)
"""When the sampler looks at the other Python threads' CPU times: first this long after it starts (/proc counts a
thread's time in 10 ms ticks), then every this long."""
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


def _is_site(filename: str) -> bool:
    """Whether a frame of this file can be a site of 'other': the user's code, not torch's, ours, the standard
    library's, an installed package's or generated code's."""
    return not filename.startswith(_SKIP) and "site-packages" not in filename and not filename.startswith("<")


def sites_of(frame: Any, loop: frozenset[int] = frozenset()) -> tuple[str | None, str | None]:
    """The user's file:line a stack sample in "other" charges, and the line of the training loop's own code
    (`loop`: the ids of the user's code objects on the stack at a step's end, `loop_codes`) that the sample
    runs under: the same line, or the loop's line that called the function the sample is in. (None, None)
    when the stack shows a named phase (PHASE_FILES), a counted host read (the sync phase), the watcher's
    own code at work for that line (its wrappers around a module call or backward, outside the phase they
    time: the cost of watching, which no line of the script has) or no user code."""
    site = outer = None
    while frame is not None:
        code = frame.f_code
        name = code.co_filename
        if code is _READ_PLAIN or code is _READ_ANY or name.startswith(PHASE_FILES):
            return None, None
        if site is None:
            if name.startswith(_WATCHER):
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


class Sampler(threading.Thread):
    """Samples the main thread's stack (when `in_other()` or `in_data()`), NVML and psutil until stopped."""

    def __init__(self, in_other: Callable[[], bool], hz: float = 50.0, nvml_hz: float = 20.0,
                 in_data: Callable[[], bool] = lambda: False) -> None:
        super().__init__(name="trainspeed-sampler", daemon=True)
        self.in_other = in_other
        self.in_data = in_data
        self.period = 1.0 / hz
        self.nvml_every = max(1, round(hz / nvml_hz))
        self.main_id = threading.main_thread().ident
        self.halt = threading.Event()
        self.other_samples: collections.Counter[str] = collections.Counter()
        self.other_inside: collections.Counter[tuple[str, str]] = collections.Counter()
        self.other_framework: collections.Counter[str] = collections.Counter()
        """Samples in "other" by the training framework's innermost function on the stack."""
        """(site, library) -> samples of that site whose innermost frame ran in that library (`library_of`)."""
        self.other_total = 0
        self.loop: frozenset[int] = frozenset()
        """Ids of the training loop's code objects (`loop_codes`), once the watcher has seen a step end."""
        self._loop_codes: tuple[Any, ...] = ()  # kept alive, so that their ids are not reused
        self.other_loop: collections.Counter[str] = collections.Counter()
        """The training loop's line -> samples under it: its own time and the time of everything it called."""
        self.loop_total = 0
        """Samples in 'other' taken since the loop was learnt (what `other_loop`'s shares are of)."""
        self.data_samples: collections.Counter[str] = collections.Counter()
        """Samples taken while the script waited on a DataLoader, by `data_site`."""
        self.data_inside: collections.Counter[tuple[str, str]] = collections.Counter()
        """(data site, library) -> samples of that site whose innermost frame ran in that library."""
        self.data_total = 0
        self.util: collections.deque[tuple[float, float]] = collections.deque(maxlen=TIMELINE_MAX)
        self.util_sum = 0.0
        self.util_n = 0
        self.gpu_mem_peak: int | None = None
        self.cpu_percent: list[float] = []
        self.threads: list[int] = []
        self.t0 = time.perf_counter()
        self.nvml: Any = None
        self.handle: Any = None
        self.nvml_why: str | None = None
        self.switch_s = sys.getswitchinterval()
        """The script's switch interval, put back while another Python thread is busy (OTHERS_BUSY) and at stop()."""
        self.worker_folder: str | None = None
        self.worker_samples: collections.Counter[str] = collections.Counter()
        """What the DataLoader's worker processes ran while making batches, by `data_site` (worker_sampler.py)."""
        self.worker_inside: collections.Counter[tuple[str, str]] = collections.Counter()
        self.cores = CoreSharing()
        """Whether the training thread and torch's intra-op threads took turns on one CPU (`core_sharing`)."""

    def want_gpu(self, device_index: int) -> None:
        """Start sampling the GPU the run uses (NVML); says why not when it cannot."""
        if self.nvml is not None or self.nvml_why is not None:
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            uuid = getattr(torch.cuda.get_device_properties(device_index), "uuid", None)
            handle = None
            if uuid is not None:
                text = str(uuid)
                try:
                    handle = pynvml.nvmlDeviceGetHandleByUUID(text if text.startswith("GPU-") else f"GPU-{text}")
                except Exception:
                    handle = None
            self.handle = handle or pynvml.nvmlDeviceGetHandleByIndex(device_index)
            self.nvml = pynvml
        except Exception as e:  # no NVML library or driver: utilisation is simply unavailable
            self.nvml_why = f"NVML unavailable: {type(e).__name__}"

    def _sample_gpu(self, now: float) -> None:
        try:
            util = float(self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
            mem = int(self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used)
        except Exception:
            return
        self.util.append((now - self.t0, util))
        self.util_sum += util
        self.util_n += 1
        self.gpu_mem_peak = max(self.gpu_mem_peak or 0, mem)

    def _others(self) -> list[int]:
        """Native ids of the Python threads other than the main one and this one."""
        return [t.native_id for t in threading.enumerate()
                if t is not self and t.ident != self.main_id and t.native_id is not None]

    @staticmethod
    def _cpu_of(proc: psutil.Process) -> dict[int, float] | None:
        """CPU seconds of each of the process's threads by native id (None where the OS does not tell)."""
        try:
            return {t.id: t.user_time + t.system_time for t in proc.threads()}
        except (psutil.Error, OSError):
            return None

    def run(self) -> None:
        proc = psutil.Process()
        proc.cpu_percent(None)
        tick = 0
        switch = self.switch_s
        last_cpu = time.perf_counter()
        seen, seen_at = self._cpu_of(proc), last_cpu
        look_at = last_cpu + LOOK_S[0]
        busy = True  # until the first look says otherwise
        looked = set(self._others())
        follow_at = last_cpu
        while not self.halt.wait(self.period):
            tick += 1
            now = time.perf_counter()
            if now >= follow_at:  # torch's intra-op threads start at the first parallel op
                self.cores.follow_threads()
                follow_at = now + LOOK_S[1]
            self.cores.sample()
            if self.in_other():
                # no reference to the main thread's frames outlives this line: a frame object that does
                # keeps its locals when the frame returns, and a thread holding them between samples made
                # printing a tensor on the main thread fail (torch 2.13, Python 3.11: "Attempted to make a
                # tensor into a differentiable view ...", now and then an abort)
                site, outer, library, framework = site_and_library(sys._current_frames().get(self.main_id or 0),
                                                                   self.loop)
                if site is not None:
                    self.other_samples[site] += 1
                    self.other_total += 1
                    if library is not None:
                        self.other_inside[site, library] += 1
                    if framework is not None:
                        self.other_framework[framework] += 1
                    if self.loop:
                        self.loop_total += 1
                        if outer is not None:
                            self.other_loop[outer] += 1
            elif self.in_data():
                found = data_site(sys._current_frames().get(self.main_id or 0))  # (no frame kept: as above)
                if found is not None:
                    site, library = found
                    self.data_samples[site] += 1
                    self.data_total += 1
                    if library is not None:
                        self.data_inside[site, library] += 1
            others = self._others()
            if not looked.issuperset(others):  # a thread started since the last look: busy until a look says not
                busy, looked = True, set(others)
                seen, seen_at, look_at = self._cpu_of(proc), now, now + LOOK_S[0]
            elif now >= look_at:
                cpu = self._cpu_of(proc)
                busy = cpu is None or seen is None or any(
                    (cpu.get(n, 0.0) - seen.get(n, 0.0)) / (now - seen_at) > OTHERS_BUSY for n in others)
                seen, seen_at, look_at, looked = cpu, now, now + LOOK_S[1], set(others)
            quiet = not others or not busy
            wanted = SWITCH_S if quiet and self.switch_s > SWITCH_S else self.switch_s
            if wanted != switch:  # (the interpreter keeps it in microseconds: not compared with its own)
                sys.setswitchinterval(wanted)
                switch = wanted
            if self.nvml is not None and tick % self.nvml_every == 0:
                self._sample_gpu(now)
            if now - last_cpu >= 1.0 and len(self.cpu_percent) < 100_000:
                self.cpu_percent.append(proc.cpu_percent(None))
                self.threads.append(proc.num_threads())
                last_cpu = now

    def learn_loop(self, codes: tuple[Any, ...]) -> None:
        """The training loop's code objects (`loop_codes` at a step's end): from now on a sample also names
        the loop's line it runs under."""
        self._loop_codes = codes
        self.loop = frozenset(id(code) for code in codes)

    def forget_other(self) -> None:
        """Drop the stack samples taken so far, in 'other' and in data (the watcher starts measuring over)."""
        self.other_samples = collections.Counter()
        self.other_inside = collections.Counter()
        self.other_framework = collections.Counter()
        self.other_loop = collections.Counter()
        self.loop_total = 0
        self.other_total = 0
        self.data_samples = collections.Counter()
        self.data_inside = collections.Counter()
        self.data_total = 0

    def start(self) -> None:
        self.worker_folder = worker_sampler.start(data_site)  # the workers forked from now on sample themselves
        super().start()

    def stop(self) -> None:
        self.halt.set()
        self.worker_samples, self.worker_inside = worker_sampler.stop(self.worker_folder)
        if self.is_alive():
            self.join(timeout=2.0)
        self.cores.close()
        sys.setswitchinterval(self.switch_s)
        if self.nvml is not None:
            try:
                self.nvml.nvmlShutdown()
            except Exception:
                pass
