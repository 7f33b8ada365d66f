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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainspeed.errors import FitError
from trainspeed.loop import capturing, choosing, plan, running
from trainspeed.loop.capture import CapturedStep
from trainspeed.loop.checks import AMP_DTYPES, check_parts, positive_int, resolve_device
from trainspeed.loop.compiled import default_cache_dir
from trainspeed.loop.cuda_graph import GraphStep
from trainspeed.loop.data import Group, TrainData, resolve_data
from trainspeed.loop.ddp import DataParallel
from trainspeed.loop.recorder import LossRecorder
from trainspeed.loop.result import FitResult, FitTimings, Strategy
from trainspeed.loop.running import _data_device, _sync


class FastLoop:
    """The state of one `fit` job; `run(n)` trains n more optimizer steps (all that are left if None).

    Its methods are grouped by what they do: the choices taken on the job's own timed steps (`choosing`),
    the steps as they run (`running`), and capturing and compiling the step (`capturing`); this class holds
    the job's state, its set-up and `run`."""

    # set once the job chooses a strategy (choosing.py, capturing.py, running.py)
    thread_plan: list[int]
    thread_times: dict[int, list[float]]
    template: Group
    signature: tuple[Any, ...]
    captured: CapturedStep
    replay_times: dict[int, list[float]]
    static: list[torch.Tensor]
    graph: GraphStep
    compile_key: str
    k_steps: Callable[..., torch.Tensor]
    compile_calls: list[float]
    _capture_loss: torch.Tensor

    # the choices, on the job's own timed steps
    _will_probe_threads = choosing._will_probe_threads
    _probe_threads = choosing._probe_threads
    _time_eager = choosing._time_eager
    _time_window = choosing._time_window
    _decide_capture = choosing._decide_capture
    _replay_sample = choosing._replay_sample
    _decide_compile = choosing._decide_compile
    # the steps as they run
    _iter_groups = running._iter_groups
    _eager = running._eager
    _step_of_flat = running._step_of_flat
    _record = running._record
    _run_one = running._run_one
    _spent = running._spent
    _fits_capture = running._fits_capture
    _captured_steps = running._captured_steps
    _replay_resident = running._replay_resident
    _compiled_resident = running._compiled_resident
    _call_compiled = running._call_compiled
    _note_compiled = running._note_compiled
    # capturing and compiling the step
    _capture = capturing._capture
    _compiled_call = capturing._compiled_call
    _compile_and_check = capturing._compile_and_check
    _capture_graph = capturing._capture_graph

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
