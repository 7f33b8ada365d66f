"""estimate_memory: replay a training step on fake tensors and take the peak of live bytes.

The model is built (or copied) under FakeTensorMode: tensors carry shapes, dtypes and a device
but their storage is on the meta device, so nothing is allocated. One step creates the
optimizer state; the next, with gradients set to None in between, is the steady state whose
peak we report. Autocast, checkpointing's recomputation and the optimizer's own temporaries
happen exactly as in a real step, because the real PyTorch code runs - only on fake tensors.
"""

from __future__ import annotations

import copy
import logging
import math
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, cast

import psutil
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily

from trainspeed.amp import AMP_DTYPES
from trainspeed.errors import first_line
from trainspeed.memory.checkpointing import apply_checkpointing
from trainspeed.memory.cuda_workspaces import step_workspaces
from trainspeed.memory.layers import LayerRecorder
from trainspeed.memory.offload import host_blocks, split_peaks
from trainspeed.memory.optimizers import OptimizerFactory, optimizer_factory
from trainspeed.memory.result import CATEGORIES, LayerMemory, MemoryEstimate
from trainspeed.memory.sharded import (
    Sharding,
    bucket_bytes,
    fake_world,
    on_local_shards,
    shard_fsdp,
    zero1_partition,
)
from trainspeed.memory.step import (
    InputArg,
    ModelArg,
    StepSetup,
    default_loss,
    input_maker,
    state_tensors,
    training_step,
)
from trainspeed.memory.tracker import RESIZED, Block, LiveBytes, storage_key
from trainspeed.memory.workspace import cuda_workspace_bytes, hidden_outputs, unseen_notes, workspace_bytes
from trainspeed.units import human_bytes

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

CUDA_ALLOCATION_QUANTUM = 512
"""The CUDA caching allocator rounds every block up to 512 bytes (kMinBlockSize in
c10/cuda/CUDACachingAllocator.cpp); max_memory_allocated counts the rounded sizes."""

class EstimateError(Exception):
    """The step could not be replayed on fake tensors; the message names the op that failed. `phase` is the step's
    phase it failed in ("forward": the model did not take its input), `cause` the error's first line."""

    def __init__(self, message: str, phase: str | None = None, cause: str = "", kind: str = "") -> None:
        super().__init__(message)
        self.phase, self.cause, self.kind = phase, cause, kind

    @property
    def bad_input(self) -> bool:
        """Whether the model's forward refused its input (a shape or dtype mismatch), rather than asked meta tensors
        for something they cannot do (a value, a data-dependent shape)."""
        return self.phase == "forward" and self.kind in ("RuntimeError", "ValueError", "IndexError", "TypeError")


def _capability(device: torch.device) -> tuple[int, int] | None:
    if device.type == "cuda" and torch.cuda.is_available():
        return tuple(torch.cuda.get_device_capability(device))  # type: ignore[return-value]
    return None


QUIET_LOGGERS = ("torch._subclasses.fake_tensor",)
"""torch's loggers that print a failing op's whole meta-kernel traceback (dozens of lines) before the exception
reaches the estimator, which says it in one line."""


@contextmanager
def _quiet() -> Iterator[None]:
    """torch's own warning when a model deep-copies its layers under FakeTensorMode (nn.TransformerEncoder clones
    its layer: `Tensor.__deepcopy__` asks a fake tensor for its data pointer), and the fake-tensor logger's traceback
    of an op that fails (a wrong input shape, a batch too large to index). The copy is right, and the failure is
    said in one line (EstimateError); both are about the estimator's machinery and stay off the user's terminal."""
    loggers = [logging.getLogger(name) for name in QUIET_LOGGERS]
    levels = [logger.level for logger in loggers]
    try:
        for logger in loggers:
            logger.setLevel(logging.CRITICAL + 1)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Accessing the data pointer of FakeTensor", category=UserWarning)
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _fake_copy(model: nn.Module, mode: FakeTensorMode, device: torch.device) -> nn.Module:
    """A copy of a real model whose parameters and buffers are fake, on `device`: no bytes are copied."""
    memo: dict[int, Any] = {}
    for p in model.parameters():
        memo[id(p)] = nn.Parameter(mode.from_tensor(p.detach()).to(device), requires_grad=p.requires_grad)
    for b in model.buffers():
        memo[id(b)] = mode.from_tensor(b).to(device)
    return copy.deepcopy(model, memo)


def _keep(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    return tensor


@contextmanager
def _no_initialisation() -> Iterator[None]:
    """torch.nn.init's initialisers as no-ops: a fake tensor has no values to set, and some initialisers read
    values back (trunc_normal_ resamples until no value is out of range, `if not mask.any()`, since torch
    2.14: ViT's and many vision models' weights), which a fake tensor cannot answer."""
    saved = {name: f for name, f in vars(nn.init).items() if name.endswith("_") and not name.startswith("_")}
    try:
        for name in saved:
            setattr(nn.init, name, _keep)
        yield
    finally:
        for name, f in saved.items():
            setattr(nn.init, name, f)


REAL_BUILD_SHARE = 0.5
"""A model whose construction reads values back is built for real on the CPU only while its parameters and buffers
take at most this share of the memory available: checked as it is built, module by module."""


class _TooLarge(Exception):
    pass


@contextmanager
def _bounded_real_build(limit: int) -> Iterator[list[int]]:
    """Parameters and buffers registered inside count against `limit` bytes, each checked as it is registered, so
    that a building that would not fit stops early with _TooLarge instead of filling the machine's memory."""
    total = [0]
    originals = {name: getattr(nn.Module, name) for name in ("register_parameter", "register_buffer")}

    def counted(original: Callable[..., None]) -> Callable[..., None]:
        def register(module: nn.Module, name: str, tensor: Any, *args: Any, **kwargs: Any) -> None:
            if isinstance(tensor, torch.Tensor):
                total[0] += tensor.numel() * tensor.element_size()
                if total[0] > limit:
                    raise _TooLarge
            original(module, name, tensor, *args, **kwargs)
        return register

    for name, original in originals.items():
        setattr(nn.Module, name, counted(original))
    try:
        yield total
    finally:
        for name, original in originals.items():
            setattr(nn.Module, name, original)


def _outside_fake(factory: Callable[[], Any], mode: FakeTensorMode, device: torch.device) -> tuple[nn.Module, str]:
    """The factory's model built outside the fake mode, for a construction that reads a value a fake tensor cannot
    give (`.item()` on a tensor it made, `if mask.any()`): on the meta device where that works, else for real on
    the CPU while its parameters fit comfortably in RAM. Copied to fake tensors on `device` either way; the note
    says which."""
    with unset_fake_temporarily():
        try:
            with torch.device("meta"):
                built = factory()
            how = "built on the meta device (its construction reads a value that fake tensors cannot give)"
        except Exception:
            limit = int(REAL_BUILD_SHARE * psutil.virtual_memory().available)
            try:
                with _bounded_real_build(limit) as total:
                    built = factory()
            except _TooLarge:
                raise EstimateError(f"the model's construction reads values that meta tensors cannot give, and its "
                                    f"parameters and buffers pass {REAL_BUILD_SHARE:.0%} of the free memory "
                                    f"({human_bytes(limit)}): not built for real") from None
            how = (f"built for real on the CPU ({human_bytes(total[0])} of parameters and buffers; its construction "
                   "reads values that fake and meta tensors cannot give)")
    if not isinstance(built, nn.Module):
        raise TypeError(f"the model factory returned {type(built).__name__}, not an nn.Module")
    return _fake_copy(built, mode, device), how


def _built(factory: Callable[[], Any], device: torch.device, mode: FakeTensorMode) -> tuple[nn.Module, str | None]:
    """The factory's model, built under the fake mode on `device`; where building reads a value back (an
    initialiser that tests its samples), built again with the initialisers skipped; where the construction itself
    reads a value, built outside the fake mode (`_outside_fake`, whose note comes back with the model)."""
    try:
        with torch.device(device):
            built = factory()
    except Exception as first:  # the factory may work on real tensors only (torch.load, numpy)
        try:
            with torch.device(device), _no_initialisation():
                built = factory()
        except Exception:
            try:
                return _outside_fake(factory, mode, device)
            except EstimateError:
                raise
            except Exception:
                raise EstimateError(f"building the model on meta tensors failed: {type(first).__name__}: "
                                    f"{first_line(first, limit=1000)}") from first
    if not isinstance(built, nn.Module):
        raise TypeError(f"the model factory returned {type(built).__name__}, not an nn.Module")
    return built, None  # built under torch.device(device): already there


def _shares_its_storage(t: torch.Tensor) -> bool:
    """Whether a view of `t` has `t`'s storage, as every real tensor's does."""
    return t.untyped_storage() is t.detach().untyped_storage()


def _renew_unshared(model: nn.Module) -> None:
    """Give every parameter and buffer whose views do not share its storage a fresh fake tensor of its layout.

    `Tensor.__deepcopy__` of a fake tensor (nn.TransformerEncoder and nn.TransformerDecoder clone their layer
    when built under the fake mode) sets a new storage on the copy that its views do not have, so each
    transpose of a weight, and each in-place optimizer update, looked like a new allocation: +15% on a
    2-layer encoder's step. The values are fake either way; a parameter shared by two modules stays shared."""
    renewed: dict[int, torch.Tensor] = {}
    for module in model.modules():
        for slots in (cast(dict[str, Any], module._parameters), cast(dict[str, Any], module._buffers)):
            for name, t in slots.items():
                if t is None or _shares_its_storage(t):
                    continue
                if id(t) not in renewed:
                    fresh = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
                    renewed[id(t)] = (nn.Parameter(fresh, requires_grad=t.requires_grad)
                                      if isinstance(t, nn.Parameter) else fresh)
                slots[name] = renewed[id(t)]


class _Replay:
    """A fake model and optimizer, warmed up by one step, ready to replay steady-state steps (one rank's, where
    `sharding` spreads them over a world whose fake process group `mesh` is)."""

    def __init__(self, model: ModelArg, optimizer: OptimizerFactory, setup: StepSetup, device: torch.device,
                 quantum: int, checkpointing: bool, warm_batch: int, sharding: Sharding | None = None,
                 mesh: DeviceMesh | None = None) -> None:
        self.mode = FakeTensorMode(allow_non_fake_inputs=True)
        self.setup, self.device, self.quantum = setup, device, quantum
        self.build_note: str | None = None
        """How the model was built, where not under the fake mode (a construction that reads values)."""
        self.last_op: str | None = None
        self.buckets = 0
        """DDP's gradient buckets (`sharded.bucket_bytes`), held through the step."""
        with torch.random.fork_rng(devices=[]), self.mode, torch.enable_grad(), _quiet():
            if isinstance(model, nn.Module):
                self.model = _fake_copy(model, self.mode, device)
            else:
                self.model, self.build_note = _built(model, device, self.mode)
            _renew_unshared(self.model)
            self.model.train()
            if checkpointing:
                apply_checkpointing(self.model)
            params = list(self.model.parameters())
            if sharding is not None and sharding.fsdp and mesh is not None:
                try:
                    shard_fsdp(self.model, mesh, sharding)
                except Exception as e:  # FSDP2 refused the model: say so in one line
                    cause = first_line(e, limit=1000)
                    raise EstimateError(f"FSDP2 could not shard the model: {type(e).__name__}: {cause}",
                                        phase="setup", cause=cause, kind=type(e).__name__) from e
                params = list(self.model.parameters())
            elif sharding is not None:
                self.buckets = bucket_bytes(params, quantum)
                if sharding.mode == "zero1":
                    params = zero1_partition(params, sharding.world_size)
            self.optimizer = on_local_shards(optimizer, params) if sharding is not None and sharding.fsdp \
                else optimizer(params)
            self.library_workspace = 0
            warm, _, _ = self.step(warm_batch, record_layers=False)  # creates the optimizer state
        if quantum > 1:  # a CUDA target: the cuBLAS workspaces its matmuls leave allocated (read off a real
            # device where there is one, so outside the fake mode)
            self.library_workspace = step_workspaces(device, _capability(device)).for_step(warm.ops_by_phase)

    def step(self, batch: int, record_layers: bool) -> tuple[LiveBytes, dict[str, Any], list[LayerMemory]]:
        # the scratch rules describe CPU kernels; a CUDA target on a real device asks its attention kernels, and
        # one replayed with CPU kernels' choices (no CUDA here) goes without
        cpu = self.quantum == 1
        scratch = workspace_bytes if cpu else cuda_workspace_bytes if self.device.type == "cuda" else None
        tracker = LiveBytes(self.quantum, scratch, hidden_outputs if cpu else None)
        tracker.adopt(list(self.model.parameters()) + list(self.model.buffers()), "params")
        tracker.adopt(state_tensors(self.optimizer), "optimizer-state")
        if self.library_workspace:
            tracker.reserve(self.library_workspace, "workspace")
        if self.buckets:
            tracker.reserve(self.buckets, "communication")
        recorder = LayerRecorder(self.model)

        def mark(phase: str) -> None:
            tracker.phase = phase

        try:
            with torch.random.fork_rng(devices=[]), self.mode, torch.enable_grad(), tracker, _quiet():
                ctx = recorder.recording() if record_layers else nullcontext()
                with ctx:
                    seen = training_step(self.model, self.optimizer, self.setup, batch, self.device, mark)
        except Exception as e:  # name the op: the user needs to know what meta tensors could not do
            op = tracker.last_op or "setup"
            cause = first_line(e, limit=1000)
            raise EstimateError(f"the step could not be replayed on meta tensors at {op}: {type(e).__name__}: {cause}",
                                phase=tracker.phase, cause=cause, kind=type(e).__name__) from e
        return tracker, seen, recorder.rows() if record_layers else []


def _breakdown(tracker: LiveBytes, grad_blocks: set[int], moment: int, host: set[int]) -> tuple[dict[str, int], str]:
    """What was live at `moment` (the peak), by category, the blocks in `host` (CPU offload's) left out; and the
    phase the moment falls in."""
    out = dict.fromkeys(CATEGORIES, 0)
    phases = {"params": "params", "optimizer-state": "optimizer", "input": "input", "forward": "activations",
              "workspace": "workspace", "communication": "communication"}
    for block in tracker.alive_at(moment):
        if id(block) in host:
            continue
        if id(block) in grad_blocks:
            category = "grads"
        elif block.op == RESIZED:
            category = "unsharded"
        else:
            category = phases.get(block.phase, "transient")
        out[category] += block.nbytes
    peak_phase = next((b.phase for b in tracker.history if b.born == moment), "forward")
    return out, peak_phase


def _grad_blocks(tracker: LiveBytes, seen: dict[str, Any]) -> set[int]:
    blocks: list[Block | None] = [tracker.blocks.get(storage_key(g)) for g in seen["grads"]]
    return {id(b) for b in blocks if b is not None}


class Estimator:
    """A fake model and optimizer ready to replay steady-state steps at any batch size: a single device's, or with
    `sharding` one rank's of a data-parallel world (`memory/sharded.py`; the world's fake process group lives
    until `close()`, or the end of a `with` block)."""

    def __init__(self, model: ModelArg, example_input: InputArg, optimizer: str | OptimizerFactory = "adam",
                 amp: str | None = None, checkpointing: bool = False,
                 loss: Callable[[Any], torch.Tensor] | None = None, device: str | torch.device = "cpu",
                 warm_batch: int = 1, sharding: Sharding | None = None) -> None:
        if amp is not None and amp not in AMP_DTYPES:
            raise ValueError(f"amp must be None, 'bf16' or 'fp16', got {amp!r}")
        self.target = torch.device(device)
        self.notes: list[str] = []
        fake_device = self.target
        if self.target.type == "cuda" and not torch.cuda.is_available():
            fake_device = torch.device("cpu")
            self.notes.append("no CUDA here: the step was replayed with CPU kernels' choices "
                              "(autocast op lists differ), CUDA's 512-byte rounding and pre-Hopper cuBLAS "
                              "workspaces (one for forward's thread, one for backward's)")
        self.fake_device = fake_device
        quantum = CUDA_ALLOCATION_QUANTUM if self.target.type == "cuda" else 1
        self.optimizer_name, opt_factory = optimizer_factory(optimizer, self.target.type)
        self.amp, self.checkpointing = amp, checkpointing
        setup = StepSetup(input_maker(example_input), loss or default_loss, amp, fake_device.type)
        self.sharding = sharding
        self._world = ExitStack()
        mesh = self._world.enter_context(fake_world(sharding.world_size)) if sharding is not None and sharding.fsdp \
            else None
        try:
            self.replay = _Replay(model, opt_factory, setup, fake_device, quantum, checkpointing, warm_batch,
                                  sharding, mesh)
        except BaseException:
            self.close()
            raise
        if self.replay.build_note:
            self.notes.append(f"the model was {self.replay.build_note}")
        if sharding is not None and not sharding.fsdp:
            self.notes.append("DDP's reducer cannot run on fake tensors: its gradient buckets are added by size (a "
                              "flat copy of every gradient, as DDP keeps with gradient_as_bucket_view=False)")
        elif sharding is not None:
            self.notes.append("FSDP2's own code replayed with collectives that finish at once: a floor. On real "
                              "ranks a collective still in flight keeps its buffers a while longer (on 2 and 4 CPU "
                              "ranks the nearest rank was within 1% in 9 of 12 cases, the largest up to 47% above "
                              "on a model of three units; BENCHMARKS.md)")
            if sharding.cpu_offload:
                self.notes.append("CPU offload: FSDP2's step replayed without CPUOffloadPolicy (the replay has one kind "
                                  "of device), its storages sorted afterwards: the device holds the gathered units, "
                                  "the activations and temporaries; the host the shards, their gradients and the "
                                  "optimizer's state and step. Left out: each shard's copy on its way (in for the "
                                  "all-gather, out after the reduce-scatter), one unit's at a time")
            if amp is not None and sharding.param_dtype is None:
                self.notes.append("under FSDP, torch.autocast keeps its cast of every unit's parameters until the "
                                  "forward ends (its weight cache: the gathered parameters are freed, their casts "
                                  "not); FSDP2's MixedPrecisionPolicy(param_dtype=...) gathers them in that dtype "
                                  "instead (--fsdp-param-dtype)")

    def close(self) -> None:
        """End the sharded world's fake process group (nothing for a single device)."""
        self._world.close()

    def __enter__(self) -> Estimator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def peak(self, batch_size: int) -> int:
        """Predicted peak bytes of a step at `batch_size` (a full replay, nothing allocated); under CPU offload the
        device's."""
        tracker, seen, _ = self.replay.step(batch_size, record_layers=False)
        return self._peaks(tracker, seen)[0][0]

    def _peaks(self, tracker: LiveBytes, seen: dict[str, Any]) -> tuple[tuple[int, int], int | None, set[int]]:
        """((the peak, its moment), the host's peak under CPU offload, the host's blocks): the replay's own peak,
        or with `Sharding.cpu_offload` the device's, its host storages set apart (memory/offload.py)."""
        if self.sharding is None or not self.sharding.cpu_offload:
            return (tracker.peak, tracker.peak_at), None, set()
        params = {storage_key(p) for p in self.replay.model.parameters()}
        host = host_blocks(tracker, params, _grad_blocks(tracker, seen))
        device, on_host = split_peaks(tracker, host)
        return device, on_host, host

    def estimate(self, batch_size: int) -> MemoryEstimate:
        """The full estimate at `batch_size`, with the linear model fitted from a replay at twice the batch."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        tracker, seen, layers = self.replay.step(batch_size, record_layers=True)
        (total, moment), host_bytes, host = self._peaks(tracker, seen)
        breakdown, peak_phase = _breakdown(tracker, _grad_blocks(tracker, seen), moment, host)
        notes = list(self.notes)
        notes += unseen_notes(tracker.unmodelled)
        per_sample = (self.peak(batch_size * 2) - total) / batch_size
        fixed = total - batch_size * per_sample
        params = {id(p): p.numel() for p in self.replay.model.parameters()}
        return MemoryEstimate(
            total_bytes=total, fixed_bytes=int(round(fixed)), per_sample_bytes=per_sample, batch_size=batch_size,
            breakdown=breakdown, layers=layers, peak_phase=peak_phase, device=str(self.target),
            optimizer=self.optimizer_name, amp=self.amp, checkpointing=self.checkpointing,
            param_count=sum(params.values()), notes=notes,
            world_size=self.sharding.world_size if self.sharding else 1,
            shard=self.sharding.mode if self.sharding else None,
            fsdp_param_dtype=self.sharding.param_dtype if self.sharding else None,
            cpu_offload=bool(self.sharding and self.sharding.cpu_offload), host_bytes=host_bytes,
        )


def estimate_memory(model: ModelArg, example_input: InputArg, batch_size: int, optimizer: str | OptimizerFactory = "adam",
                    amp: str | None = None, checkpointing: bool = False, loss: Callable[[Any], torch.Tensor] | None = None,
                    device: str | torch.device = "cpu", world_size: int = 1, shard: str | None = None,
                    fsdp_param_dtype: str | None = None, cpu_offload: bool = False) -> MemoryEstimate:
    """Predict the peak bytes of a steady-state training step, without allocating the model.

    Args:
        model: an nn.Module, or a zero-argument factory returning one (built on fake tensors).
        example_input: a callable batch_size -> tensor or tuple of tensors, or a per-sample shape (float32).
        batch_size: the batch to predict for (>= 1).
        optimizer: "sgd", "sgd-momentum", "adam", "adamw", "rmsprop", "adagrad", or params -> Optimizer.
        amp: None (fp32), "bf16" or "fp16" autocast.
        checkpointing: recompute each block's activations in backward (see memory.checkpointing).
        loss: output -> scalar; default: the mean of the output (its first element if a tuple).
        device: "cpu" or "cuda"; on CUDA the caching allocator's 512-byte rounding is applied.
        world_size, shard: one rank's peak of a data-parallel world of `world_size` ranks sharded as `shard`
            ("ddp", "zero1", "fsdp", "fsdp-no-reshard"; memory.sharded); `batch_size` is then the rank's own.
        fsdp_param_dtype: "bf16" or "fp16": FSDP2's MixedPrecisionPolicy (with an fsdp `shard`).
        cpu_offload: FSDP2's CPUOffloadPolicy (with an fsdp `shard`): the device's peak, the host's in `host_bytes`.

    Returns:
        MemoryEstimate: total, fixed + per-sample split, breakdown at the peak, per-layer rows.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if shard is None and (world_size != 1 or cpu_offload):
        raise ValueError(f"a world of {world_size} ranks needs a shard mode (ddp, zero1, fsdp, fsdp-no-reshard)")
    sharding = Sharding(world_size, shard, fsdp_param_dtype, cpu_offload) if shard is not None else None
    with Estimator(model, example_input, optimizer, amp, checkpointing, loss, device, warm_batch=batch_size,
                   sharding=sharding) as estimator:
        return estimator.estimate(batch_size)


def largest_batch_by_model(estimate: MemoryEstimate, budget_bytes: int) -> int:
    """The linear model's largest batch under a budget (0 if even the fixed part does not fit)."""
    if estimate.per_sample_bytes <= 0:
        return 0 if estimate.fixed_bytes > budget_bytes else 1 << 30
    return max(0, math.floor((budget_bytes - estimate.fixed_bytes) / estimate.per_sample_bytes))
