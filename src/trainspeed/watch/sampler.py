"""A background thread that samples what the main thread is doing, and the GPU, at a low rate, and the parts it makes
of its samples: the sites of "other" and of the data waits, the process's CPU and threads, the GPU's utilisation.

Stack samples are taken while no named phase is open or while the script waits on a DataLoader (what a sample says:
`stacks.py`). GPU utilisation and memory come from NVML; the process's CPU use and thread count from psutil. All
buffers are bounded.
"""

from __future__ import annotations

import collections
import resource
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psutil
import torch

from trainspeed.load.core_sharing import CoreSharing
from trainspeed.stats import median
from trainspeed.watch import worker_sampler
from trainspeed.watch.frames import thread_frame
from trainspeed.watch.result import GpuUtil, Process
from trainspeed.watch.sawtooth import detect_sawtooth
from trainspeed.watch.sites import DataSite, FrameworkSite, OtherSite, Sites
from trainspeed.watch.stacks import data_site, machinery_of, site_and_library, source_of

TIMELINE_MAX = 20_000
SWITCH_S = 0.00002
"""The interpreter's switch interval while no other Python thread is busy. The sampler waits for the GIL, and with
Python's 5 ms the main thread hands it over at its next release - most often a torch op - so the lines of a pure-Python
loop got no samples and the torch op after it all of them. A sample lands where the main thread hands the GIL over: at
20 us the shares of a line that releases the GIL for most of its time come near its own clock's (BENCHMARKS.md, "Where
the code's constants come from"). The sampler asks for the GIL once a sample, so the shorter interval costs the main
thread nothing more. While another Python thread is busy (OTHERS_BUSY) the script's interval stays: a shorter one would
switch between them more often."""
OTHERS_BUSY = 0.05
"""Python threads other than the main one and the sampler that used more than this share of a core since the last
look are busy. Idle ones do not compete for the GIL: tqdm's monitor thread, started by any progress bar and asleep
all but once every ten seconds, kept the script's interval for a whole run (and a test's samples off the lines of
a generator) while the rule was "no other Python thread at all"."""
LOOK_S = (0.1, 1.0)
"""When the sampler looks at the other Python threads' CPU times: first this long after it starts (/proc counts a
thread's time in 10 ms ticks), then every this long."""


@dataclass
class Tally:
    """Stack samples by site, and by (site, the library their innermost frame ran in)."""

    samples: Counter[str] = field(default_factory=Counter)
    inside: Counter[tuple[str, str]] = field(default_factory=Counter)
    total: int = 0

    def add(self, site: str, library: str | None) -> None:
        self.samples[site] += 1
        self.total += 1
        if library is not None:
            self.inside[site, library] += 1

    def libraries(self) -> dict[str, str]:
        """Each site -> the library most of its samples ran in, where at least half of them did."""
        return _inside(self.inside, self.samples)

    def data_sites(self, top: int = 8) -> list[DataSite]:
        """The top sites, each with its share of the samples (none where there is none)."""
        total = sum(self.samples.values())
        if not total:
            return []
        inside = self.libraries()
        return [DataSite(site, source_of(site), count, count / total,  # (a function's site has no line: "")
                         inside=inside.get(site), machinery=machinery_of(site))
                for site, count in self.samples.most_common(top)]


@dataclass
class OtherTally(Tally):
    """The samples in "other": by site, by the training framework's innermost function, and by the training loop's
    own line they ran under (its own time and that of everything it called)."""

    framework: Counter[str] = field(default_factory=Counter)
    loop: Counter[str] = field(default_factory=Counter)
    loop_total: int = 0
    """Samples taken since the loop was learnt (what `loop`'s shares are of)."""

    def add_other(self, site: str, outer: str | None, library: str | None, framework: str | None,
                  knows_loop: bool) -> None:
        self.add(site, library)
        if framework is not None:
            self.framework[framework] += 1
        if knows_loop:
            self.loop_total += 1
            if outer is not None:
                self.loop[outer] += 1

    def sites(self) -> Sites:
        """The sites of "other": its lines, the training loop's lines and the framework's functions."""
        if not self.total:
            return Sites()
        inside = self.libraries()
        other = [OtherSite(site, source_of(site), count, count / self.total, inside=inside.get(site))
                 for site, count in self.samples.most_common(10)]
        loop = [OtherSite(site, source_of(site), count, count / self.loop_total)
                for site, count in self.loop.most_common(5)] if self.loop_total else []
        framework = [FrameworkSite(function, count, count / self.total)
                     for function, count in self.framework.most_common(5)]
        return Sites(other, loop, framework)


def _inside(by_library: Mapping[tuple[str, str], int], samples: Mapping[str, int]) -> dict[str, str]:
    """Each site -> the library most of its samples ran in, where at least half of them did."""
    most: dict[str, tuple[str, int]] = {}
    for (site, library), count in by_library.items():
        if count > most.get(site, ("", 0))[1]:
            most[site] = (library, count)
    return {site: library for site, (library, count) in most.items() if 2 * count >= samples[site]}


class GpuSampler:
    """NVML's utilisation and memory of the run's GPU, sampled (the last TIMELINE_MAX readings kept)."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.nvml: Any = None
        self.handle: Any = None
        self.why: str | None = None
        self.util: collections.deque[tuple[float, float]] = collections.deque(maxlen=TIMELINE_MAX)
        self.util_sum = 0.0
        self.util_n = 0
        self.mem_peak: int | None = None

    def want(self, device_index: int) -> None:
        """Start sampling the GPU the run uses (NVML); says why not when it cannot."""
        if self.nvml is not None or self.why is not None:
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
            self.why = f"NVML unavailable: {type(e).__name__}"

    def sample(self, now: float) -> None:
        try:
            util = float(self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
            mem = int(self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used)
        except Exception:
            return
        self.util.append((now - self.t0, util))
        self.util_sum += util
        self.util_n += 1
        self.mem_peak = max(self.mem_peak or 0, mem)

    def part(self, device: str, step_ms: list[float]) -> GpuUtil:
        """The run's GPU utilisation: its mean, and whether it swung with the steps (a saw-tooth)."""
        if device != "cuda":
            return GpuUtil(False, None, 0, False, "the run did not use a CUDA device")
        if self.nvml is None:
            return GpuUtil(False, None, 0, False, self.why or "NVML unavailable")
        timeline = list(self.util)
        period = (median(step_ms) or 0.0) / 1e3
        saw, why = detect_sawtooth([u for _, u in timeline], [t for t, _ in timeline], period)
        mean = self.util_sum / self.util_n if self.util_n else None
        return GpuUtil(True, mean, self.util_n, saw, why, timeline[-2000:])

    def stop(self) -> None:
        if self.nvml is not None:
            try:
                self.nvml.nvmlShutdown()
            except Exception:
                pass


class Sampler(threading.Thread):
    """Samples the main thread's stack (when `in_other()` or `in_data()`), NVML and psutil until stopped."""

    def __init__(self, in_other: Callable[[], bool], hz: float = 50.0, nvml_hz: float = 20.0,
                 in_data: Callable[[], bool] = lambda: False, cores: CoreSharing | None = None) -> None:
        super().__init__(name="trainspeed-sampler", daemon=True)
        self.in_other = in_other
        self.in_data = in_data
        self.period = 1.0 / hz
        self.nvml_every = max(1, round(hz / nvml_hz))
        self.main_id = threading.main_thread().ident
        self.halt = threading.Event()
        self.other = OtherTally()
        """The samples taken in "other"."""
        self.data = Tally()
        """The samples taken while the script waited on a DataLoader, by `stacks.data_site`."""
        self.workers = Tally()
        """What the DataLoader's worker processes ran while making batches, by `data_site` (worker_sampler.py)."""
        self.worker_folder: str | None = None
        self.loop: frozenset[int] = frozenset()
        """Ids of the training loop's code objects (`stacks.loop_codes`), once the watcher has seen a step end."""
        self._loop_codes: tuple[Any, ...] = ()  # kept alive, so that their ids are not reused
        self.gpu = GpuSampler(time.perf_counter())
        self.cpu_percent: list[float] = []
        self.threads: list[int] = []
        self.switch_s = sys.getswitchinterval()
        """The script's switch interval, put back while another Python thread is busy (OTHERS_BUSY) and at stop()."""
        self.cores = cores
        """Whether the training thread and torch's intra-op threads took turns on one CPU (the load's
        `core_sharing`, sampled at this rate; None: not asked)."""

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

    def _sample_stack(self) -> None:
        """One stack sample of the main thread, where it is in "other" or waits on data. No reference to the main
        thread's frames outlives this call: a frame object that does keeps its locals when the frame returns, and a
        thread holding them between samples made printing a tensor on the main thread fail (torch 2.13, Python 3.11:
        "Attempted to make a tensor into a differentiable view ...", now and then an abort)."""
        if self.in_other():
            site, outer, library, framework = site_and_library(thread_frame(self.main_id or 0),
                                                               self.loop)
            if site is not None:
                self.other.add_other(site, outer, library, framework, bool(self.loop))
        elif self.in_data():
            found = data_site(thread_frame(self.main_id or 0))
            if found is not None:
                self.data.add(*found)

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
        cores, gpu = self.cores, self.gpu
        while not self.halt.wait(self.period):
            tick += 1
            now = time.perf_counter()
            if cores is not None:
                if now >= follow_at:  # torch's intra-op threads start at the first parallel op
                    cores.follow_threads()
                    follow_at = now + LOOK_S[1]
                cores.sample()
            self._sample_stack()
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
            if gpu.nvml is not None and tick % self.nvml_every == 0:
                gpu.sample(now)
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
        self.other = OtherTally()
        self.data = Tally()

    def start(self) -> None:
        self.worker_folder = worker_sampler.start(data_site)  # the workers forked from now on sample themselves
        super().start()

    def stop(self) -> None:
        self.halt.set()
        self.workers = Tally(*worker_sampler.stop(self.worker_folder))
        if self.is_alive():
            self.join(timeout=2.0)
        sys.setswitchinterval(self.switch_s)
        self.gpu.stop()

    def part(self) -> Sites:
        """The sampler's part: the sites of its stack samples."""
        sites = self.other.sites()
        return Sites(sites.other, sites.loop, sites.framework, self.data.data_sites(), self.workers.data_sites())

    def process(self, device: str, index: int) -> Process:
        """The process's threads and CPU (the sampler's readings) and the memory it held on `device`."""
        return Process(torch_threads=torch.get_num_threads(),
                       cpu_percent=(sum(self.cpu_percent) / len(self.cpu_percent)) if self.cpu_percent else None,
                       threads=max(self.threads) if self.threads else None,
                       peak_memory_bytes=peak_memory(device, index), memory_capacity_bytes=capacity(device, index))


def peak_memory(device: str, index: int) -> int | None:
    if device == "cuda" and torch.cuda.is_initialized():
        return int(torch.cuda.max_memory_allocated(index))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss * (1 if sys.platform == "darwin" else 1024))  # Linux reports KiB


def capacity(device: str, index: int) -> int | None:
    if device == "cuda" and torch.cuda.is_initialized():
        return int(torch.cuda.get_device_properties(index).total_memory)
    return int(psutil.virtual_memory().total)
