"""`trainspeed memory`: the exact training-memory estimate and the largest batch that fits."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from trainspeed._io import check_writable_file, emit
from trainspeed.cli._common import add_json_option, console_for, positive_int
from trainspeed.errors import UsageError
from trainspeed.names import (
    AMP_NAMES,
    GPU_MEMORY_GIB,
    HF_SHAPES,
    INPUT_DTYPES,
    MEMORY_MARGIN,
    OPTIMIZER_NAMES,
    SHARD_MODES,
    ZOO_NAMES,
)
from trainspeed.units import parse_size

if TYPE_CHECKING:
    import torch

    from trainspeed.memory.losses import Loss
    from trainspeed.memory.result import BatchSearch, MeasuredPeak, MemoryEstimate, RanksRow


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("memory", help="estimate training memory exactly; find the largest batch that fits",
                       description="Replay a training step on meta tensors and report its peak memory: "
                                   "fixed + batch x per-sample, by category and by layer.")
    p.add_argument("spec", metavar="SPEC", help="FILE.py:FACTORY, MODULE:FACTORY, a Hugging Face config.json, a "
                   f"config by name ({', '.join(HF_SHAPES)}), or a built-in model ({', '.join(ZOO_NAMES)})")
    p.add_argument("--input-shape", metavar="D1,D2,...", help="per-sample input shape, e.g. 3,32,32")
    p.add_argument("--input-dtype", choices=INPUT_DTYPES, default=None, help="input dtype (default float32)")
    p.add_argument("--input-high", type=positive_int, metavar="N", help="integer inputs are drawn from [0, N)")
    p.add_argument("--batch-size", type=positive_int, default=32, help="batch to estimate (default 32)")
    p.add_argument("--optimizer", choices=OPTIMIZER_NAMES, default="adam")
    p.add_argument("--loss", metavar="LOSS",
                   help="what the step backwards from: cross-entropy, mse, mean (of the output), or FILE.py:fn / "
                        "module:fn called on the output (default: chosen from the output's shape, and said)")
    p.add_argument("--amp", choices=list(AMP_NAMES), default=None, help="autocast dtype (default: fp32)")
    p.add_argument("--checkpointing", action="store_true", help="activation checkpointing of each block")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None,
                   help="target device; without --budget its free memory (RAM or VRAM) is the budget")
    p.add_argument("--budget", metavar="SIZE", help="memory budget for the largest-batch search, e.g. 24GiB")
    p.add_argument("--gpu", choices=list(GPU_MEMORY_GIB), default=None,
                   help="a CUDA target of this GPU: its memory is the budget (the CUDA allocator's rounding and "
                        "workspaces are replayed)")
    p.add_argument("--margin", type=float, default=MEMORY_MARGIN, help="share of the budget kept free (default 0.1)")
    p.add_argument("--world-size", type=positive_int, default=1, metavar="N",
                   help="ranks of a data-parallel world (with --shard): the estimate is one rank's peak, "
                        "--batch-size its own batch")
    p.add_argument("--shard", choices=SHARD_MODES, default=None,
                   help="how the ranks share the step: ddp (each holds everything), zero1 (optimizer state "
                        "sharded), fsdp (FSDP2: parameters, gradients and state sharded; resharded after forward), "
                        "fsdp-no-reshard (kept whole from forward to backward)")
    p.add_argument("--fsdp-param-dtype", choices=list(AMP_NAMES), default=None,
                   help="with an fsdp --shard: FSDP2's MixedPrecisionPolicy, parameters gathered and computed in this "
                        "dtype, gradients reduced in float32")
    p.add_argument("--cpu-offload", action="store_true",
                   help="with an fsdp --shard: FSDP2's CPUOffloadPolicy, the shards, their gradients and the optimizer "
                        "in host memory; the peak is the device's, the host's said apart")
    p.add_argument("--fewest-ranks", action="store_true",
                   help="with --gpu or --budget: for each shard mode, the fewest ranks of that memory that fit "
                        "--batch-size per rank")
    p.add_argument("--measure", action="store_true", help="also run real steps and measure the peak")
    add_json_option(p)
    p.set_defaults(run=run)


def parse_shape(text: str) -> list[int]:
    """"3,32,32" -> [3, 32, 32]; anything else is a UsageError."""
    parts = [t.strip() for t in text.split(",")]
    try:
        dims = [int(t) for t in parts]
    except ValueError:
        dims = []
    if not dims or any(d < 1 for d in dims):
        raise UsageError(f"--input-shape: expected positive integers separated by commas (like 3,32,32), got {text!r}")
    return dims


def input_callable(shape: list[int], dtype: torch.dtype, high: int | None) -> Callable[[int], torch.Tensor]:
    import torch

    if dtype.is_floating_point:
        return lambda b: torch.randn(b, *shape, dtype=dtype)
    if high is None:
        raise UsageError("--input-high N is needed for integer inputs (values are drawn from [0, N))")
    return lambda b: torch.randint(0, high, (b, *shape), dtype=dtype)


def _budget(args: argparse.Namespace, device: str) -> int | None:
    if args.gpu is not None:
        return GPU_MEMORY_GIB[args.gpu] * 2**30
    if args.budget is not None:
        try:
            return parse_size(args.budget)
        except ValueError as e:
            raise UsageError(f"--budget: {e}") from None
    if args.device == "cuda":
        import torch

        return int(torch.cuda.mem_get_info()[0])
    if args.device == "cpu":
        import psutil

        return int(psutil.virtual_memory().available)
    return None


def _inputs(args: argparse.Namespace, builtin: Any) -> tuple[list[int], torch.dtype, int | None]:
    import torch

    if args.input_shape is not None:
        shape = parse_shape(args.input_shape)
    elif builtin is not None:
        shape = list(builtin.input_shape)
    else:
        raise UsageError(f"--input-shape is needed for {args.spec} (the per-sample shape, e.g. 3,32,32)")
    dtype = getattr(torch, args.input_dtype) if args.input_dtype else (builtin.input_dtype if builtin and args.input_shape is None else torch.float32)
    high = args.input_high if args.input_high is not None else (builtin.input_high if builtin else None)
    return shape, dtype, high


def run(args: argparse.Namespace) -> int:
    import torch

    from trainspeed.memory.estimate import EstimateError, Estimator
    from trainspeed.memory.losses import resolve_loss
    from trainspeed.memory.maxbatch import search_max_batch
    from trainspeed.memory.ranks import fewest_ranks
    from trainspeed.memory.sharded import Sharding, ShardingUnavailable
    from trainspeed.units import human_bytes
    from trainspeed.workloads.spec import resolve_model_spec

    if not 0 <= args.margin < 1:
        raise UsageError(f"--margin must be in [0, 1), got {args.margin}")
    if args.gpu is not None and (args.budget is not None or args.device == "cpu"):
        raise UsageError(f"--gpu {args.gpu} is the budget and the device: without --budget or --device cpu")
    device = "cuda" if args.gpu is not None else args.device or "cpu"
    if device == "cuda" and not torch.cuda.is_available() and (args.measure or args.budget is None and
                                                                args.gpu is None):
        raise UsageError("--device cuda: CUDA is not available here (give --budget SIZE to estimate for a CUDA "
                         "target without measuring)")
    if args.world_size > 1 and args.shard is None:
        raise UsageError(f"--world-size {args.world_size} needs --shard ({', '.join(SHARD_MODES)}): how the ranks "
                         "share the step")
    if args.fewest_ranks and (args.gpu is None and args.budget is None or args.shard is not None or args.measure):
        raise UsageError("--fewest-ranks needs --gpu NAME or --budget SIZE (the memory of one rank), and answers for "
                         "every shard mode: without --shard, --world-size or --measure")
    if args.fsdp_param_dtype is not None and (args.shard is None or not args.shard.startswith("fsdp")):
        raise UsageError(f"--fsdp-param-dtype {args.fsdp_param_dtype} is FSDP2's mixed precision: it needs --shard "
                         "fsdp or fsdp-no-reshard (--amp autocasts any step)")
    if args.cpu_offload and (args.shard is None or not args.shard.startswith("fsdp")):
        raise UsageError("--cpu-offload is FSDP2's CPUOffloadPolicy: it needs --shard fsdp or fsdp-no-reshard")
    if args.shard is not None and args.measure:
        raise UsageError("--measure runs the step on one device here; a sharded step is measured on its ranks under "
                         "torchrun (benchmarks/sharded_memory.py)")
    if args.json:
        check_writable_file(args.json)
    spec = resolve_model_spec(args.spec)
    shape, dtype, high = _inputs(args, spec.builtin)
    make_input = input_callable(shape, dtype, high)
    budget = _budget(args, device)
    loss = resolve_loss(args.loss, shape)
    common = dict(optimizer=args.optimizer, amp=args.amp, checkpointing=args.checkpointing, device=device,
                  loss=loss.fn)
    sharding = Sharding(args.world_size, args.shard, args.fsdp_param_dtype, args.cpu_offload) \
        if args.shard is not None else None

    notes = [f"the budget is the memory of one {args.gpu}: {GPU_MEMORY_GIB[args.gpu]} GiB (its data sheet's)"] \
        if args.gpu is not None else []
    estimate = estimator = None
    started = time.perf_counter()
    seconds = None
    with ExitStack() as stack:
        try:
            estimator = stack.enter_context(Estimator(spec.factory, make_input, warm_batch=args.batch_size,
                                                      sharding=sharding, **common))
            estimate = estimator.estimate(args.batch_size)
            seconds = time.perf_counter() - started
        except TypeError as e:
            if "not an nn.Module" in str(e):
                raise UsageError(f"{args.spec}: {e}") from None
            raise
        except ShardingUnavailable as e:
            raise UsageError(str(e)) from None
        except EstimateError as e:
            if e.bad_input and not args.measure:  # the model did not take the input it was given
                dims = ", ".join(str(d) for d in shape)
                raise UsageError(f"the model's forward does not accept input of shape (N, {dims}) "
                                 f"({str(dtype)[6:]}): {e.cause} (--input-shape gives one sample's shape)") from None
            if sharding is not None:
                raise UsageError(str(e)) from None
            if not args.measure:
                raise UsageError(f"{e}; add --measure to measure on the real device instead") from None
            notes.append(f"{e}; measured on the real device instead")
        if sharding is not None and budget is not None and estimate is not None and \
                budget * (1 - args.margin) < estimate.breakdown["params"]:
            raise UsageError(f"the budget ({human_bytes(budget)}, {args.margin:.0%} kept free) is smaller than one "
                             f"rank's share of the parameters ({human_bytes(estimate.breakdown['params'])}): more "
                             "ranks, --shard fsdp, or a larger --budget")
        search: BatchSearch | None = None
        if budget is not None and estimate is not None and estimator is not None:
            search = search_max_batch(estimator.peak, estimate, budget, args.margin)
    ranks = None
    if args.fewest_ranks and budget is not None and estimate is not None:
        def one_rank(sharding: Sharding) -> Estimator:
            return Estimator(spec.factory, make_input, warm_batch=args.batch_size, sharding=sharding, **common)

        try:
            ranks = fewest_ranks(one_rank, args.batch_size, int(budget * (1 - args.margin)))
        except (EstimateError, ShardingUnavailable) as e:
            raise UsageError(f"--fewest-ranks: {e}") from None
    return _report(args, spec, make_input, shape, dtype, device, budget, estimate, search, notes, seconds, ranks,
                   loss)


def _report(args: argparse.Namespace, spec: Any, make_input: Callable[[int], Any], shape: list[int], dtype: Any,
            device: str, budget: int | None, estimate: MemoryEstimate | None, search: BatchSearch | None,
            notes: list[str], seconds: float | None, ranks: list[RanksRow] | None = None,
            loss: Loss | None = None) -> int:
    """Measure where asked, then show and write the report."""
    from trainspeed.memory.measure import confirm_max_batch, measure_memory
    from trainspeed.memory.result import BatchSearch, MemoryReport
    from trainspeed.report.json import dumps, memory_dict

    measured = None
    if args.measure:
        def measure(batch: int) -> MeasuredPeak:
            return measure_memory(spec.factory, make_input, batch, optimizer=args.optimizer, amp=args.amp,
                                  checkpointing=args.checkpointing, device=device,
                                  loss=loss.fn if loss is not None else None)

        measured = measure(args.batch_size)
        if search is not None and search.max_batch is not None and estimate is not None:
            usable = int(budget * (1 - args.margin)) if budget else 0
            best, trials, confirmed = confirm_max_batch(measure, search.max_batch, usable, estimate.per_sample_bytes)
            search = BatchSearch(search.budget_bytes, search.margin, best, search.predicted_bytes, trials, confirmed)

    if loss is not None:
        notes.insert(0, loss.said)  # after the steps: a chosen loss is chosen at the first
    report = MemoryReport(model=args.spec, estimate=estimate, search=search, measured=measured,
                          batch_size=args.batch_size, input_shape=shape, input_dtype=str(dtype).replace("torch.", ""),
                          notes=notes, estimate_seconds=seconds, fewest_ranks=ranks)
    if args.json:
        emit(args.json, dumps(memory_dict(report)))
    console_for(args).print(report)  # the report renders itself (report/views.py)
    return 0
