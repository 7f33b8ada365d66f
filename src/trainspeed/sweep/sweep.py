"""`run_sweep`: parse the knob's values, run its arms interleaved, and analyse the points."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psutil
import torch

from trainspeed.errors import UsageError
from trainspeed.load.marks import LoadMark, mark, others_cores
from trainspeed.names import SWEEP_REPEATS, SWEEP_STEPS, SWEEP_WARMUP
from trainspeed.sweep.gpu_model import reference_gpu
from trainspeed.sweep.journal import Journal
from trainspeed.sweep.knobs import KNOBS, Knob, SweepContext
from trainspeed.sweep.result import SweepResult, Trial
from trainspeed.sweep.runner import run_arms
from trainspeed.sweep.summary import best_and_ties, summarise
from trainspeed.workloads.catalog import resolve_workload
from trainspeed.workloads.workload import Workload

DEFAULT_STEPS = SWEEP_STEPS
DEFAULT_REPEATS = SWEEP_REPEATS
DEFAULT_WARMUP = SWEEP_WARMUP
DEFAULT_BATCHES = (16, 128, 1024)


def knob_named(name: str) -> Knob:
    if name not in KNOBS:
        raise UsageError(f"unknown knob {name!r} (choose from {', '.join(KNOBS)})")
    return KNOBS[name]()


def plan(knob: str, workload: str | Workload, values: str | list[str] | None = None, steps: int = DEFAULT_STEPS,
         device: str | None = None, save_every: int | None = None, batches: list[int] | None = None,
         gpu: str = "RTX 3080") -> tuple[Knob, SweepContext]:
    """The knob and its context with the values parsed: every bad input is a UsageError here,
    before anything runs."""
    k = knob_named(knob)
    if steps < 1:
        raise UsageError(f"--steps must be >= 1, got {steps}")
    cuda = torch.cuda.is_available()
    if k.needs_cuda and not cuda:
        raise UsageError(f"{knob}: needs a CUDA device, and this machine has none")
    dev = device or ("cuda" if k.needs_cuda else "cpu")
    if dev not in ("cpu", "cuda"):
        raise UsageError(f"--device must be cpu or cuda, got {dev!r}")
    if dev == "cuda" and not cuda:
        raise UsageError("--device cuda: CUDA is not available here")
    if k.predicts_gpu and not cuda:
        reference_gpu(gpu, 0.0)  # an unknown --gpu fails here, before anything runs
    wl = workload if isinstance(workload, Workload) else resolve_workload(workload)
    ctx = SweepContext(wl, workload if isinstance(workload, str) else wl.name, dev, steps, cuda,
                       psutil.cpu_count(logical=False) or 1, psutil.cpu_count(logical=True) or 1,
                       save_every=save_every, batches=list(batches or DEFAULT_BATCHES), gpu=gpu,
                       from_spec=isinstance(workload, str))
    if isinstance(values, str):
        ctx.values = k.parse(values, ctx)
    elif values is not None:
        ctx.values = k.parse(",".join(values), ctx)
    else:
        ctx.values = k.defaults(ctx)
    return k, ctx


def signature(k: Knob, ctx: SweepContext, warmup: int) -> dict:
    return {"knob": k.name, "workload": ctx.spec, "params": ctx.workload.params, "steps": ctx.steps,
            "warmup": warmup, "device": ctx.device, "save_every": ctx.save_every,
            "batches": ctx.batches if k.name == "crossover" else None, "torch": torch.__version__}


def execute(k: Knob, ctx: SweepContext, repeats: int = DEFAULT_REPEATS, warmup: int = DEFAULT_WARMUP,
            journal: str | Path | None = None, on_trial: Callable[[Trial, int, int], None] | None = None
            ) -> SweepResult:
    if repeats < 1:
        raise UsageError(f"--repeats must be >= 1, got {repeats}")
    specs = k.arms(ctx.values, ctx)
    book = Journal(journal, signature(k, ctx, warmup)) if journal else None
    before = mark()
    out = run_arms(specs, ctx.steps, repeats, warmup, book, on_trial)
    busy = load_note(before, mark())
    ctx.built(out.setups)
    result = SweepResult(k.name, ctx.spec, ctx.device, ctx.steps, repeats,
                         summarise([s.value for s in specs], out.trials))
    if k.ranks:
        result.best, result.same_as_best = best_and_ties(result.points, lambda p: k.score(p, ctx.steps))
    k.analyse(result, ctx)
    if out.resumed:
        result.notes.append(f"resumed: {out.resumed} trials read back from {journal}")
    failed = [p for p in result.points if not p.ok]
    if failed:
        result.notes.append("failed: " + "; ".join(f"{p.value} ({p.error})" for p in failed))
    if busy:
        result.notes.insert(0, busy)
    return result


BUSY_CORES = 0.5
"""Other processes' load (cores kept busy, on average) from which a sweep says its times move with it."""


def load_note(start: LoadMark | None, end: LoadMark | None) -> str | None:
    """The note a sweep's table gets where other processes held cores while it ran (None: they did not, or unread)."""
    others = others_cores(start, end)
    if others is None or others < BUSY_CORES:
        return None
    cores = psutil.cpu_count() or 1
    return (f"other processes kept {others:.1f} of this machine's {cores} CPUs busy while the sweep ran: its times "
            "are slower than on a quiet machine, and a value that uses more threads or processes loses most (the "
            "values were alternated, so the comparison between them stands)")


def run_sweep(knob: str, workload: str | Workload, values: str | list[str] | None = None, *,
              steps: int = DEFAULT_STEPS, repeats: int = DEFAULT_REPEATS, warmup: int = DEFAULT_WARMUP,
              device: str | None = None, journal: str | Path | None = None, save_every: int | None = None,
              batches: list[int] | None = None, gpu: str = "RTX 3080",
              on_trial: Callable[[Trial, int, int], None] | None = None) -> SweepResult:
    """Turn one knob of a workload's training loop and measure what each value does.

    Args:
        knob: one of trainspeed.sweep.KNOBS (record-every, batch-size, num-workers, threads, device,
            crossover, amp, compile, cuda-graphs, accumulate, activation-checkpointing, checkpoint-save,
            world-size).
        workload: a built-in name (iris, digits-cnn, digits-aug, mlp, cnn, transformer; sized as
            "mlp:width=1024,batch=256"), FILE.py:FACTORY returning a Workload, or a Workload.
        values: comma-separated values (or a list); None: the knob's defaults for this machine.
        steps: optimizer steps per timed trial; repeats: trials per value (interleaved rounds).
        journal: a JSONL file the trials are appended to; an interrupted sweep resumes from it.

    Returns:
        SweepResult: per value the median seconds of its trials with a 95% bootstrap interval,
        the knob's findings, and the recommendation the measurements support.
    """
    k, ctx = plan(knob, workload, values, steps, device, save_every, batches, gpu)
    return execute(k, ctx, repeats, warmup, journal, on_trial)
