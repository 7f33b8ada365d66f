"""`trainspeed.fit`: the training loop that measures its own options and takes the fastest.

Every step `fit` takes is a real training step: the probes that choose threads, and whether to
capture and compile, are the job's own first steps, timed. The order of business:

1. first step eager (it creates the optimizer's state), then a thread-count probe on the CPU;
2. if the steps left repay it, capture the step (a CUDA graph on CUDA; a replayable aten
   graph on the CPU) and keep the capture only if its steps measure faster;
3. on the CPU, if the steps left repay the (predicted or earlier measured) compile time, run
   16 steps per call of an Inductor-compiled function of the captured step.

Losses are recorded without host reads (see recorder.py); the device is synchronised once, at
the end. Batches that do not fit a capture (a short last batch) run eagerly, with the same state.
"""

from __future__ import annotations

import contextlib
import copy
import os
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import torch
from torch import nn

from trainspeed.errors import FitError
from trainspeed.loop import plan
from trainspeed.loop.capture import CaptureRefused, capture_step
from trainspeed.loop.checks import AMP_DTYPES, check_loss, check_parts, positive_int, resolve_device
from trainspeed.loop.compiled import STEPS_PER_CALL, build_k_steps, default_cache_dir, load_times, save_times, step_key
from trainspeed.loop.cuda_graph import WARMUP_STEPS, capture_graph, make_capturable
from trainspeed.loop.data import Batch, TrainData, resolve_data
from trainspeed.loop.ddp import DataParallel
from trainspeed.loop.recorder import LossRecorder
from trainspeed.loop.result import FitResult, FitTimings, Strategy

Group = list[Batch]
"""The micro-batches of one optimizer step (one, unless accumulating)."""
THREAD_PROBE_MIN_STEPS = 100
THREAD_PROBE_ROUNDS = 3
EAGER_TIMED_STEPS = 5
REPLAY_TIMED_STEPS = 10
COMPILED_TIMED_CALLS = 3
SNAPSHOT_SHARE = 0.25
"""The capture's safety copy of the state may take at most this share of the free host memory."""


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _data_device(data: object) -> torch.device | None:
    tensors = data if isinstance(data, (tuple, list)) else getattr(data, "tensors", None)
    if tensors is None:
        tensors = getattr(getattr(data, "dataset", None), "tensors", None)
    found = {t.device for t in tensors or () if isinstance(t, torch.Tensor)}
    return found.pop() if len(found) == 1 else None


def _flat(group: Group) -> list[torch.Tensor]:
    return [t for inputs, target in group for t in (*inputs, target)]


def _unflat(flat: list[torch.Tensor] | tuple[torch.Tensor, ...], micro_batches: int) -> Group:
    """The inverse of _flat: `micro_batches` (inputs..., target) groups from one flat list."""
    width = len(flat) // micro_batches
    return [(tuple(flat[i * width:(i + 1) * width - 1]), flat[(i + 1) * width - 1]) for i in range(micro_batches)]


def _signature(flat: list[torch.Tensor]) -> tuple:
    return tuple((t.shape, t.dtype, t.device) for t in flat)


class FastLoop:
    """The state of one `fit` job; `run(n)` trains n more optimizer steps (all that are left if None)."""

    def __init__(self, model: nn.Module, data: object, loss_fn: Callable[..., torch.Tensor],
                 optimizer: torch.optim.Optimizer, epochs: int, batch_size: int | None = None,
                 device: str | torch.device = "auto", record_every: int | None = 1, *, accumulate: int = 1,
                 shuffle: bool | None = None, amp: str | None = None, threads: int | str = "auto",
                 capture: bool | str = "auto", compile: bool | str = "auto",
                 cache_dir: str | os.PathLike[str] | None = None, distributed: bool | str = "auto",
                 now: Callable[[], float] = time.perf_counter) -> None:
        self.now = now
        start = now()
        positive_int("epochs", epochs)
        positive_int("record_every", record_every, allow_none=True)
        positive_int("accumulate", accumulate)
        for name, value in (("capture", capture), ("compile", compile)):
            if value not in ("auto", True, False):
                raise FitError(f"{name} must be 'auto', True or False; got {value!r}")
        if threads != "auto":
            positive_int("threads", threads)
        check_parts(model, loss_fn, optimizer, amp)
        self.model, self.loss_fn, self.optimizer = model, loss_fn, optimizer
        self.epochs, self.record_every, self.accumulate = epochs, record_every, accumulate
        self.capture_opt, self.compile_opt = capture, compile
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.explain: list[str] = []
        self.user_threads = torch.get_num_threads()
        self.threads = self.user_threads if threads == "auto" else int(threads)
        self.probe_threads = threads == "auto"

        self.dist = DataParallel.detect(distributed)
        self.net: nn.Module = model
        """What the step calls: the model, or its DDP wrapper under torchrun."""
        if self.dist is not None:
            self.device = self.dist.device_for(device, model)
            self._move_model()
            self.net = self.dist.start(model, self.explain)
            self.probe_threads = False
        else:
            chosen = resolve_device(device, model, _data_device(data))
            self.device = chosen if chosen is not None else self._choose_device(data, batch_size)
            self._move_model()
        self.data: TrainData = resolve_data(data, batch_size, shuffle, self.device, pin=self.device.type == "cuda")
        if self.dist is not None:
            self.data = self.dist.shard_data(self.data)
        self.explain.append(self._describe_data())
        self.autocast = (torch.autocast(self.device.type, dtype=AMP_DTYPES[amp]) if amp else contextlib.nullcontext())
        self.scaler = torch.amp.GradScaler(self.device.type) if amp == "fp16" else None
        if amp:
            self.explain.append(f"autocast to {amp}, as asked" + (" with a GradScaler" if self.scaler else ""))

        self.steps_per_epoch = -(-self.data.batches_per_epoch // accumulate)
        self.total = epochs * self.steps_per_epoch
        self.done = 0
        self.recorder = LossRecorder(self.device)
        self.recorded_steps: list[int] = []
        self._groups = self._iter_groups()
        self.mode = "first"
        self.counts: dict[str, int] = {}
        self.samples: dict[str, list[float]] = {}
        self.seconds: dict[str, float] = {}
        self.capture_s = self.compile_s = 0.0
        self.state: list[torch.Tensor] = []
        self._restore_capturable: list[dict] = []
        self.setup_s = now() - start
        self.run_s = 0.0

    # ---- setup -----------------------------------------------------------------------------
    def _choose_device(self, data: object, batch_size: int | None) -> torch.device:
        if not torch.cuda.is_available():
            self.explain.append("device cpu: no CUDA device visible")
            return torch.device("cpu")
        tensors = data if isinstance(data, (tuple, list)) else getattr(data, "tensors", None)
        if not tensors:
            self.explain.append("device cuda: data comes from a loader, so the devices were not raced")
            return torch.device("cuda", torch.cuda.current_device())
        rows = slice(0, batch_size)
        times = {name: self._time_device(torch.device(name), [t[rows] for t in tensors]) for name in ("cpu", "cuda")}
        best = min(times, key=times.__getitem__)
        self.explain.append(f"device {best}: plain steps measured {plan.us(times['cpu'])} on cpu vs "
                            f"{plan.us(times['cuda'])} on cuda (copies of the model, 10 steps each)")
        return torch.device("cuda", torch.cuda.current_device()) if best == "cuda" else torch.device("cpu")

    def _time_device(self, device: torch.device, tensors: list[torch.Tensor], steps: int = 10) -> float:
        model = copy.deepcopy(self.model).to(device)
        optimizer = type(self.optimizer)(model.parameters(), **self.optimizer.defaults)
        *inputs, target = (t.to(device) for t in tensors)
        for i in range(3 + steps):
            if i == 3:
                _sync(device)
                start = self.now()
            loss = self.loss_fn(model(*inputs), target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        _sync(device)
        return (self.now() - start) / steps

    def _move_model(self) -> None:
        self.model.to(self.device)
        for p, state in self.optimizer.state.items():
            for key, value in state.items():
                if isinstance(value, torch.Tensor) and not (key == "step" and value.dim() == 0 and value.is_cpu
                                                             and value.device != p.device and _host_step(self.optimizer, p)):
                    state[key] = value.to(p.device)

    def _describe_data(self) -> str:
        text = self._describe_layout()
        if self.dist is not None:
            k = self.dist.env.world_size
            text += (f"; this rank takes its 1/{k} of every batch" if self.data.loader is None
                     else f"; a DistributedSampler gives each of the {k} ranks its own batches")
        return text

    def _describe_layout(self) -> str:
        d = self.data
        if d.loader is not None:
            return (f"data from a DataLoader ({d.batches_per_epoch} batches of {d.batch_size}), copied to "
                    f"{self.device} with non_blocking copies" + (" from pinned memory" if d.loader.pin_memory else ""))
        how = "one full batch" if d.full_batch else f"batches of {d.batch_size}, " + (
            "shuffled on the device each epoch" if d.shuffle else "in order")
        return f"data resident on {self.device} ({d.rows} rows, {how}): no DataLoader, no copy per step"

    def _iter_groups(self) -> Iterator[tuple[Group, bool]]:
        for _ in range(self.epochs):
            group: Group = []
            full = True
            for batch, is_full in self.data.epoch():
                group.append(batch)
                full = full and is_full
                if len(group) == self.accumulate:
                    yield group, full
                    group, full = [], True
            if group:
                yield group, False

    # ---- one step, each runner ----------------------------------------------------------------
    def _eager(self, group: Group) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        k = len(group)
        total: torch.Tensor | None = None
        for inputs, target in group:
            weight = share = 1.0
            if self.dist is not None and self.data.loader is None:  # resident data: this rank's rows of the batch
                inputs, target, weight, share = self.dist.rows(inputs, target)
            with self.autocast:
                loss = self.loss_fn(self.net(*inputs), target)
            if self.mode == "first":
                check_loss(loss)
            scaled = loss / k if k > 1 else loss
            if weight != 1.0:
                scaled = scaled * weight
            (self.scaler.scale(scaled) if self.scaler else scaled).backward()
            part = loss.detach().float()
            if self.dist is not None:
                part = part * (share if self.data.loader is None else 1.0 / self.dist.env.world_size)
            total = part if total is None else total + part
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        assert total is not None
        return total / k if k > 1 else total

    def _step_of_flat(self, *args: torch.Tensor) -> torch.Tensor:
        """The eager step with every tensor it touches as an argument (what capture needs)."""
        loss = self._eager(_unflat(args[len(self.state):], len(self.template)))
        self._capture_loss = loss.detach()
        return loss

    def _record(self, first_step: int, losses: torch.Tensor) -> None:
        """Record the losses of steps first_step, first_step+1, ... that fall on record_every."""
        every = self.record_every
        if every is None:
            return
        n = losses.numel()
        steps = [s for s in range(first_step, first_step + n) if s % every == 0]
        if not steps:
            return
        if len(steps) == n:
            self.recorder.add(losses)
        else:
            self.recorder.add(losses.reshape(-1)[[s - first_step for s in steps]])
        self.recorded_steps.extend(steps)

    def _run_one(self, runner: str, group: Group) -> float:
        """One optimizer step by `runner`; returns its host wall time."""
        start = self.now()
        if runner == "eager":
            loss = self._eager(group)
        elif runner == "replay":
            with torch.no_grad():
                loss = self.captured.replay(*self.state, *_flat(group))
        else:  # graph
            for static, t in zip(self.static, _flat(group)):
                if static is not t:
                    static.copy_(t)
            self.graph.graph.replay()
            loss = self.graph.loss.clone()
        elapsed = self.now() - start
        self._spent(runner, elapsed)
        self.done += 1
        self.counts[runner] = self.counts.get(runner, 0) + 1
        self._record(self.done, loss)
        return elapsed

    def _spent(self, runner: str, seconds: float) -> None:
        self.seconds[runner] = self.seconds.get(runner, 0.0) + seconds

    def _fits_capture(self, group: Group, full: bool) -> bool:
        return full and len(group) == len(self.template) and _signature(_flat(group)) == self.signature

    # ---- the plan ----------------------------------------------------------------------------
    def run(self, steps: int | None = None) -> None:
        target = self.total if steps is None else min(self.total, self.done + steps)
        before = torch.get_num_threads()
        start = self.now()
        try:
            torch.set_num_threads(self.threads)
            while self.done < target:
                self._advance(target)
            _sync(self.device)
        except RuntimeError as e:
            if self.dist is not None:
                self.dist.failed(e)
            if "same device" in str(e) or "Expected all tensors" in str(e):
                raise FitError(f"a tensor used by the model or loss_fn is on another device than {self.device}: "
                               f"{str(e).splitlines()[0]}") from None
            raise
        finally:
            self.run_s += self.now() - start
            torch.set_num_threads(before)

    def _advance(self, target: int) -> None:
        mode = self.mode
        if mode == "first":
            group, _ = next(self._groups)
            self._run_one("eager", group)
            if self.dist is not None:  # DDP's all-reduce runs in autograd hooks: a captured step would skip it
                self.explain.append("plain steps under DDP: no capture or compile (DDP all-reduces gradients from "
                                    "autograd hooks, which a captured step would leave out)")
                self.mode = "eager"
                return
            self.mode = "threads" if self._will_probe_threads() else "time_eager"
        elif mode == "threads":
            self._probe_threads(target)
        elif mode == "time_eager":
            self._time_eager(target)
        elif mode == "decide":
            self._decide_capture()
        elif mode in ("capture", "replay", "time_replay", "compiled", "graph"):
            self._captured_steps(target)
        else:  # eager
            for _ in range(target - self.done):
                group, _ = next(self._groups)
                self._run_one("eager", group)

    def _will_probe_threads(self) -> bool:
        if self.device.type != "cpu" or not self.probe_threads or self.user_threads == 1:
            return False
        if self.total < THREAD_PROBE_MIN_STEPS:
            self.explain.append(f"{self.user_threads} intra-op threads kept: job too short to probe")
            return False
        self.thread_plan = [n for _ in range(THREAD_PROBE_ROUNDS) for n in (1, self.user_threads) for _ in range(2)]
        self.thread_times: dict[int, list[float]] = {}
        return True

    def _probe_threads(self, target: int) -> None:
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

    def _time_eager(self, target: int) -> None:
        samples = self.samples.setdefault("eager", [])
        while len(samples) < EAGER_TIMED_STEPS and self.done < target:
            group, _ = next(self._groups)
            samples.append(self._run_one("eager", group))
        if len(samples) >= EAGER_TIMED_STEPS or self.done >= self.total:
            if self.device.type == "cuda":
                samples[:] = [self._time_window("eager", EAGER_TIMED_STEPS, target)]
            self.mode = "decide"

    def _time_window(self, runner: str, steps: int, target: int) -> float:
        """Per-step seconds over a window with the device synchronised at both ends (CUDA probes)."""
        _sync(self.device)
        start, n = self.now(), 0
        while n < steps and self.done < target:
            group, full = next(self._groups)
            self._run_one(runner if runner == "eager" or self._fits_capture(group, full) else "eager", group)
            n += 1
        _sync(self.device)
        return (self.now() - start) / max(n, 1)

    def _decide_capture(self) -> None:
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

    def _captured_steps(self, target: int) -> None:
        resident = self.data.full_batch and self.accumulate == 1
        if self.mode == "replay" and resident:
            self._replay_resident(target)
            return
        if self.mode == "compiled" and resident and self.counts.get("compiled", 0) and self.done < target:
            self._compiled_resident(target)
            if self.done < target and self.mode == "compiled":
                self._replay_resident(target)  # fewer than K steps left
            return
        while self.done < target:
            group, full = next(self._groups)
            if self.mode == "capture":
                self._capture(group, full)
            elif self.mode in ("replay", "time_replay", "graph") or not full:
                runner = "graph" if self.mode == "graph" else "replay"
                if not self._fits_capture(group, full):
                    runner = "eager"
                elapsed = self._run_one(runner, group)
                if self.mode == "time_replay" and runner == "replay":
                    self._replay_sample(elapsed)
            else:  # compiled: this step and the next K-1 in one call
                self._compiled_call(group, full, target)
            if self.mode == "eager":
                return

    def _replay_resident(self, target: int) -> None:
        """The hot loop: the same resident full batch every step, nothing but the replay and the record."""
        n = target - self.done
        args = [*self.state, *_flat(self.template)]
        replay, add, every, first = self.captured.replay, self.recorder.add, self.record_every, self.done + 1
        start = self.now()
        with torch.no_grad():
            if every == 1:
                for _ in range(n):
                    add(replay(*args))
            else:
                for step in range(first, first + n):
                    loss = replay(*args)
                    if every is not None and step % every == 0:
                        add(loss)
        self._spent("replay", self.now() - start)
        if every is not None:
            self.recorded_steps.extend(s for s in range(first, first + n) if s % every == 0)
        for _ in range(n):  # keep the data iterator in step with the steps taken
            next(self._groups)
        self.done += n
        self.counts["replay"] = self.counts.get("replay", 0) + n

    def _compiled_resident(self, target: int) -> None:
        """The compiled hot loop: K steps per call on the resident full batch."""
        k = STEPS_PER_CALL
        calls = (target - self.done) // k
        args = [*self.state, *(_flat(self.template) * k)]
        first = self.done + 1
        timed = min(calls, COMPILED_TIMED_CALLS - len(self.compile_calls))
        for i in range(timed):
            self._record(first + i * k, self._call_compiled(args))
        fn, add, every = self.k_steps, self.recorder.add, self.record_every
        start = self.now()
        for i in range(timed, calls):
            losses = fn(*args)
            if every == 1:
                add(losses)
            elif every is not None:
                self._record(first + i * k, losses)
        self._spent("compiled", self.now() - start)
        if every == 1:
            self.recorded_steps.extend(range(first + timed * k, first + calls * k))
        for _ in range(calls * k):
            next(self._groups)
        self.done += calls * k
        self.counts["compiled"] += calls * k

    def _call_compiled(self, args: list[torch.Tensor]) -> torch.Tensor:
        """One timed call of K compiled steps; the first few after the compile give the step time."""
        start = self.now()
        losses = self.k_steps(*args)
        elapsed = self.now() - start
        self._spent("compiled", elapsed)
        if len(self.compile_calls) < COMPILED_TIMED_CALLS:
            self.compile_calls.append(elapsed / STEPS_PER_CALL)
            if len(self.compile_calls) == COMPILED_TIMED_CALLS:
                self._note_compiled()
        return losses

    def _note_compiled(self) -> None:
        step_s = statistics.median(self.compile_calls)
        save_times(self.cache_dir, self.compile_key, self.compile_s, step_s)
        self.explain.append(f"compiled {STEPS_PER_CALL} steps per call: {plan.us(step_s)} per step, compile "
                            f"{self.compile_s:.1f} s (measured)")
        self.samples["compiled"] = list(self.compile_calls)

    def _capture(self, group: Group, full: bool) -> None:
        self.template = group
        self.signature = _signature(_flat(group))
        if not full:
            self._run_one("eager", group)  # wait for a full batch to capture
            return
        if self.device.type == "cuda":
            self._capture_graph(group)
            return
        seen: dict[int, torch.Tensor] = {}
        for t in [*self.model.parameters(), *self.model.buffers(),
                  *(v for s in self.optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor))]:
            seen.setdefault(id(t), t)
        self.state = list(seen.values())
        # Capturing runs the step for real; should it fail part-way, put everything back as it was.
        need = sum(t.numel() * t.element_size() for t in self.state)
        free = psutil.virtual_memory().available
        if need > SNAPSHOT_SHARE * free:
            self.explain.append(f"no capture: a safety copy of the model and optimizer state ({need / 2**30:.1f} GiB) "
                                f"would take more than {SNAPSHOT_SHARE:.0%} of the free memory; plain steps")
            self.mode = "eager"
            self._run_one("eager", group)
            return
        snapshot = [t.detach().clone() for t in self.state]
        rng = torch.get_rng_state()
        start = self.now()
        try:
            self.captured = capture_step(self._step_of_flat, [*self.state, *_flat(group)])
        except Exception as e:  # noqa: BLE001 - any failure to capture leaves the plain step
            with torch.no_grad():
                for t, saved in zip(self.state, snapshot):
                    t.copy_(saved)
            torch.set_rng_state(rng)
            reason = str(e) if isinstance(e, CaptureRefused) else f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
            self.explain.append(f"capture refused: {reason}; plain steps throughout")
            self.mode = "eager"
            self._run_one("eager", group)
            return
        finally:
            self.capture_s += self.now() - start
        del snapshot
        self.done += 1  # the capture's own real step
        self.counts["capture"] = self.counts.get("capture", 0) + 1
        self._record(self.done, self._capture_loss)
        for p in self.model.parameters():
            p.grad = None  # the replay computes gradients without storing them in .grad
        self.explain.append(f"captured the step: {self.captured.ops} aten ops per step, replayed without module "
                            f"calls, autograd or optimizer Python (capture {plan.ms(self.capture_s)}, measured)")
        self.mode = "time_replay"
        self.replay_times: dict[int, list[float]] = {}

    def _replay_sample(self, elapsed: float) -> None:
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

    def _decide_compile(self, replay_s: float) -> None:
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
        self.compile_calls: list[float] = []
        self.mode = "compiled"

    def _compiled_call(self, group: Group, full: bool, target: int) -> None:
        k = STEPS_PER_CALL
        if target - self.done < k or not self._fits_capture(group, full):
            self._run_one("replay" if self._fits_capture(group, full) else "eager", group)
            return
        groups = [group]
        while len(groups) < k:
            nxt, nfull = next(self._groups)
            if not self._fits_capture(nxt, nfull):
                for g in groups:  # a short batch in the way: run these one by one
                    self._run_one("replay", g)
                self._run_one("eager", nxt)
                return
            groups.append(nxt)
        args = [*self.state, *(t for g in groups for t in _flat(g))]
        first_step = self.done + 1
        if self.counts.get("compiled", 0) == 0:
            losses = self._compile_and_check(groups, args)
            if losses is None:
                return
        else:
            losses = self._call_compiled(args)
        self.done += k
        self.counts["compiled"] = self.counts.get("compiled", 0) + k
        self._record(first_step, losses)

    def _compile_and_check(self, groups: list[Group], args: list[torch.Tensor]) -> torch.Tensor | None:
        """Compile on these K steps, and check them against the replay; None (replayed instead) on failure.

        The K steps are replayed first from a snapshot of the state, then the state is put back
        and the compiled function runs them: losses and final state must agree (rtol 1e-4, atol
        1e-5). Either way the job continues from one consistent state.
        """
        snapshot = [t.detach().clone() for t in self.state]
        rng = torch.get_rng_state()
        with torch.no_grad():
            expected = torch.stack([self.captured.replay(*self.state, *_flat(g)) for g in groups])
            expected_state = [t.detach().clone() for t in self.state]
            for t, saved in zip(self.state, snapshot):
                t.copy_(saved)
        torch.set_rng_state(rng)
        start = self.now()
        problem = None
        try:
            losses = self.k_steps(*args)
        except Exception as e:  # noqa: BLE001 - a compiler failure must not end the job
            problem = f"compile failed ({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''})"
        self.compile_s += self.now() - start
        if problem is None:
            worst = max((a - b).abs().max().item() for a, b in zip([losses, *self.state], [expected, *expected_state]))
            if not all(torch.allclose(a, b, rtol=1e-4, atol=1e-5)
                       for a, b in zip([losses, *self.state], [expected, *expected_state])):
                problem = f"the compiled steps disagreed with the replay (largest difference {worst:.3g})"
        if problem is None:
            return losses
        with torch.no_grad():
            for t, saved in zip(self.state, expected_state):
                t.copy_(saved)
        self.explain.append(f"{problem}; replaying instead")
        self.mode = "replay"
        first_step = self.done + 1
        self.done += len(groups)
        self.counts["replay"] = self.counts.get("replay", 0) + len(groups)
        self._record(first_step, expected)
        return None

    def _capture_graph(self, group: Group) -> None:
        if self.scaler is not None:
            self.explain.append("no CUDA graph: the fp16 GradScaler reads its overflow flag on the host; plain steps")
            self.mode = "eager"
            self._run_one("eager", group)
            return
        self._restore_capturable = make_capturable(self.optimizer)
        flat = _flat(group)
        self.static = flat if self.data.full_batch else [t.clone() for t in flat]
        static_group = _unflat(self.static, len(group))

        def feed_next() -> None:  # warm-up steps after the first train on the next batches, as replays will
            nxt, _ = next(self._groups)
            for static, t in zip(self.static, _flat(nxt)):
                if static is not t:
                    static.copy_(t)

        warmups = min(WARMUP_STEPS, self.total - self.done)
        feeds = [lambda: None] + [feed_next] * (warmups - 1)
        start = self.now()
        self.graph = capture_graph(lambda: self._eager(static_group),
                                   lambda: self.optimizer.zero_grad(set_to_none=True), feeds)
        self.capture_s += self.now() - start
        for loss in self.graph.warmup_losses:  # real steps run before the capture
            self.done += 1
            self.counts["capture"] = self.counts.get("capture", 0) + 1
            self._record(self.done, loss)
        if self.graph.graph is None:
            self.explain.append(f"CUDA graph capture failed ({self.graph.error}); plain steps throughout")
            self.mode = "eager"
            return
        eager_s = statistics.median(self.samples["eager"])
        graph_s = self._time_window("graph", REPLAY_TIMED_STEPS, self.total)
        decision = plan.decide_replay(graph_s, eager_s)
        self.explain.append("CUDA graph: " + decision.reason)
        self.samples["graph"] = [graph_s]
        self.mode = "graph" if decision.take else "eager"

    # ---- the end ---------------------------------------------------------------------------
    def finish(self) -> FitResult:
        _sync(self.device)
        for group in self._restore_capturable:
            group["capturable"] = False
        if self.dist is not None:
            losses = self.recorder.values(reduce=self.dist.sum_losses)  # one all-reduce for the whole history
            self.net = self.model
            self.dist.finish()
        else:
            losses = self.recorder.values()
        runners = {k: v for k, v in self.counts.items() if v}
        main = max((r for r in runners if r != "capture"), key=runners.__getitem__, default="eager")
        name = f"{self.device.type}:{main}" if self.dist is None else f"{self.device.type}:ddp{self.dist.env.world_size}:{main}"
        timings = FitTimings(
            total_s=self.setup_s + self.run_s, setup_s=self.setup_s, capture_s=self.capture_s,
            compile_s=self.compile_s, steps=self.done, steps_by_runner=runners,
            step_s_by_runner={k: statistics.median(v) for k, v in self.samples.items() if v},
            seconds_by_runner=dict(self.seconds),
        )
        threads = self.threads if self.device.type == "cpu" else None
        return FitResult(losses, list(self.recorded_steps), self.epochs, self.steps_per_epoch,
                         Strategy(name, str(self.device), threads, list(self.explain)), timings)


def _host_step(optimizer: torch.optim.Optimizer, p: torch.Tensor) -> bool:
    """Whether this parameter's optimizer keeps its step count on the host (non-capturable, non-fused)."""
    for group in optimizer.param_groups:
        if any(q is p for q in group["params"]):
            return not (group.get("capturable") or group.get("fused"))
    return True


def fit(model: nn.Module, data: object, loss_fn: Callable[..., torch.Tensor], optimizer: torch.optim.Optimizer,
        epochs: int, batch_size: int | None = None, device: str | torch.device = "auto",
        record_every: int | None = 1, **options: object) -> FitResult:
    """Train `model` for `epochs` passes over `data`, choosing the fastest way this machine allows.

    `data`: a tuple of tensors `(inputs..., target)`, a Dataset or a DataLoader. Each optimizer
    step computes `loss_fn(model(*inputs), target)`, zero_grad (to None), backward and
    `optimizer.step()`, exactly as a plain loop would. Options: `accumulate=K` (K micro-batches
    of `batch_size` per optimizer step, their mean loss's gradients), `shuffle`, `amp` ("bf16" or
    "fp16"; default fp32), `threads` ("auto" or a count), `capture` and `compile` ("auto", True,
    False), `cache_dir` (where compile times are remembered), `distributed` ("auto": data-parallel
    with DDP when launched by torchrun, each rank on 1/K of every batch; False: ignore the launch).
    """
    loop = FastLoop(model, data, loss_fn, optimizer, epochs, batch_size, device, record_every, **options)  # type: ignore[arg-type]
    loop.run()
    return loop.finish()
