"""`fit`'s choices, each taken on the job's own timed steps: the thread count on the CPU, whether to keep a
captured step, and whether compiling repays its cost (the cost models they apply are `plan`'s).
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

import torch

from trainspeed.loop import plan
from trainspeed.loop.compiled import STEPS_PER_CALL, build_k_steps, load_times, step_key
from trainspeed.loop.running import _flat, _sync

if TYPE_CHECKING:
    from trainspeed.loop.fit import FastLoop


THREAD_PROBE_MIN_STEPS = 100

THREAD_PROBE_ROUNDS = 3

EAGER_TIMED_STEPS = 5

REPLAY_TIMED_STEPS = 10


def _will_probe_threads(self: FastLoop) -> bool:
    if self.device.type != "cpu" or not self.probe_threads or self.user_threads == 1:
        return False
    if self.total < THREAD_PROBE_MIN_STEPS:
        self.explain.append(f"{self.user_threads} intra-op threads kept: job too short to probe")
        return False
    self.thread_plan = [n for _ in range(THREAD_PROBE_ROUNDS) for n in (1, self.user_threads) for _ in range(2)]
    self.thread_times = {}
    return True


def _probe_threads(self: FastLoop, target: int) -> None:
    while self.thread_plan and self.done < target:
        n = self.thread_plan.pop(0)
        torch.set_num_threads(n)
        group, _ = next(self._groups)
        self.thread_times.setdefault(n, []).append(self._run_one("eager", group))
    if not self.thread_plan:
        medians = {n: statistics.median(t) for n, t in self.thread_times.items()}
        decision = plan.pick_threads(medians)
        self.threads = min(medians, key=medians.__getitem__)
        torch.set_num_threads(self.threads)
        self.explain.append(decision.reason)
        self.samples["eager"] = self.thread_times[self.threads]
        self.mode = "decide"


def _time_eager(self: FastLoop, target: int) -> None:
    samples = self.samples.setdefault("eager", [])
    while len(samples) < EAGER_TIMED_STEPS and self.done < target:
        group, _ = next(self._groups)
        samples.append(self._run_one("eager", group))
    if len(samples) >= EAGER_TIMED_STEPS or self.done >= self.total:
        if self.device.type == "cuda":
            samples[:] = [self._time_window("eager", EAGER_TIMED_STEPS, target)]
        self.mode = "decide"


def _time_window(self: FastLoop, runner: str, steps: int, target: int) -> float:
    """Per-step seconds over a window with the device synchronised at both ends (CUDA probes)."""
    _sync(self.device)
    start, n = self.now(), 0
    while n < steps and self.done < target:
        group, full = next(self._groups)
        self._run_one(runner if runner == "eager" or self._fits_capture(group, full) else "eager", group)
        n += 1
    _sync(self.device)
    return (self.now() - start) / max(n, 1)


def _decide_capture(self: FastLoop) -> None:
    left = self.total - self.done
    eager_s = statistics.median(self.samples["eager"]) if self.samples.get("eager") else 0.0
    if left == 0:
        self.mode = "eager"
        return
    if self.capture_opt is False:
        self.explain.append("capture off (capture=False): plain steps throughout")
        self.mode = "eager"
        return
    decision = plan.decide_capture(left, eager_s)
    if self.capture_opt == "auto" and self.compile_opt is True:
        self.capture_opt = True  # compiling starts from the captured step
    if self.capture_opt == "auto" and not decision.take:
        self.explain.append(decision.reason)
        self.mode = "eager"
        return
    self.explain.append(decision.reason if self.capture_opt == "auto" else "capture forced (capture=True)")
    self.mode = "capture"


def _replay_sample(self: FastLoop, elapsed: float) -> None:
    """Time the replay, alternating thread counts on a CPU whose count is ours to choose."""
    candidates = sorted({1, self.user_threads}) if self.probe_threads and self.device.type == "cpu" else [self.threads]
    by_threads = self.replay_times
    by_threads.setdefault(torch.get_num_threads(), []).append(elapsed)
    taken = sum(map(len, by_threads.values()))
    if taken < REPLAY_TIMED_STEPS * len(candidates):
        torch.set_num_threads(candidates[taken % len(candidates)])
        return
    medians = {n: statistics.median(t) for n, t in by_threads.items()}
    if len(medians) > 1:
        self.threads = min(medians, key=medians.__getitem__)
        self.explain.append("replay: " + plan.pick_threads(medians).reason)
    torch.set_num_threads(self.threads)
    self.samples["replay"] = by_threads[self.threads]
    eager_s, replay_s = statistics.median(self.samples["eager"]), medians[self.threads]
    decision = plan.decide_replay(replay_s, eager_s)
    self.explain.append(decision.reason)
    if not decision.take:
        self.mode = "eager"
        return
    self.mode = "replay"
    self._decide_compile(replay_s)


def _decide_compile(self: FastLoop, replay_s: float) -> None:
    left = self.total - self.done
    if self.compile_opt is False or left < STEPS_PER_CALL:
        if self.compile_opt is False:
            self.explain.append("compile off (compile=False)")
        return
    inputs = [*self.state, *_flat(self.template)]
    self.compile_key = step_key(self.captured, inputs, STEPS_PER_CALL)
    prediction = plan.predict_compile(replay_s, load_times(self.cache_dir, self.compile_key))
    decision = plan.decide_compile(left, replay_s, prediction)
    if self.compile_opt == "auto" and not decision.take:
        self.explain.append(decision.reason)
        return
    self.explain.append(decision.reason if self.compile_opt == "auto" else "compile forced (compile=True)")
    width = len(_flat(self.template))
    self.k_steps = build_k_steps(self.captured, len(self.state), width, STEPS_PER_CALL)
    self.compile_calls = []
    self.mode = "compiled"
