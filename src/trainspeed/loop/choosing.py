"""`fit`'s choices, each taken on the job's own timed steps: the thread count on the CPU, whether to keep a
captured step, and whether compiling repays its cost (the cost models they apply are `plan`'s).

`Chooser` owns the choices and what they are taken on (the thread plan and its times, the replay's times); each of
its steps runs timed steps through the `Runner` and returns the loop's next mode.
"""

from __future__ import annotations

import statistics

import torch

from trainspeed.loop import plan
from trainspeed.loop.compiled import STEPS_PER_CALL, build_k_steps, load_times, step_key
from trainspeed.loop.running import Compiled, Job, Runner, flat

THREAD_PROBE_MIN_STEPS = 100

THREAD_PROBE_ROUNDS = 3

EAGER_TIMED_STEPS = 5

REPLAY_TIMED_STEPS = 10


class Chooser:
    """The choices of one job: threads, capture, compile."""

    def __init__(self, job: Job, runner: Runner, threads: int | str, capture: bool | str,
                 compile: bool | str) -> None:
        self.job, self.runner = job, runner
        self.user_threads = torch.get_num_threads()
        self.threads = self.user_threads if threads == "auto" else int(threads)
        self.probe_threads = threads == "auto" and job.dist is None
        self.capture_opt, self.compile_opt = capture, compile
        self._thread_plan: list[int] = []
        self._thread_times: dict[int, list[float]] = {}
        self._replay_times: dict[int, list[float]] = {}
        self.samples: dict[str, list[float]] = {}
        """Per-step seconds of each runner, as timed for the choices."""

    def will_probe_threads(self) -> bool:
        job = self.job
        if job.device.type != "cpu" or not self.probe_threads or self.user_threads == 1:
            return False
        if job.total < THREAD_PROBE_MIN_STEPS:
            job.explain.append(f"{self.user_threads} intra-op threads kept: job too short to probe")
            return False
        self._thread_plan = [n for _ in range(THREAD_PROBE_ROUNDS) for n in (1, self.user_threads) for _ in range(2)]
        self._thread_times = {}
        return True

    def probe_threads_step(self, target: int) -> str:
        runner = self.runner
        while self._thread_plan and runner.done < target:
            n = self._thread_plan.pop(0)
            torch.set_num_threads(n)
            group, _ = runner.next_group()
            self._thread_times.setdefault(n, []).append(runner.run_one("eager", group))
        if self._thread_plan:
            return "threads"
        medians = {n: statistics.median(t) for n, t in self._thread_times.items()}
        decision = plan.pick_threads(medians)
        self.threads = min(medians, key=medians.__getitem__)
        torch.set_num_threads(self.threads)
        self.job.explain.append(decision.reason)
        self.samples["eager"] = self._thread_times[self.threads]
        return "decide"

    def time_eager(self, target: int) -> str:
        runner, job = self.runner, self.job
        samples = self.samples.setdefault("eager", [])
        while len(samples) < EAGER_TIMED_STEPS and runner.done < target:
            group, _ = runner.next_group()
            samples.append(runner.run_one("eager", group))
        if len(samples) >= EAGER_TIMED_STEPS or runner.done >= job.total:
            if job.device.type == "cuda":
                samples[:] = [runner.time_window("eager", EAGER_TIMED_STEPS, target)]
            return "decide"
        return "time_eager"

    def decide_capture(self) -> str:
        runner, job = self.runner, self.job
        left = job.total - runner.done
        eager_s = statistics.median(self.samples["eager"]) if self.samples.get("eager") else 0.0
        if left == 0:
            return "eager"
        if self.capture_opt is False:
            job.explain.append("capture off (capture=False): plain steps throughout")
            return "eager"
        decision = plan.decide_capture(left, eager_s)
        if self.capture_opt == "auto" and self.compile_opt is True:
            self.capture_opt = True  # compiling starts from the captured step
        if self.capture_opt == "auto" and not decision.take:
            job.explain.append(decision.reason)
            return "eager"
        job.explain.append(decision.reason if self.capture_opt == "auto" else "capture forced (capture=True)")
        return "capture"

    def replay_sample(self, elapsed: float) -> str:
        """Time the replay, alternating thread counts on a CPU whose count is ours to choose; returns the mode
        from the next step on."""
        job = self.job
        candidates = sorted({1, self.user_threads}) if self.probe_threads and job.device.type == "cpu" \
            else [self.threads]
        by_threads = self._replay_times
        by_threads.setdefault(torch.get_num_threads(), []).append(elapsed)
        taken = sum(map(len, by_threads.values()))
        if taken < REPLAY_TIMED_STEPS * len(candidates):
            torch.set_num_threads(candidates[taken % len(candidates)])
            return "time_replay"
        medians = {n: statistics.median(t) for n, t in by_threads.items()}
        if len(medians) > 1:
            self.threads = min(medians, key=medians.__getitem__)
            job.explain.append("replay: " + plan.pick_threads(medians).reason)
        torch.set_num_threads(self.threads)
        self.samples["replay"] = by_threads[self.threads]
        eager_s, replay_s = statistics.median(self.samples["eager"]), medians[self.threads]
        decision = plan.decide_replay(replay_s, eager_s)
        job.explain.append(decision.reason)
        if not decision.take:
            return "eager"
        return self._decide_compile(replay_s)

    def _decide_compile(self, replay_s: float) -> str:
        runner, job = self.runner, self.job
        replay = runner.replay
        assert replay is not None
        left = job.total - runner.done
        if self.compile_opt is False or left < STEPS_PER_CALL:
            if self.compile_opt is False:
                job.explain.append("compile off (compile=False)")
            return "replay"
        inputs = [*replay.state, *flat(runner.template)]
        key = step_key(replay.captured, inputs, STEPS_PER_CALL)
        prediction = plan.predict_compile(replay_s, load_times(job.cache_dir, key))
        decision = plan.decide_compile(left, replay_s, prediction)
        if self.compile_opt == "auto" and not decision.take:
            job.explain.append(decision.reason)
            return "replay"
        job.explain.append(decision.reason if self.compile_opt == "auto" else "compile forced (compile=True)")
        width = len(flat(runner.template))
        runner.use_compiled(Compiled(build_k_steps(replay.captured, len(replay.state), width, STEPS_PER_CALL), key))
        return "compiled"

    def keep_graph(self) -> str:
        """A CUDA graph was captured: its replays timed against the eager steps, and kept if faster."""
        graph_s = self.runner.time_window("graph", REPLAY_TIMED_STEPS, self.job.total)
        decision = plan.decide_replay(graph_s, statistics.median(self.samples["eager"]))
        self.job.explain.append("CUDA graph: " + decision.reason)
        self.samples["graph"] = [graph_s]
        return "graph" if decision.take else "eager"
