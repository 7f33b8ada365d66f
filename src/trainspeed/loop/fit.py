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

import copy
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from trainspeed._cache import default_cache_dir
from trainspeed.amp import amp_context
from trainspeed.errors import FitError
from trainspeed.loop import capturing, plan
from trainspeed.loop.checks import check_parts, positive_int, resolve_device
from trainspeed.loop.choosing import Chooser
from trainspeed.loop.data import TrainData, resolve_data
from trainspeed.loop.ddp import DataParallel
from trainspeed.loop.result import FitResult, FitTimings, Strategy
from trainspeed.loop.running import COMPILED_TIMED_CALLS, Job, Runner, data_device, sync


class FastLoop:
    """The state of one `fit` job; `run(n)` trains n more optimizer steps (all that are left if None).

    The job's set-up and its mode (which step comes next) are this class's; the steps as they run and what they
    left are its `Runner`'s (running.py), the choices taken on them its `Chooser`'s (choosing.py), and capturing
    and compiling the step plain functions of both (capturing.py)."""

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
        cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.explain: list[str] = []

        self.dist = DataParallel.detect(distributed)
        self.net: nn.Module = model
        """What the step calls: the model, or its DDP wrapper under torchrun."""
        if self.dist is not None:
            self.device = self.dist.device_for(device, model)
            self._move_model()
            self.net = self.dist.start(model, self.explain)
        else:
            chosen = resolve_device(device, model, data_device(data))
            self.device = chosen if chosen is not None else self._choose_device(data, batch_size)
            self._move_model()
        self.data: TrainData = resolve_data(data, batch_size, shuffle, self.device, pin=self.device.type == "cuda")
        if self.dist is not None:
            self.data = self.dist.shard_data(self.data)
        self.explain.append(self._describe_data())
        scaler = torch.amp.GradScaler(self.device.type) if amp == "fp16" else None
        if amp:
            self.explain.append(f"autocast to {amp}, as asked" + (" with a GradScaler" if scaler else ""))

        self.steps_per_epoch = -(-self.data.batches_per_epoch // accumulate)
        self.job = Job(model=model, net=self.net, loss_fn=loss_fn, optimizer=optimizer, data=self.data,
                       device=self.device, autocast=amp_context(self.device.type, amp), scaler=scaler, dist=self.dist,
                       epochs=epochs, accumulate=accumulate, record_every=record_every,
                       total=epochs * self.steps_per_epoch, cache_dir=cache, now=now, explain=self.explain)
        self.runner = Runner(self.job)
        self.chooser = Chooser(self.job, self.runner, threads, capture, compile)
        self.mode = "first"
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
        self.explain.append(f"device {best}: plain steps measured {plan.duration(times['cpu'])} on cpu vs "
                            f"{plan.duration(times['cuda'])} on cuda (copies of the model, 10 steps each)")
        return torch.device("cuda", torch.cuda.current_device()) if best == "cuda" else torch.device("cpu")

    def _time_device(self, device: torch.device, tensors: list[torch.Tensor], steps: int = 10) -> float:
        """Seconds per step of a copy of the model and optimizer on `device` (the race of `_choose_device`)."""
        model = copy.deepcopy(self.model).to(device)
        optimizer = type(self.optimizer)(model.parameters(), **self.optimizer.defaults)
        *inputs, target = (t.to(device) for t in tensors)
        for i in range(3 + steps):
            if i == 3:
                sync(device)
                start = self.now()
            loss = self.loss_fn(model(*inputs), target)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        sync(device)
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


    # ---- the plan ----------------------------------------------------------------------------
    def run(self, steps: int | None = None) -> None:
        runner, total = self.runner, self.job.total
        target = total if steps is None else min(total, runner.done + steps)
        before = torch.get_num_threads()
        start = self.now()
        try:
            torch.set_num_threads(self.chooser.threads)
            while runner.done < target:
                self._advance(target)
            sync(self.device)
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
        mode, runner, chooser = self.mode, self.runner, self.chooser
        if mode == "first":
            group, _ = runner.next_group()
            runner.run_one("eager", group, check=True)
            if self.dist is not None:  # DDP's all-reduce runs in autograd hooks: a captured step would skip it
                self.explain.append("plain steps under DDP: no capture or compile (DDP all-reduces gradients from "
                                    "autograd hooks, which a captured step would leave out)")
                self.mode = "eager"
                return
            self.mode = "threads" if chooser.will_probe_threads() else "time_eager"
        elif mode == "threads":
            self.mode = chooser.probe_threads_step(target)
        elif mode == "time_eager":
            self.mode = chooser.time_eager(target)
        elif mode == "decide":
            self.mode = chooser.decide_capture()
        elif mode in ("capture", "replay", "time_replay", "compiled", "graph"):
            self._captured_steps(target)
        else:  # eager
            for _ in range(target - runner.done):
                group, _ = runner.next_group()
                runner.run_one("eager", group)

    def _captured_steps(self, target: int) -> None:
        runner, job = self.runner, self.job
        resident = self.data.full_batch and job.accumulate == 1
        if self.mode == "replay" and resident:
            runner.replay_resident(target)
            return
        if self.mode == "compiled" and resident and runner.counts.get("compiled", 0) and runner.done < target:
            runner.compiled_resident(target)
            if runner.done < target and self.mode == "compiled":
                runner.replay_resident(target)  # fewer than K steps left
            return
        while runner.done < target:
            group, full = runner.next_group()
            if self.mode == "capture":
                self.mode = capturing.capture(job, runner, group, full)
                if self.mode == "graph_captured":
                    self.mode = self.chooser.keep_graph()
            elif self.mode in ("replay", "time_replay", "graph") or not full:
                kind = "graph" if self.mode == "graph" else "replay"
                if not runner.fits_capture(group, full):
                    kind = "eager"
                elapsed = runner.run_one(kind, group)
                if self.mode == "time_replay" and kind == "replay":
                    self.mode = self.chooser.replay_sample(elapsed)
            else:  # compiled: this step and the next K-1 in one call
                self.mode = capturing.compiled_call(job, runner, group, full, target)
            if self.mode == "eager":
                return


    # ---- the end ---------------------------------------------------------------------------
    def finish(self) -> FitResult:
        sync(self.device)
        runner = self.runner
        for group in runner.restore_capturable:
            group["capturable"] = False
        if self.dist is not None:
            losses = runner.recorder.values(reduce=self.dist.sum_losses)  # one all-reduce for the whole history
            self.net = self.model
            self.dist.finish()
        else:
            losses = runner.recorder.values()
        runners = {k: v for k, v in runner.counts.items() if v}
        main = max((r for r in runners if r != "capture"), key=runners.__getitem__, default="eager")
        name = f"{self.device.type}:{main}" if self.dist is None else f"{self.device.type}:ddp{self.dist.env.world_size}:{main}"
        samples = dict(self.chooser.samples)
        if runner.compiled is not None and len(runner.compiled.calls) >= COMPILED_TIMED_CALLS:
            samples["compiled"] = list(runner.compiled.calls)
        timings = FitTimings(
            total_s=self.setup_s + self.run_s, setup_s=self.setup_s, capture_s=runner.capture_s,
            compile_s=runner.compile_s, steps=runner.done, steps_by_runner=runners,
            step_s_by_runner={k: statistics.median(v) for k, v in samples.items() if v},
            seconds_by_runner=dict(runner.seconds),
        )
        threads = self.chooser.threads if self.device.type == "cpu" else None
        return FitResult(losses, list(runner.recorded_steps), self.epochs, self.steps_per_epoch,
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
