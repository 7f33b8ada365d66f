"""One arm of a sweep: a workload trained by the plain loop a user writes, with one knob turned.

An arm is built once (model, optimizer, data, warm-up steps) and then timed in several trials
of `steps` optimizer steps each, interleaved with the other arms. Every timing starts and ends
with the device synchronised, so queued GPU work is inside the interval it belongs to.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from trainspeed.amp import amp_context, optimizer_step
from trainspeed.memory.checkpointing import apply_checkpointing
from trainspeed.memory.measure import step_peak
from trainspeed.memory.step import state_tensors
from trainspeed.threads import intra_op_threads
from trainspeed.workloads.workload import Workload


@dataclass(frozen=True)
class ArmConfig:
    """The loop's settings; each knob changes one of them."""

    device: str = "cpu"
    batch_size: int | None = None
    """None: the workload's own batch (None there too: the whole data set)."""
    record_every: int | None = None
    """Read the loss to the host (`loss.item()`) every N steps; None: never."""
    amp: str | None = None
    compile: bool = False
    cuda_graphs: bool = False
    accumulate: int = 1
    """Micro-batches per optimizer step; the batch is split into this many equal parts."""
    checkpointing: bool = False
    save_every: int | None = None
    save_mode: str = "sync"
    """"sync": torch.save in the loop; "thread": copy the state, save it from a background thread."""
    loader: bool = False
    """Feed batches through a DataLoader (always so for Dataset data)."""
    num_workers: int = 0
    pin_memory: bool = False
    persistent_workers: bool = False
    threads: int | None = None
    measure_memory: bool = False
    count_ops: bool = False
    """Count the ops and FLOPs of one step (for the GPU step-time prediction)."""


@dataclass
class Setup:
    """What building the arm measured: its first step apart (compilation lands there)."""

    first_step_s: float
    warmup_step_s: float
    peak_bytes: int | None = None
    ops_per_step: int | None = None
    flops_per_step: int | None = None
    batch_size: int = 0


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Arm:
    def __init__(self, workload: Workload, config: ArmConfig) -> None:
        self.workload = workload
        self.config = config
        self.device = torch.device(config.device)
        self.steps_done = 0
        self._counted = 0
        """Steps since the trial began: a trial of S steps recording every N makes S // N reads."""
        self.reads = 0
        self.read_s = 0.0
        self.saver = _Saver(config.save_mode)
        self._captured: tuple[Any, tuple[torch.Tensor, ...], Any] | None = None
        """The step captured as a CUDA graph: (the graph, its static inputs, its static loss)."""
        self._iter: Any = None

    # ---- building -------------------------------------------------------------------------
    def build(self, warmup: int) -> Setup:
        c = self.config
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("CUDA is not available on this machine")
        if c.accumulate < 1:
            raise ValueError("accumulate must be >= 1")
        with intra_op_threads(c.threads):
            self._build_model()
            self._build_data()
            if c.cuda_graphs:
                self._capture()
            synchronize(self.device)
            t0 = time.perf_counter()
            self._step()
            synchronize(self.device)
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            for _ in range(max(1, warmup)):
                self._step()
            synchronize(self.device)
            per_step = (time.perf_counter() - t0) / max(1, warmup)
            setup = Setup(first, per_step, batch_size=self.batch)
            if c.measure_memory:
                held = list(self.model.parameters()) + list(self.model.buffers()) + state_tensors(self.optimizer)
                setup.peak_bytes = step_peak(self._step, held, self.device).peak_bytes
            if c.count_ops:
                setup.ops_per_step, setup.flops_per_step = self._count()
        self.reads, self.read_s = 0, 0.0
        self.saver.count_from_zero()
        return setup

    def _build_model(self) -> None:
        c, w = self.config, self.workload
        model = w.model().to(self.device).train()
        if c.checkpointing:
            if apply_checkpointing(model) == 0:
                raise ValueError("the model has no blocks to checkpoint")
        self.model = model
        self.forward = torch.compile(model) if c.compile else model
        self.loss_fn = w.loss()
        self.optimizer = w.optimizer(model.parameters())
        if c.cuda_graphs:
            for group in self.optimizer.param_groups:
                if group.get("capturable") is False:
                    group["capturable"] = True
        self.scaler = None
        if c.amp == "fp16":
            self.scaler = torch.amp.GradScaler(self.device.type)
        if c.cuda_graphs and self.scaler is not None:
            raise ValueError("fp16 GradScaler reads the host every step; it cannot run inside a CUDA graph")

    def _build_data(self) -> None:
        c, w = self.config, self.workload
        data = w.data()
        n = len(data) if isinstance(data, Dataset) else int(data[0].shape[0])  # type: ignore[arg-type]  # a map-style Dataset
        self.batch = c.batch_size or w.batch_size or n
        if self.batch % c.accumulate:
            raise ValueError(f"batch {self.batch} does not split into {c.accumulate} equal micro-batches")
        self._loader: DataLoader | None = None
        if isinstance(data, Dataset) or c.loader:
            dataset = data if isinstance(data, Dataset) else TensorDataset(*data)
            if self.batch > n:
                raise ValueError(f"batch {self.batch} is larger than the data set ({n} samples)")
            self._loader = DataLoader(dataset, batch_size=self.batch, shuffle=True, drop_last=True,
                                      num_workers=c.num_workers, pin_memory=c.pin_memory,
                                      persistent_workers=c.persistent_workers and c.num_workers > 0,
                                      generator=torch.Generator().manual_seed(0))
            self._iter = iter(self._loader)
            return
        if self.batch > n:  # repeat the samples so a batch larger than the data set still exists
            data = tuple(t.repeat(-(-self.batch // n), *([1] * (t.dim() - 1))) for t in data)
            n = int(data[0].shape[0])
        self._tensors = tuple(t.to(self.device) for t in data)
        self._n = n
        self._cursor = 0

    def _next(self) -> tuple[torch.Tensor, ...]:
        if self._loader is None:
            if self._cursor + self.batch > self._n:
                self._cursor = 0
            s = slice(self._cursor, self._cursor + self.batch)
            self._cursor += self.batch
            return tuple(t[s] for t in self._tensors)
        try:
            batch = next(self._iter)
        except StopIteration:
            self._iter = iter(self._loader)
            batch = next(self._iter)
        return tuple(t.to(self.device, non_blocking=self.config.pin_memory) for t in batch)

    # ---- one step ---------------------------------------------------------------------------
    def _compute(self, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Forward, backward over the micro-batches and the optimizer step; returns the last loss."""
        c = self.config
        k = c.accumulate
        parts = [t.chunk(k) for t in batch] if k > 1 else [[t] for t in batch]
        amp = amp_context(self.device.type, c.amp)
        loss = None
        for i in range(k):
            *inputs, target = (p[i] for p in parts)
            with amp:
                loss = self.loss_fn(self.forward(*inputs), target)
            if k > 1:
                loss = loss / k
            (self.scaler.scale(loss) if self.scaler else loss).backward()
        optimizer_step(self.optimizer, self.scaler)
        self.optimizer.zero_grad(set_to_none=True)
        assert loss is not None
        return loss

    def _step(self) -> None:
        batch = self._next()
        if self._captured is not None:
            graph, inputs, loss = self._captured
            for static, new in zip(inputs, batch):
                static.copy_(new, non_blocking=True)
            graph.replay()
        else:
            loss = self._compute(batch)
        self.steps_done += 1
        self._counted += 1
        c = self.config
        if c.record_every and self._counted % c.record_every == 0:
            t0 = time.perf_counter()
            loss.item()  # the host read the knob is about (a sync on a GPU)
            self.read_s += time.perf_counter() - t0
            self.reads += 1
        if c.save_every and self._counted % c.save_every == 0:
            self.saver.save(self.model, self.optimizer)

    def _capture(self) -> None:
        from trainspeed.loop.cuda_graph import WARMUP_STEPS, capture_graph

        inputs = tuple(t.clone() for t in self._next())

        def feed() -> None:
            for static, new in zip(inputs, self._next()):
                static.copy_(new)

        def step() -> torch.Tensor:
            return self._compute(inputs)

        captured = capture_graph(step, lambda: self.optimizer.zero_grad(set_to_none=True), [feed] * WARMUP_STEPS)
        if captured.graph is None:
            raise RuntimeError(f"CUDA graph capture failed: {captured.error}")
        self._captured = (captured.graph, inputs, captured.loss)

    # ---- measuring --------------------------------------------------------------------------
    def run(self, steps: int) -> tuple[float, dict[str, Any]]:
        """Seconds for `steps` optimizer steps (device synchronised at both ends), and extras."""
        reads, read_s, saves = self.reads, self.read_s, self.saver.saves
        self._counted = 0
        with intra_op_threads(self.config.threads):
            synchronize(self.device)
            t0 = time.perf_counter()
            for _ in range(steps):
                self._step()
            self.saver.wait()
            synchronize(self.device)
            seconds = time.perf_counter() - t0
        extras: dict[str, Any] = {}
        if self.config.record_every:
            extras.update(reads=self.reads - reads, read_s=self.read_s - read_s)
        if self.config.save_every:
            extras["saves"] = self.saver.saves - saves
        return seconds, extras

    def _count(self) -> tuple[int, int]:
        from trainspeed.watch.op_counter import op_counter

        counter = op_counter(flops=True)
        with counter:
            self._step()
        return counter.ops, int(counter.total_flops)

    def close(self) -> None:
        self.saver.close()
        self._loader = None
        self._iter = None
        self._captured = None
        self.model = self.forward = self.optimizer = None  # type: ignore[assignment]


class _Saver:
    """An arm's checkpoints: each saved in the loop (`torch.save`), or (`thread`) copied to the host and saved from a
    background thread, one save in flight at a time, as a real background saver keeps it."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.saves = 0
        self.folder: tempfile.TemporaryDirectory | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future | None = None

    def save(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        if self.folder is None:
            self.folder = tempfile.TemporaryDirectory(prefix="trainspeed-sweep-")
        path = os.path.join(self.folder.name, "checkpoint.pt")
        if self.mode == "thread":
            self.wait()
            state = {"model": {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()},
                     "optimizer": _cpu_copy(optimizer.state_dict())}
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trainspeed-save")
            self._pending = self._pool.submit(_atomic_save, state, path)
        else:
            _atomic_save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
        self.saves += 1

    def count_from_zero(self) -> None:
        """The saves counted so far were the arm's building's, not a trial's."""
        self.saves = 0

    def wait(self) -> None:
        """Until the save in flight (if any) is written."""
        if self._pending is not None:
            self._pending.result()
            self._pending = None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.wait()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self.folder is not None:
            self.folder.cleanup()


def _cpu_copy(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: _cpu_copy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cpu_copy(v) for v in obj)
    return obj


def _atomic_save(state: Any, path: str) -> None:
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)
