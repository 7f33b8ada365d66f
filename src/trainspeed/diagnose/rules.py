"""Verdict rules: measurements in, ranked verdicts out (pure, so tested on recorded numbers).

Each rule looks at one cause, states its evidence in numbers, names a concrete action, and
predicts the step speed-up from an explicit step-time model (labelled as a prediction). The
thresholds are the smallest share of a step worth a user's attention, not tuned to any script.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from trainspeed.watch.phases import EDGE_PHASES
from trainspeed.probe.loader import Handover
from trainspeed.watch.result import LoaderInfo, OpTime, OtherSite, SyncSite, Verdict, WatchResult

DATA_SHARE = 0.20  # waiting on data for a fifth of the step is worth fixing first
THREADS_GAIN = 1.10  # threads_unused: more threads advised only where predicted to make the run this much faster
WORKERS_GAIN = 1.05  # workers are advised only where they are predicted to make the run this much faster
START_SHARE = 0.5  # a loader's starts (workers spawned anew each epoch) are the cause when they are half its wait
STARTS_PER_STEP = 0.5  # a DataLoader iterator started every other step or more often: `next(iter(loader))` in the loop
CHECKPOINT_SHARE = 0.10
OTHER_SHARE = 0.15
LOG_SITE_SHARE = 0.30  # the logging line must hold this much of the unexplained time
SYNC_SHARE = 0.10
SYNC_GAIN = 0.05  # a sync whose removal is predicted to save less than this share of the step is not the cause
H2D_SHARE = 0.15
ARITHMETIC_LOW = 0.25  # arithmetic under a quarter of the compute phases: overhead dominates
ARITHMETIC_HIGH = 0.50  # arithmetic over half of them: the step is doing real work
LAUNCH_GAIN = 0.05  # per-op overhead beyond a bare dispatch per op must be this share of the step
OP_WORK_DISPATCHES = 2.0
"""On a CPU, ops whose arithmetic averages this many bare dispatches or more are not small, and
launch_bound leaves them alone: for their arithmetic to fall under ARITHMETIC_LOW of the compute
phases, each op's fixed cost (dispatch, autograd's node, the module's Python) would have to pass 6
dispatches. The seed's tiny ops measured 3.4 to 7.9 on a 2-vCPU VM (six runs, detailed steps' medians
with the per-call hooks; the dispatch probe alone moves between 1.6 and 3.7 us there), so ops
carrying just over two dispatches of arithmetic under the largest of those fixed costs are the true
positives this gives up. The test uses counted FLOPs and the two probes taken together, not the
step's time: a machine slower during the run than at the probes cannot make big ops look like
per-op overhead (the planted logging example's ops carry 2.6 to 10.5 dispatches of arithmetic,
nine runs)."""
OP_FIXED_DISPATCHES = 30.0
"""The most one call of an op costs the host before it does any work, in bare dispatches. In the CPU's
profiler window (its steps come soon after the warm-up, under dispatch modes) the seed's tiny ops took
up to 12 dispatches a call (its 120 x 4 addmm: 43 us at a 3.4 us probe; 2026-11-23, the 2-vCPU VM). A
call longer than this does work the FLOP formulas do not count (an LSTM layer as one mkldnn op, an
embedding bag's backward, an optimizer's update of a large tensor): its time beyond this is work, not
per-op overhead (`_op_work`). A slow window leaves a tiny op a few microseconds over, which weighs
nothing beside a step's compute phases."""
OTHER_OP_DISPATCHES = 2.0
"""Python's part of each torch op in "other", in bare dispatches, beside its measured host time: the
window times an op below its dispatch mode, and the call that issued it (a torch.nn.functional
wrapper, the indexing of a tensor) runs above. host_code_heavy charges both to torch, not to the
script. The window's timings are if anything high (its steps run under dispatch modes, and soon after
the warm-up: a slice or an argmax timed 10 to 47 us there, on the 2-vCPU VM), so torch's share is an
upper bound, and the script's own code is blamed only for what torch cannot have taken."""
OTHERS_BUSY = 0.5
"""Cores other processes must keep busy, on average, before the doctor calls the machine shared: a quiet
machine's daemons use a few hundredths of one (0.01 on the 2-vCPU VM). One busy process beside the seed's
2 intra-op threads there measured 0.64 (the threads' spinning takes the rest)."""
DEVICE_BUSY_LOW = 0.5
DEVICE_BUSY_HIGH = 0.8
MEMORY_SHARE = 0.90
SMALL_BATCH = 256
COMM_SHARE = 0.15  # all-reduce exposed after backward for this share of the step
STRAGGLER_EXCESS = 0.10  # a rank busier than the others' median by this much...
STRAGGLER_MIN_MS = 0.05  # ...and by at least this many milliseconds
NO_SYNC_MICRO_BATCHES = 4  # comm_bound's prediction: accumulate this many micro-batches under no_sync()
SLOW_DTYPE_SHARE = 0.20  # matrix arithmetic in one dtype for a fifth of the step...
SLOW_DTYPE_RATE = 0.6
"""...in a dtype this CPU multiplies at most this share of its float32 rate: float64 on AVX2 (about
0.45 on Zen 3), bfloat16 and float16 without native matrix units (about 0.01 there). A CPU with AMX
runs bfloat16 faster than float32, and the rule stays silent."""
SLOW_DTYPES = ("bfloat16", "float16", "float64")
OPTIMIZER_SHARE = 0.20  # optimizer.step and zero_grad for a fifth of the step: worth a fused kernel
OPTIMIZER_GAIN = 0.05  # ...if fusing would save this share of the step
REBUILT_PER_STEP = 0.5  # a new optimizer built every other step or more often: inside the loop
ANOMALY_SHARE = 0.10  # anomaly detection's own work for a tenth of the step
ANOMALY_OPS = ("aten.isnan", "aten._is_any_true")  # backward's check of every gradient for NaN, in anomaly mode
EVAL_SHARE = 0.15  # evaluation for this share of the run: worth asking whether it is needed that often
EVAL_LESS = 4  # evaluation_heavy's prediction: evaluating a quarter as often
MAX_PREDICTED = 10.0  # no model here is trusted beyond a 10x prediction

LOOP_LINE_MORE = 0.15
"""A training loop's line names a verdict instead of the innermost line the samples name most where the samples
under it (its own and those of the functions it called) outnumber that line's by this share of all: a function
called from the loop (a data generator, a metric helper) spreads its time over its lines."""
OUTSIDE_SHARE = 0.20  # torch's work outside forward, backward and the optimizer for a fifth of the run
_LOSS = re.compile(r"\bloss\w*|criterion|cross_entropy|_loss\(|\bnll")  # a loss computed outside the model: the step's own work
_LOGGING = re.compile(  # a name or a method that logs; not log_prob, log_softmax, logits, torch.log(x), x.log()
    r"(?<![\w.])(print|pprint|log|logs|logger|logging|tqdm|wandb|mlflow|writer|json\.dump)\b"
    r"|\.(write|writelines|flush|set_postfix|add_scalars?|add_histogram|add_text"
    r"|log_(?:metrics?|dict|scalars?|params?|artifacts?|images?|text|hyperparams|table))\s*\("
    r"|(?<!torch)(?<!np)(?<!numpy)(?<!math)\.log\s*\((?!\s*\))|\bos\.fsync\b")


_RECORD = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*(?:[{\[]|f?[\"']|dict\()")
"""A line that builds a record, a row or a message under one name (`record = {"loss": loss.item(), ...}`,
`msg = f"..."`): logging, where one of the run's logging lines uses that name (`log.write(json.dumps(record))`)."""


def _logs(r: WatchResult) -> Callable[[str | None], bool]:
    """Whether a line of the run logs: a logging call (_LOGGING), or a line that builds what one of the run's logging
    lines (among the lines its samples and reads name) logs. The record's line holds the reads and the Python of
    the logging as much as the line that writes it, and a verdict on it alone would say "host code"."""
    codes = {s.code for s in (*r.other_sites, *r.loop_sites, *r.sync_sites) if s.code}
    logging = [code for code in codes if _LOGGING.search(code)]
    built = set()
    for code in codes:
        record = _RECORD.match(code)
        if record and code not in logging and \
                any(re.search(rf"\b{re.escape(record.group(1))}\b", line) for line in logging):
            built.add(code)
    return lambda code: bool(code) and (code in built or bool(_LOGGING.search(code)))


@dataclass(frozen=True)
class Context:
    """Facts about the machine that the rules need beside the measurements."""

    dispatch_us: float
    """Measured cost of one tiny CPU op (probe.cpu_dispatch_us)."""
    matmul_gflops: float
    """Measured CPU matmul rate (probe.cpu_matmul_gflops): how fast the step's arithmetic could run."""
    physical_cores: int
    logical_threads: int
    largest_batch: int | None = None
    """From the memory estimator, when memory pressure was found and an estimate could be made."""
    cuda_op_us: float | None = None
    """Measured cost of one tiny CUDA op (probe.cuda_op_us): dispatch plus a kernel launch. None without CUDA."""
    dtype_gflops: dict[str, float] = field(default_factory=dict)
    """Measured CPU matmul rate in the dtypes `slow_dtype_candidates` names ("bfloat16": 1.3)."""
    optimizer_ms: tuple[float, float] | None = None
    """One step of the run's optimizer over its parameters' shapes, measured after the run: (as configured,
    with fused=True) milliseconds; None when not probed (`optimizer_candidate`) or it has no fused kernel."""
    rebuild_ms: tuple[float, float] | None = None
    """The run's optimizer on its parameters' shapes, measured after the run: (built and stepped once, one step
    of one kept) milliseconds; None when not probed (`rebuilt_candidate`)."""
    handover: Handover | None = None
    """One worker process handing over batches shaped like the busiest loader's, measured after the run (None:
    not probed, `loader_candidate`)."""
    batched_ms: float | None = None
    """A batch of the busiest loader's TensorDataset taken whole (one index op per tensor), measured after the
    run; None unless that loader fetches a TensorDataset row by row."""
    usable_cores: int | None = None
    """CPUs this process may run on at once (affinity, cgroup quota: hardware.cpu.usable_cores); None: not known."""
    thread_gflops: tuple[float, float] | None = None
    """GFLOP/s of a matmul of the run's size at torch's threads as the run had them and as advised
    (`threads_candidate`), measured in turn after the run; None when not probed."""


def _ms(r: WatchResult, phase: str) -> float:
    return r.phases[phase].host_ms


def _run_step_ms(r: WatchResult) -> float:
    """Milliseconds per step over the whole run (the mean), where shares of the run's time turn into time."""
    return r.mean_ms or r.median_ms or 0.0


def predicted_label(speedup: float) -> str:
    """How a report words a predicted speed-up: the models' cap shown as a floor, not as the figure."""
    if speedup >= MAX_PREDICTED:
        return f"predicted at least {MAX_PREDICTED:.0f}x (no prediction goes past {MAX_PREDICTED:.0f}x)"
    return f"predicted {speedup:.2f}x"


def _speedup(step: float, new_step: float) -> float:
    return round(min(MAX_PREDICTED, step / max(new_step, step / MAX_PREDICTED)), 2)


_COMPUTE = ("forward", "backward", "optimizer")


def _room(r: WatchResult) -> float:
    """Milliseconds of the median step beside its edge phases (data, h2d, sync, checkpoint, comm: timed on
    every step): the room the detailed steps' phases and the profiler window's ops must fit in."""
    return (r.median_ms or 0.0) - sum(_ms(r, p) for p in EDGE_PHASES)


def _compute_ms(r: WatchResult) -> float:
    """Forward+backward+optimizer of the median step. Their medians come from the detailed steps, which
    also carry the per-call hooks (a module call, backward, the optimizer step each pass through the
    watcher): on a tiny step those medians add up to more than the median step itself (0.63 ms of a
    0.43 ms CPU seed step, the demo of 2026-11-23). Where the detailed steps' forward, backward,
    optimizer and other outgrow the room the median step leaves beside its edge phases (data, h2d,
    sync, checkpoint, comm: timed on every step), they are scaled down to it."""
    compute = sum(_ms(r, p) for p in _COMPUTE)
    detailed = compute + _ms(r, "other")
    room = _room(r)
    if r.median_ms and detailed > room > 0:
        return compute * room / detailed
    return compute


def _compute_part_ms(r: WatchResult, *phases: str) -> float:
    """Some of forward, backward and optimizer, in the median step: scaled as `_compute_ms` scales them all."""
    compute = sum(_ms(r, p) for p in _COMPUTE)
    return sum(_ms(r, p) for p in phases) * _compute_ms(r) / compute if compute > 0 else 0.0


def _arithmetic_ms(r: WatchResult, c: Context) -> float | None:
    """Time the step's counted FLOPs need at the measured matmul rate (CPU)."""
    if r.flops_per_step is None or c.matmul_gflops <= 0:
        return None
    return r.flops_per_step / (c.matmul_gflops * 1e9) * 1e3


def _window_scale(r: WatchResult) -> float:
    """The CPU profiler window's clock against the median step: where the window's ops all together
    outgrow the room the median step leaves beside its edge phases, the window ran slower than the
    median step (soon after the warm-up), and its times are scaled down to that room."""
    if not r.op_ms_per_step or not r.median_ms:
        return 1.0
    return max(0.0, min(1.0, _room(r) / r.op_ms_per_step))


def _op_work(r: WatchResult, c: Context) -> tuple[float, list[OpTime]]:
    """CPU: milliseconds per step the window's ops without a FLOP formula spent beyond a fixed cost per call
    (OP_FIXED_DISPATCHES), on the median step's clock; and those ops, most of that work first."""
    if r.device != "cpu" or not r.op_times:
        return 0.0, []
    fixed = OP_FIXED_DISPATCHES * c.dispatch_us / 1e3
    heavy = sorted(((row.ms - row.calls * fixed, row) for row in r.op_times
                    if not row.arithmetic and row.ms > row.calls * fixed), key=lambda w: w[0], reverse=True)
    return sum(w for w, _ in heavy) * _window_scale(r), [row for _, row in heavy]


def _names(rows: list[OpTime], most: int = 3) -> str:
    return ", ".join(f"{row.op} x{row.calls:.0f}" for row in rows[:most])


def _gpu_busy_ms(r: WatchResult) -> float | None:
    """Milliseconds per step during which the GPU ran work: its kernels' own times from the profiler
    window, else NVML's utilisation (the share of time some kernel ran) times the step. Not the
    phases' device_ms: an event pair spans the GPU's idle gaps between launches as well."""
    if r.device != "cuda" or not r.median_ms:
        return None
    if r.gpu_busy_ms_per_step is not None:
        return r.gpu_busy_ms_per_step
    if r.gpu_util.available and r.gpu_util.mean is not None:
        return r.gpu_util.mean / 100 * r.median_ms
    return None


def _busy_source(r: WatchResult) -> str:
    return "its kernels' own times" if r.gpu_busy_ms_per_step is not None else "NVML utilisation"


def _burst_note(r: WatchResult, phase: str) -> str:
    """How a phase's time is spread: a median step far under its share means waits in bursts. The
    share of the run's time is said once, and the median step's part of it is its own percentage."""
    typical = _ms(r, phase)
    share = r.phases[phase].share
    median = r.median_ms or 0.0
    if typical >= 0.5 * share * median:
        return f"{typical:.2f} ms of a {median:.2f} ms step ({share:.0%} of the run's time)"
    return (f"{share:.0%} of the run's time, in bursts: the median step spends {typical:.2f} ms of "
            f"{median:.2f} ms there ({typical / median:.0%})")


def input_bound(r: WatchResult, c: Context) -> Verdict | None:
    share = r.phases["data"].share
    if share < DATA_SHARE or not r.median_ms:
        return None
    workers = max((ld.num_workers for ld in r.loaders), default=0)
    cores = max(1, c.physical_cores)
    suggest = min(max(workers * 2, min(4, cores)), cores)  # worker processes beyond the cores share them
    evidence = f"waiting on the DataLoader took {_burst_note(r, 'data')}; num_workers={workers}"
    if r.gpu_util.sawtooth:
        evidence += f"; GPU utilisation is a saw-tooth ({r.gpu_util.why})"
    collates = sorted({ld.collate for ld in r.loaders if ld.collate})
    made = f"__getitem__ or the collate_fn `{'`, `'.join(collates)}`" if collates else "__getitem__"
    precompute = "precompute: tokenize or decode once, before training; cache" if collates else "precompute, cache"
    cheaper = (f"make {made} cheaper ({precompute}) or move the augmentation to the device" +
               ("; if it is cheap already (a dataset held in memory as tensors), num_workers=0 saves each batch "
                "its trip between processes" if workers else ""))
    pin = ", pin_memory=True" if r.device == "cuda" else ""
    starts = min(r.loader_start_share or 0.0, share)  # a stop inside the run's last step can tip it over
    respawned = [ld for ld in r.loaders if ld.num_workers > 0 and not ld.persistent_workers]
    if r.loader_starts >= 2 and r.loader_starts >= STARTS_PER_STEP * r.steps_measured and starts >= START_SHARE * share:
        evidence += (f"; {starts:.0%} of the run's time is starting and stopping DataLoader iterators: {r.loader_starts} "
                     f"starts in {r.steps_measured} steps, {r.loader_start_ms or 0.0:.1f} ms each with its first batch "
                     "and its stop"
                     + (f", each starting its {respawned[0].num_workers} worker processes anew" if respawned else "")
                     + " (predicted speed-up is an upper bound: the run without those starts)")
        action = ("make the iterator once, before the loop (`it = iter(loader)`, then `next(it)` each step and a new "
                  "`iter(loader)` only when it runs out), or loop `for x, y in loader:`; each `iter(loader)` starts a "
                  "new pass over the data (a new shuffle" + (", new worker processes" if respawned else "")
                  + (", batches prefetched that one `next()` then drops" if workers else "") + ")")
        return Verdict("input_bound", evidence, action, _speedup(1.0, 1 - starts))
    if respawned and r.loader_starts >= 2 and starts >= START_SHARE * share:
        evidence += (f"; {starts:.0%} of the run's time is the DataLoader starting and stopping: {r.loader_starts} starts (one "
                     f"per epoch), {r.loader_start_ms or 0.0:.1f} ms each with its first batch and its stop, its "
                     f"{respawned[0].num_workers} worker processes started anew every time (persistent_workers=False; "
                     "predicted speed-up is an upper bound: the run without those starts)")
        action = (f"DataLoader(..., persistent_workers=True{pin}): the workers then live from one epoch to the next; "
                  "a dataset already in memory as tensors needs no workers at all (num_workers=0)")
        return Verdict("input_bound", evidence, action, _speedup(1.0, 1 - starts))
    loader = busiest_loader(r)
    if loader is not None and loader.batchable and c.batched_ms is not None:
        # a TensorDataset fetched row by row: one index op per tensor per batch instead (measured after the run)
        step = _run_step_ms(r)
        wait = share * step
        if c.batched_ms < wait:
            evidence += (f"; the DataLoader takes each batch's {loader.batch_size} rows of a TensorDataset one by one and "
                         f"collates them; taking the batch whole took {c.batched_ms:.2f} ms (measured after the run, "
                         f"{loader.batch_size} rows by one index per tensor)")
            return Verdict("input_bound", evidence, _batched_action(loader, workers),
                           _speedup(step, step - wait + c.batched_ms))
    if suggest <= workers:
        evidence += (f", {'as many as' if workers == cores else 'more than'} this machine's {cores} physical cores: "
                     "more workers would share them (predicted speed-up is an upper bound: the run without its wait)")
        return Verdict("input_bound", evidence, cheaper, _speedup(1.0, 1 - share))
    new, why = _with_workers(r, c, share, workers, suggest)
    if why and new >= 1 / WORKERS_GAIN:  # handing the batches over would cost what the workers save
        evidence += (f"{why}, so {suggest} workers would not make the run faster on this machine's {cores} physical "
                     "cores (predicted speed-up is an upper bound: the run without its wait)")
        if loader is not None and loader.dataset == "TensorDataset" and not loader.item_by_item:
            size = loader.batch_size or "B"
            cheaper = ("the batches are rows of tensors in memory, and the DataLoader's own Python is most of their "
                       "cost: index the tensors directly (perm = torch.randperm(len(x)), then x[perm[i:i + "
                       f"{size}]] and y[perm[i:i + {size}]] each step), or let trainspeed.fit do that")
        elif loader is not None and loader.item_by_item:
            cheaper += ("; if __getitem__ only indexes data held in memory, take each batch whole: "
                        "DataLoader(dataset, batch_size=None, sampler=BatchSampler(RandomSampler(dataset), "
                        f"{loader.batch_size or 'B'}, drop_last=False)) hands __getitem__ the batch's list of indices")
        return Verdict("input_bound", evidence, cheaper, _speedup(1.0, 1 - share))
    threads = ""
    if r.torch_threads + suggest > c.logical_threads:
        keep = max(1, c.logical_threads - suggest)
        threads = (f" and torch.set_num_threads({keep}) (torch's {r.torch_threads} intra-op threads would take the "
                   f"cores the workers need)" if keep < r.torch_threads else "")
    action = (f"DataLoader(..., num_workers={suggest}, persistent_workers=True{pin}){threads}; if that is not enough, "
              f"{cheaper}")
    if why:
        evidence += why + " (predicted speed-up is an upper bound)"
    return Verdict("input_bound", evidence, action, _speedup(1.0, new))


def busiest_loader(r: WatchResult) -> LoaderInfo | None:
    """The loader that handed out the most batches while watched (the training set's)."""
    return max(r.loaders, key=lambda ld: ld.batches, default=None)


def loader_candidate(r: WatchResult) -> bool:
    """Whether the run waited on data enough for `input_bound`: the loader probes are worth running."""
    return bool(r.loaders) and r.phases["data"].share >= DATA_SHARE and bool(r.median_ms)


def _batched_action(loader: LoaderInfo, workers: int) -> str:
    size = loader.batch_size or "B"
    return (f"take each batch whole: DataLoader(dataset, batch_size=None, sampler=BatchSampler(RandomSampler(dataset), "
            f"{size}, drop_last=False){', num_workers=0' if workers else ''}) - TensorDataset then indexes each tensor "
            "once per batch (SequentialSampler for a loader without shuffle; torch.utils.data has both); or "
            "trainspeed.fit, which does that itself")


def _with_workers(r: WatchResult, c: Context, share: float, workers: int, suggest: int) -> tuple[float, str]:
    """The run's time with `suggest` workers, in shares of its time now, and what the estimate rests on.

    Workers make batches beside the step, but each batch still costs the training process its
    handover (receiving and rebuilding it: `main_ms`, measured after the run with a worker handing
    over batches of the run's shapes), and a worker its making plus its handover (`wall_ms`). All of
    that shares the machine's cores with the step: the run is no faster than the longest of the step
    with the handover, the workers' turn per batch, and all that work (both sides of the handover)
    spread over the cores, the step's compute counted as one core's. Cores are taken to run in
    parallel at full speed: an upper bound (two worker processes on a 2-vCPU VM made batches of tiny
    torch ops 1.3x to 1.6x faster than one, not 2x)."""
    busy = 1 - share
    if workers or c.handover is None or not r.median_ms:
        # the wait left with workers already there (its making unknown): it shrinks by the workers added
        return max(busy, share * max(workers, 1) / suggest), ""
    step = _run_step_ms(r)
    hand, main = c.handover.wall_ms / step, c.handover.main_ms / step
    cores = max(1, c.physical_cores)
    new = max(busy + main, (share + hand) / suggest, (busy + main + share + hand) / cores)
    why = (f"; a worker process took {c.handover.wall_ms:.2f} ms to hand over each batch of this shape, "
           f"{c.handover.main_ms:.2f} ms of it in the training process (measured after the run), against "
           f"{share * step:.2f} ms to make one here")
    return new, why


def checkpoint_heavy(r: WatchResult, c: Context) -> Verdict | None:
    share = r.phases["checkpoint"].share
    if share < CHECKPOINT_SHARE or not r.median_ms:
        return None
    evidence = f"torch.save took {_burst_note(r, 'checkpoint')}"
    # saving `factor` times less often brings it under 1% of the run's time
    factor = max(2, math.ceil(share / 0.01))
    if _ms(r, "checkpoint") > 0:  # the median step saves: the script saves every step (or nearly)
        action = f"save every {factor} steps instead of every step, or hand the state_dict copy to a background thread"
    else:
        action = f"save {factor} times less often, or hand the state_dict copy to a background thread"
    return Verdict("checkpoint_heavy", evidence, action, _speedup(1.0, 1 - share * (1 - 1 / factor)))


def _logging_reads(r: WatchResult, logs: Callable[[str | None], bool]) -> tuple[float, list[SyncSite]]:
    """CPU: milliseconds per step of host reads made on logging lines (`logs`, the run's `_logs`; `print(loss)`
    formats a tensor: its `__repr__`), and those lines' sites, the most time first. On a GPU a read is also a wait
    for the device: sync_bound's."""
    if r.device == "cuda" or not r.median_ms or not r.sync_sites:
        return 0.0, []
    total = sum(s.total_ms for s in r.sync_sites)
    sites = [s for s in r.sync_sites if logs(s.code)]
    if total <= 0 or not sites:
        return 0.0, []
    return r.phases["sync"].share * r.median_ms * sum(s.total_ms for s in sites) / total, sites


def logging_heavy(r: WatchResult, c: Context) -> Verdict | None:
    """Logging on every step: stack samples outside every phase on logging lines (a print, a logger, a
    flush), and, on a CPU, the tensors those lines format (their host reads)."""
    if not r.median_ms:
        return None
    step, share, other = r.median_ms, r.phases["other"].share, _ms(r, "other")
    logs = _logs(r)
    logging_sites = [s for s in r.other_sites if logs(s.code)]
    part = sum(s.share_of_other for s in logging_sites)
    sampled = share >= OTHER_SHARE and part >= LOG_SITE_SHARE
    reads, read_sites = _logging_reads(r, logs)
    if not sampled and reads + (other * part if part >= LOG_SITE_SHARE else 0.0) < OTHER_SHARE * step:
        return None
    found = []
    if part >= LOG_SITE_SHARE:
        top = logging_sites[0]
        found.append(f"{share:.0%} of the step ({other:.2f} ms) is outside every PyTorch phase; {part:.0%} of those "
                     f"stack samples are on logging lines, most at {_site(top)}")
    else:
        part = 0.0
    action = "log every N steps (and aggregate in between), without flushing to disk each time; keep values on the device until then"
    if reads:
        top_read = read_sites[0]
        per_call = top_read.total_ms / max(top_read.count, 1)
        found.append(f"{reads:.2f} ms per step ({reads / step:.0%}) goes to the tensors logging lines format (host "
                     f"reads), most at {top_read.where} ({top_read.op}, {per_call:.2f} ms a call): `{top_read.code}`")
        if any(s.op == "__repr__" for s in read_sites):
            action += "; print numbers (loss.item()), not tensors: a tensor's repr formats every element"
    return Verdict("logging_heavy", "; ".join(found), action, _speedup(step, step - other * part - reads))


def _site(top: OtherSite) -> str:
    """A stack-sampled line as the evidence names it, with the library its time ran in, where one held most."""
    inside = f", most of its samples inside {top.inside}" if top.inside else ""
    return f"{top.where}: `{top.code}`{inside}"


def _library_tip(r: WatchResult) -> str:
    """Advice for a library that holds most of a top line's time in `other`, where there is a known lever."""
    if any(s.inside == "torch.distributions" for s in r.other_sites[:3]):
        return ("; torch.distributions checks its arguments on every distribution it builds and every log_prob: "
                "torch.distributions.Distribution.set_default_validate_args(False) (or validate_args=False) turns "
                "that off once the script is known to be right")
    return ""


def _subject(r: WatchResult, top: OtherSite, keep: Callable[[OtherSite], bool]) -> tuple[OtherSite, str]:
    """The line a verdict about time in "other" names, and the words that say why where it is not `top` (the
    innermost line the samples name most): the training loop's line the samples ran under, when more of them
    did than at `top` by LOOP_LINE_MORE (of those `keep` lets through)."""
    loop = [s for s in r.loop_sites if keep(s)]
    if not loop or loop[0].where == top.where or loop[0].share_of_other < top.share_of_other + LOOP_LINE_MORE:
        return top, ""
    line = loop[0]
    return line, (f"; {line.share_of_other:.0%} ran under the training loop's line {line.where}: `{line.code}` (the "
                  "line and the functions it calls)")


def host_code_heavy(r: WatchResult, c: Context) -> Verdict | None:
    """Time outside every phase that torch's ops there do not explain: the script's own host code on
    every step (a metric computed with numpy or scikit-learn, a Python loop over items, a sleep or
    a wait, a cache flush), at the line the stack samples name. Logging lines are logging_heavy's."""
    share = r.phases["other"].share
    if share < OTHER_SHARE or not r.median_ms or not r.other_sites or r.other_ops_per_step is None:
        return None
    logs = _logs(r)
    sites = [s for s in r.other_sites if not logs(s.code)]
    if not sites:
        return None
    top = sites[0]
    line, under = _subject(r, top, lambda s: not logs(s.code))
    if line.share_of_other < LOG_SITE_SHARE:
        return None
    # by the run's share of other (summed over every detailed step), steadier than other's median
    step = r.median_ms
    other = share * step
    torch_ms = (r.other_op_ms_per_step or 0.0) + r.other_ops_per_step * OTHER_OP_DISPATCHES * c.dispatch_us / 1e3
    host = other - torch_ms
    if host < OTHER_SHARE * step:
        return None
    gain = min(host, other * line.share_of_other)  # that line's part, less all of torch's
    ops = (f"the {r.other_ops_per_step:.0f} torch ops per step there take at most {torch_ms:.2f} ms"
           if r.other_ops_per_step >= 0.5 else "no torch op runs there")
    evidence = (f"{share:.0%} of the run's time ({other:.2f} ms of the median {step:.2f} ms step) is outside every "
                f"PyTorch phase; {ops}, so "
                f"{host:.2f} ms ({host / step:.0%}) is the script's own host code; {top.share_of_other:.0%} of the "
                f"stack samples there are at {_site(top)}{under}")
    action = ("that line runs on every step: run it every N steps or after the loop, hand it to a background "
              "thread, or make it cheaper (vectorise Python loops; keep metrics as tensors and read them every N "
              "steps); if it prepares data, a DataLoader with workers runs it beside the step" + _library_tip(r))
    return Verdict("host_code_heavy", evidence + " (predicted speed-up: that line's host time out of the step)",
                   action, _speedup(step, step - gain))


def outside_work(r: WatchResult, c: Context, host: Verdict | None) -> Verdict | None:
    """Work outside forward, backward and the optimizer on every step that host_code_heavy leaves to torch (its
    ops there explain the time): a deep copy of the model, a running average of its weights, a metric, data
    prepared in the loop, at the line the stack samples name. Lines that compute a loss are the step's own
    work, and logging lines logging_heavy's. No prediction: whether that line's work is needed on every
    step is the script's to say, not the watcher's."""
    share = r.phases["other"].share
    if host is not None or share < OUTSIDE_SHARE or not r.median_ms:
        return None
    logs = _logs(r)
    sites = [s for s in r.other_sites if not logs(s.code) and not _LOSS.search(s.code)]
    if not sites:
        return None
    top, step = sites[0], r.median_ms
    line, under = _subject(r, top, lambda s: not logs(s.code) and not _LOSS.search(s.code))
    if line.share_of_other < LOG_SITE_SHARE:
        return None
    other = share * step
    ops = (f"; {r.other_ops_per_step:.0f} torch ops per step run there" if r.other_ops_per_step else "")
    evidence = (f"{share:.0%} of the run's time ({other:.2f} ms of the median {step:.2f} ms step) is outside forward, "
                f"backward and the optimizer{ops}; {top.share_of_other:.0%} of the stack samples there are at "
                f"{_site(top)}{under} (about {other * line.share_of_other:.2f} ms per step; no prediction: "
                "whether that work is needed on every step is the script's to say)")
    action = ("that line runs on every step, beside the training step: if it need not (a copy of the model, an average "
              "of its weights, a metric), run it every N steps; copy weights into one model kept for it "
              "(torch._foreach_copy_, torch._foreach_lerp_ for an average, or torch.optim.swa_utils.AveragedModel) "
              "rather than copy.deepcopy a new one; a loop over parameters can be one torch._foreach_* call, and an update "
              "of the parameters by hand a torch.optim optimizer (fused=True); data preparation belongs in a "
              "DataLoader's workers" + _library_tip(r))
    return Verdict("outside_work", evidence, action, None)


def _dtype_arithmetic(r: WatchResult) -> dict[str, list[OpTime]]:
    """A CPU run's matrix arithmetic (the window's ops with a FLOP formula) in each dtype but float32."""
    out: dict[str, list[OpTime]] = {}
    if r.device != "cpu" or not r.op_times:
        return out
    for row in r.op_times:
        if row.arithmetic and row.dtype in SLOW_DTYPES:
            out.setdefault(row.dtype, []).append(row)
    return out


def _anomaly(r: WatchResult) -> tuple[float, float, float]:
    """Autograd's anomaly detection, per step: milliseconds storing formatted stacks (timed on the detailed
    steps), milliseconds of its NaN checks in backward and how many ops they are (the CPU profiler window's,
    on the median step's clock). Zeros when it was off."""
    if not r.anomaly_ms_per_step:
        return 0.0, 0.0, 0.0
    rows = [row for row in r.op_times or () if row.op in ANOMALY_OPS]
    return (r.anomaly_ms_per_step, sum(row.ms for row in rows) * _window_scale(r),
            sum(row.calls for row in rows))


def anomaly_detection(r: WatchResult, c: Context) -> Verdict | None:
    """Autograd's anomaly detection left on: every op that records a gradient stores a formatted Python stack,
    and backward checks every gradient for NaN. Prediction: the step without both."""
    stacks, checks, _ = _anomaly(r)
    step = r.median_ms
    if not stacks or not step:
        return None
    cost = min(stacks + checks, step)
    if cost < ANOMALY_SHARE * step:
        return None
    where = (f" and {checks:.2f} ms checking every gradient for NaN (aten.isnan, aten._is_any_true in the profiler "
             "window)" if checks else "")
    evidence = (f"autograd's anomaly detection is on: {stacks:.2f} ms per step storing a formatted Python stack for "
                f"every op that records a gradient{where}, {cost / step:.0%} of the {step:.2f} ms step "
                "(predicted speed-up: the step without them)")
    action = ("turn it off for training: remove torch.autograd.set_detect_anomaly(True) or the "
              "torch.autograd.detect_anomaly() block; switch it on only to find where a NaN or an in-place error "
              "comes from, for a few steps")
    return Verdict("anomaly_detection", evidence, action, _speedup(step, step - cost))


def optimizer_candidate(r: WatchResult) -> bool:
    """Whether the run's optimizer is worth probing fused: not fused already, and its phase a fifth of the step
    (not when a new optimizer is built every step: its phase then holds the new one's making of its state)."""
    opt = r.optimizer
    return bool(opt is not None and not opt.fused and r.median_ms and not rebuilt_candidate(r) and
                _compute_part_ms(r, "optimizer") >= OPTIMIZER_SHARE * r.median_ms)


def rebuilt_candidate(r: WatchResult) -> bool:
    """Whether the script builds a new optimizer every other step or more often (inside its loop)."""
    return r.optimizers_built >= 2 and r.optimizers_built >= REBUILT_PER_STEP * r.steps_seen


def optimizer_rebuilt(r: WatchResult, c: Context) -> Verdict | None:
    """A new optimizer built inside the loop: its construction on every step, and its first step making its
    state (zeroed moment or momentum tensors) anew each time. Predicted from the doctor's probe after the run:
    building one and stepping it once against a step of one kept, on the run's parameter shapes."""
    step = r.median_ms
    if not rebuilt_candidate(r) or not step:
        return None
    kind = r.optimizer.kind if r.optimizer is not None else "optimizer"
    built = r.optimizer_build_ms or 0.0
    if c.rebuild_ms is not None:
        fresh, kept = c.rebuild_ms
        saved = max(fresh - kept, built)
        how = (f"; on the run's parameter shapes here, building one and taking its first step took {fresh:.2f} ms "
               f"against {kept:.2f} ms for a step of one kept (both measured after the run; predicted speed-up: "
               "the step less the difference)")
    else:
        saved = built
        how = " (predicted speed-up: the step less the construction alone, a lower bound)"
    saved *= min(1.0, r.optimizers_built / max(1, r.steps_seen))
    evidence = (f"a new {kind} was built {r.optimizers_built} times in {r.steps_seen} steps ({built:.3f} ms each in "
                f"its constructor): each starts with no state and makes it at its first step{how}")
    action = ("build the optimizer once, before the loop, and keep it: a new one also throws away its state at every "
              "step (SGD's momentum buffers, Adam's moment estimates and step count), so the run does not train as the "
              "optimizer means to; change the learning rate through `optimizer.param_groups` or a "
              "torch.optim.lr_scheduler instead")
    return Verdict("optimizer_rebuilt", evidence, action, _speedup(step, step - saved))


def optimizer_heavy(r: WatchResult, c: Context) -> Verdict | None:
    """The optimizer step, a few ops per parameter tensor one tensor at a time, against the same class fused
    (one kernel for every tensor), both measured on the run's parameter shapes after the run."""
    if not optimizer_candidate(r) or c.optimizer_ms is None or r.optimizer is None:
        return None
    step, opt = r.median_ms or 0.0, _compute_part_ms(r, "optimizer")
    configured, fused = c.optimizer_ms
    # the phase at the probe's ratio: in the run each step comes after forward and backward have turned the
    # caches over, and runs slower than the probe's back-to-back steps (12.6 ms against 7.3 on /tmp's script)
    saved = opt * max(0.0, 1 - fused / configured) if configured > 0 else 0.0
    if saved < OPTIMIZER_GAIN * step:
        return None
    o = r.optimizer
    how = ("foreach=True" if o.foreach else "foreach=False" if o.foreach is False else
           "torch's default, one tensor at a time on a CPU" if r.device != "cuda" else "torch's default, foreach")
    evidence = (f"optimizer.step and zero_grad take {opt:.2f} ms of the {step:.2f} ms step ({opt / step:.0%}): "
                f"{o.kind} updates {o.tensors} parameter tensors ({how}); on the same shapes here one step took "
                f"{configured:.2f} ms as configured and {fused:.2f} ms with fused=True (both measured after the run; "
                "predicted speed-up: the optimizer phase shrunk by that ratio)")
    action = (f"torch.optim.{o.kind}(..., fused=True): one kernel updates every parameter tensor "
              "(the same algorithm, rounded in another order; on a GPU, where foreach is the default, fused is faster "
              "still)")
    return Verdict("optimizer_heavy", evidence, action, _speedup(step, step - saved))


def slow_dtype_candidates(r: WatchResult) -> list[str]:
    """The dtypes whose matrix arithmetic took SLOW_DTYPE_SHARE of the step or more: the ones whose matmul
    rate `slow_dtype` needs probed."""
    if not r.median_ms:
        return []
    return [dtype for dtype, rows in _dtype_arithmetic(r).items()
            if sum(row.ms for row in rows) >= SLOW_DTYPE_SHARE * r.median_ms]


def slow_dtype(r: WatchResult, c: Context) -> Verdict | None:
    """Matrix arithmetic (matmul, convolution) in a dtype this CPU runs far slower than float32:
    bfloat16 autocast on a CPU without native bfloat16, a model in float64 (numpy's default)."""
    if not r.median_ms or c.matmul_gflops <= 0:
        return None
    step = r.median_ms
    room = _room(r)
    scale = _window_scale(r)
    found: list[tuple[float, Verdict]] = []
    for dtype, rows in _dtype_arithmetic(r).items():
        rate = c.dtype_gflops.get(dtype)
        window_ms = sum(row.ms for row in rows)
        took = min(window_ms * scale, room)
        if rate is None or took < SLOW_DTYPE_SHARE * step or rate > SLOW_DTYPE_RATE * c.matmul_gflops:
            continue
        gain = took * (1 - rate / c.matmul_gflops)  # those ops at the float32 rate
        ops = _names(rows)
        flops = sum(row.flops or 0.0 for row in rows)
        ran = (f", {flops / (window_ms * 1e6):.1f} GFLOP/s"
               if all(row.flops for row in rows) else "")
        evidence = (f"{took:.2f} ms of the {step:.2f} ms step ({took / step:.0%}) is matrix arithmetic in {dtype} "
                    f"({ops} per step{ran}); this CPU multiplies {dtype} matrices at {rate:.1f} GFLOP/s against "
                    f"{c.matmul_gflops:.0f} GFLOP/s in float32 (both measured after the run)")
        if dtype == "float64":
            action = ("train in float32: model.float() and inputs .float(); numpy's float64 passes into "
                      "torch.from_numpy / torch.tensor unchanged, so convert the data once as it is loaded "
                      "(.astype(np.float32))")
        else:
            action = (f"train in float32 on this CPU: drop torch.autocast('cpu', dtype=torch.{dtype}) or the "
                      f".to(torch.{dtype}) of the model and inputs; {dtype} pays on CPUs with native matrix units "
                      "(AMX, AVX512-BF16/FP16) and on GPUs, not here")
        found.append((gain, Verdict("slow_dtype", evidence + " (predicted speed-up: those ops at the float32 "
                                    "rate, the rest of the step as measured)", action, _speedup(step, step - gain))))
    return max(found, key=lambda f: f[0])[1] if found else None


def evaluation_heavy(r: WatchResult, c: Context) -> Verdict | None:
    """Evaluation (model.eval() to model.train(), or the model called under torch.no_grad()) a large share of the
    run: no training happens then."""
    ev = r.evaluation
    if ev is None or ev.share < EVAL_SHARE or not r.median_ms:
        return None
    every = f", one every {ev.every_steps:.0f} steps" if ev.every_steps else ""
    told = {"model.eval()": "from model.eval() to model.train()",
            "no_grad": "the model called under torch.no_grad() or inference_mode, outside the training step"}
    evidence = (f"evaluation ({told.get(ev.by, ev.by)}) took {ev.share:.0%} of the run's time: {ev.count} "
                f"evaluations of {ev.mean_ms:.1f} ms each{every}, beside a {r.median_ms:.2f} ms training step "
                f"(predicted speed-up: evaluating {EVAL_LESS} times less often)")
    less = f"every {ev.every_steps * EVAL_LESS:.0f} steps" if ev.every_steps else "less often"
    action = (f"evaluate {less}, or on a fixed subset of the validation data; and under torch.inference_mode() with "
              "the largest batch that fits (evaluation keeps no gradients or activations), so the same data costs "
              "fewer, larger ops")
    return Verdict("evaluation_heavy", evidence, action, _speedup(1.0, 1 - ev.share * (1 - 1 / EVAL_LESS)))


def sync_bound(r: WatchResult, c: Context) -> Verdict | None:
    share = r.phases["sync"].share
    if r.device != "cuda" or share < SYNC_SHARE or r.syncs_per_step < 1 or not r.median_ms:
        return None
    step, sync = r.median_ms, _ms(r, "sync")
    top = r.sync_sites[0] if r.sync_sites else None
    where = f"; most at {top.where} ({top.op}, {top.count} times)" if top else ""
    evidence = f"{r.syncs_per_step:.1f} host reads of device data per step take {sync:.2f} ms of {step:.2f} ms ({share:.0%}){where}"
    action = ("keep per-step values on the device (e.g. write the loss into a preallocated tensor) and read "
              "them every N steps; avoid .item()/print(tensor)/float(tensor) inside the step")
    # without the sync the host runs ahead: step time becomes max(host work, device work) instead of their sum
    new = max(step - sync, _gpu_busy_ms(r) or 0.0)
    if new >= step * (1 - SYNC_GAIN):
        return None  # the reads wait for the GPU's own work: without them the step would wait elsewhere
    return Verdict("sync_bound", evidence, action, _speedup(step, new))


def h2d_bound(r: WatchResult, c: Context) -> Verdict | None:
    share = r.phases["h2d"].share
    if share < H2D_SHARE or not r.median_ms:
        return None
    step, h2d = r.median_ms, _ms(r, "h2d")
    mib = r.h2d_bytes_per_step / 2**20
    kinds = ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in r.h2d_bytes_by_kind.items())
    evidence = (f"host-to-device copies of {mib:.1f} MiB per step take {h2d:.2f} ms of {step:.2f} ms ({share:.0%})"
                + (f"; in all: {kinds}" if kinds else ""))
    action = ("keep a dataset that fits on the device there once; otherwise DataLoader(pin_memory=True) and "
              ".to(device, non_blocking=True) so copies overlap compute")
    return Verdict("h2d_bound", evidence, action, _speedup(step, step - h2d))


def launch_bound(r: WatchResult, c: Context) -> Verdict | None:
    # anomaly detection's stacks and NaN checks are its own verdict's, not the ops' fixed cost
    stacks, checks, check_ops = _anomaly(r)
    compute = _compute_ms(r) - stacks - checks
    ops = (r.ops_per_step or 0.0) - check_ops
    if r.device == "cpu":  # the ops that ran in forward, backward and the optimizer: a DataLoader's are not
        ops -= (r.edge_ops_per_step or 0.0) + (r.other_ops_per_step or 0.0)
    if ops <= 0 or compute <= 0 or not r.median_ms:
        return None
    step = r.median_ms
    per_op = compute * 1e3 / ops
    if r.device == "cuda":
        # the GPU's work against the host's time in forward+backward+optimizer: waiting on data or
        # on the disk leaves a GPU idle too, but that is not the launches' fault
        busy_ms = _gpu_busy_ms(r)
        if busy_ms is None or busy_ms / compute >= DEVICE_BUSY_LOW:
            return None
        kernels = f"{r.kernels_per_step:.0f} kernels" if r.kernels_per_step else "kernels"
        evidence = (f"{ops:.0f} ops and {kernels} per step, {per_op:.1f} us of host time each; the GPU "
                    f"works {busy_ms * 1e3:.0f} us of the {compute:.2f} ms the host spends in forward+backward+optimizer "
                    f"({busy_ms / compute:.0%}, from {_busy_source(r)}): launching work costs more than doing it")
        action = ("capture the step as a CUDA graph (trainspeed.fit does it, and measures whether it pays) or "
                  "torch.compile it (mode='reduce-overhead'); raise the batch size")
        overhead = compute - busy_ms  # kernels back to back
    else:
        arithmetic = _arithmetic_ms(r, c)
        if arithmetic is None:
            return None
        # work the FLOP formulas do not see (an LSTM layer, an embedding bag) is work all the same
        work = arithmetic + _op_work(r, c)[0]
        if work / compute >= ARITHMETIC_LOW:
            return None
        if work * 1e3 / ops >= OP_WORK_DISPATCHES * c.dispatch_us:
            return None  # big ops running slow: not their fixed cost (a loaded machine, memory-bound ops)
        which = " in forward, backward and the optimizer" if r.edge_ops_per_step is not None else ""
        evidence = (f"{ops:.0f} ops per step{which} average {per_op:.1f} us each; their arithmetic "
                    f"({r.flops_per_step / 1e6:.2f} MFLOP) needs {arithmetic * 1e3:.1f} us at this CPU's measured "
                    f"{c.matmul_gflops:.0f} GFLOP/s, {arithmetic / compute:.0%} of the {compute:.2f} ms of "
                    f"forward+backward+optimizer: per-op overhead fills the step")
        action = ("do more work per op: a larger batch, or a captured or compiled step (trainspeed.fit replays "
                  "the step's ops without Python and compiles long jobs); intra-op threads do not help ops this small")
        if r.compiled:
            action = ("the model is compiled already: what is left per op runs around its graph - the optimizer's "
                      "updates (fused=True, or the optimizer step compiled too), the loss, the graph's own guards and "
                      "calls; a larger batch, or trainspeed.fit, which captures the whole step with its optimizer; "
                      "intra-op threads do not help ops this small")
        # what is left if each op cost only its bare dispatch plus its arithmetic
        overhead = compute - (work + ops * c.dispatch_us / 1e3)
    if overhead < LAUNCH_GAIN * step:
        return None  # ops already as cheap as a bare dispatch each: nothing per op left to save
    # upper bound: the step without its per-op overhead
    return Verdict("launch_bound", evidence + " (predicted speed-up is an upper bound)", action,
                   _speedup(step, step - overhead))


def small_batch(r: WatchResult, c: Context, launch: Verdict | None) -> Verdict | None:
    if launch is None or r.batch_size is None or r.batch_size > SMALL_BATCH:
        return None
    micro = round(r.micro_batches_per_step or 1)
    if micro >= 2:
        return _micro_batches(r, c, micro)
    calls = round(r.model_calls_per_step or 1)
    evidence = (f"batch of {r.batch_size} on a step dominated by per-op overhead: a step costs about the same "
                "whatever the batch, so samples per second grow with it")
    action = (f"raise the batch size (try {r.batch_size * 4}) and scale the learning rate; `trainspeed memory` gives "
              "the largest batch that fits")
    if calls >= 2 and r.batch_size == 1:
        if (r.model_calls_after_read or 0) >= (calls - 1) / 2:
            after = min(r.model_calls_after_read or 0, calls - 1)
            evidence = (f"the model is called {calls} times per step on a batch of 1, and before most calls the host "
                        f"read a tensor's value ({after:.0f} of them): each input waits for the last "
                        "output (an agent acting on the action it sampled, a decoder fed the token it picked), so "
                        "these calls cannot be stacked after the fact, and every one pays the model's per-op overhead "
                        "for one sample")
            action = ("act for several environments (or sequences) at once: step N of them together and call the "
                      "model once per step on all N (a vectorised environment); choose actions under torch.no_grad() "
                      "and keep the observations, then recompute the rollout's log-probabilities in one batched "
                      "forward when updating")
            return Verdict("small_batch", evidence, action, None)
        if (r.model_calls_chained or 0) < (calls - 1) / 2:
            return _one_at_a_time(r, c, calls)
        evidence = (f"the model is called {calls} times per step on a batch of 1, each call given an earlier one's "
                    "output (a recurrent cell stepped by hand over a sequence): every call pays the per-op overhead "
                    "of the whole cell for one sample")
        action = ("step several sequences at once (a batch of them, padded or packed with "
                  "torch.nn.utils.rnn.pack_sequence), or run the whole sequence through nn.RNN, nn.GRU or nn.LSTM "
                  "in one call")
    return Verdict("small_batch", evidence, action, None)


def _one_at_a_time(r: WatchResult, c: Context, k: int) -> Verdict | None:
    """small_batch where the model is called k times per step on one sample each, the calls independent of
    each other (a list comprehension over the batch's rows): the same model as `_micro_batches`, one
    forward over the k samples in place of k."""
    return _merged_passes(r, c, k, (
        f"the model is called {k} times per step on a batch of 1 (samples fed one at a time, each call "
        "independent of the others): {passes:.2f} ms of forward+backward per step, most of it per-op overhead "
        f"that each call pays again (predicted speed-up: forward, backward and the {{around:.2f}} ms of torch ops "
        f"around them, the slicing and concatenating, run once per step instead of {k} times, the arithmetic as "
        "before)"),
        f"stack the {k} samples into one tensor and call the model once (model(x) on the batch of {k}, not "
        f"model(x[i:i+1]) per row); its output rows are the per-sample outputs, in the same order")


def _micro_batches(r: WatchResult, c: Context, k: int) -> Verdict | None:
    """small_batch where a step accumulates gradients over k small micro-batches: each forward and backward
    pays the per-op overhead of the whole model for a few samples. One pass over all k of them runs the
    same ops once."""
    batch = k * (r.batch_size or 0)
    return _merged_passes(r, c, k, (
        f"{k} forward and backward passes of a batch of {r.batch_size} per optimizer step (gradients "
        "accumulated over micro-batches): {passes:.2f} ms of forward+backward per step, most of it per-op "
        "overhead that each pass pays again (predicted speed-up: forward, backward and the {around:.2f} ms of "
        f"torch ops around them run once per step instead of {k} times, the arithmetic as before)"),
        f"feed the step's {batch} samples as one batch of {batch}: its mean loss has the gradient that "
        f"accumulating `loss / {k}` over the micro-batches gives; accumulate only micro-batches too big for "
        "memory (`trainspeed memory` gives the largest batch that fits)")


def _merged_passes(r: WatchResult, c: Context, k: int, evidence: str, action: str) -> Verdict | None:
    """small_batch's prediction where a step runs k small passes that could be one. Model: forward and
    backward, less their work (arithmetic and heavy ops on a CPU, the GPU's busy time on CUDA), and the ops
    outside every phase (the loss scaled by 1/k, a slice of the batch) each run once a step instead of k
    times; the optimizer and the script's own Python stay. `evidence` is formatted with `passes` and
    `around`, the milliseconds of forward+backward and of those ops."""
    step = r.median_ms
    if not step or _compute_ms(r) <= 0:
        return None
    passes = _compute_part_ms(r, "forward", "backward")
    if r.device == "cuda":
        work = _gpu_busy_ms(r) or 0.0
    else:
        work = (_arithmetic_ms(r, c) or 0.0) + _op_work(r, c)[0]
    around = min(_ms(r, "other"), (r.other_op_ms_per_step or 0.0) * _window_scale(r))
    saved = (max(0.0, passes - work) + around) * (1 - 1 / k)
    return Verdict("small_batch", evidence.format(passes=passes, around=around), action, _speedup(step, step - saved))


def _cores(physical_cores: int, usable: int | None) -> int:
    """The cores this process's threads can have: the machine's, or fewer where its affinity or a cgroup quota
    (a container's --cpus, a taskset) holds it to fewer CPUs."""
    return min(physical_cores, usable or physical_cores)


def threads_candidate(r: WatchResult, physical_cores: int, usable: int | None = None) -> int | None:
    """The intra-op threads to advise where the run gave torch more threads than cores, or fewer, and had no
    DataLoader workers (then torch's threads alone use the cores, and a matmul at each count tells what the
    advice buys; with workers, fewer threads may leave them their cores) and, for fewer, no other process kept
    cores busy and the process may use more CPUs (`usable`: hardware.cpu.usable_cores); None otherwise."""
    if r.device != "cpu" or any(ld.num_workers for ld in r.loaders):
        return None
    target = max(1, _cores(physical_cores, usable))
    if r.torch_threads > target or (r.torch_threads < target and (r.others_cpu_cores or 0.0) < OTHERS_BUSY):
        return target
    return None


def matmul_side(r: WatchResult) -> int:
    """The side of a square matmul as big as the run's dearest matrix op's average call (from the profiler
    window's FLOPs), for probes that should multiply matrices of the run's size; 256 without one."""
    rows = [row for row in r.op_times or [] if row.arithmetic and row.flops and row.calls]
    if not rows:
        return 256
    row = max(rows, key=lambda row: row.ms)
    return int(min(2048, max(64, round((row.flops / row.calls / 2) ** (1 / 3)))))


def thread_oversubscription(r: WatchResult, c: Context) -> Verdict | None:
    workers = sum(ld.num_workers for ld in r.loaders)
    busy_threads = r.torch_threads + workers
    cores = _cores(c.physical_cores, c.usable_cores)
    if r.torch_threads > cores or busy_threads > min(c.logical_threads, c.usable_cores or c.logical_threads):
        held = (f" ({c.usable_cores} of them this process may use: its affinity or cgroup quota)"
                if cores < c.physical_cores else "")
        evidence = (f"torch uses {r.torch_threads} intra-op threads and the DataLoaders {workers} worker processes "
                    f"on {c.physical_cores} cores / {c.logical_threads} hardware threads{held}")
        keep = max(1, cores - workers)
        action = _set_threads(keep, "")
        predicted = None
        if c.thread_gflops is not None and threads_candidate(r, c.physical_cores, c.usable_cores) == keep:
            more, gain = _thread_gain(r, c, keep)
            evidence += more
            predicted = gain
        return Verdict("thread_oversubscription", evidence, action, predicted)
    return _machine_busy(r, c, workers)


def _thread_gain(r: WatchResult, c: Context, keep: int, tail: bool = True) -> tuple[str, float | None]:
    """What `keep` threads buy, from `Context.thread_gflops`. Model: the window's matrix ops and the other
    ops' work beyond their fixed cost (the ops torch runs in parallel) speed up by the probe's ratio; and, with
    `tail` (more threads than cores), the run's tail goes (a parallel op that waits for a thread without a core
    is the cause oversubscription adds), so the mean step falls to the median less that saving; without it,
    the mean step less that saving."""
    assert c.thread_gflops is not None
    now, fixed = c.thread_gflops
    text = (f"; a matmul of the run's size ran at {now:.0f} GFLOP/s with {r.torch_threads} "
            f"thread{'s' if r.torch_threads > 1 else ''} and {fixed:.0f} with {keep} (measured in turn after the run)")
    if fixed <= now or not r.median_ms or not r.op_times:
        return text, None
    parallel = sum(row.ms for row in r.op_times if row.arithmetic) * _window_scale(r) + _op_work(r, c)[0]
    saved = parallel * (1 - now / fixed)
    text += f" (predicted speed-up: {parallel:.2f} ms of matrix and other heavy ops per step at that ratio"
    if tail:
        text += f", and the mean step, {_run_step_ms(r):.2f} ms, down to the median, {r.median_ms:.2f} ms)"
        return text, _speedup(_run_step_ms(r), r.median_ms - saved)
    return text + ")", _speedup(_run_step_ms(r), _run_step_ms(r) - saved)


def threads_unused(r: WatchResult, c: Context) -> Verdict | None:
    """torch given fewer intra-op threads than the machine has cores (torch.set_num_threads(1), OMP_NUM_THREADS=1
    set by a launcher or a library) on a step whose matrix ops would run faster on all of them: measured, a
    matmul of the run's size at both counts (`Context.thread_gflops`). Not where DataLoader workers or other
    processes use the cores (`threads_candidate`)."""
    keep = threads_candidate(r, c.physical_cores, c.usable_cores)
    if keep is None or r.torch_threads >= keep or c.thread_gflops is None:
        return None
    more, gain = _thread_gain(r, c, keep, tail=False)
    if gain is None or gain < THREADS_GAIN:
        return None
    evidence = (f"torch uses {r.torch_threads} intra-op thread{'s' if r.torch_threads > 1 else ''} on "
                f"{c.physical_cores} cores" + more)
    action = (f"torch.set_num_threads({keep}) (or OMP_NUM_THREADS={keep}; a launcher or a library may have set it "
              "lower); `trainspeed sweep threads` measures the best value")
    return Verdict("threads_unused", evidence, action, gain)


def _set_threads(keep: int, when: str) -> str:
    return (f"torch.set_num_threads({keep}) (or OMP_NUM_THREADS={keep}){when}; `trainspeed sweep threads` measures "
            "the best value")


def _machine_busy(r: WatchResult, c: Context, workers: int) -> Verdict | None:
    """Other processes held the cores torch's threads count on (`machine_load`): an intra-op parallel region
    then waits a scheduler slice for its thread that lost its core, now and then, so the run's mean step
    outgrows its median."""
    others = r.others_cpu_cores
    if others is None or others < OTHERS_BUSY or r.torch_threads < 2 or \
            r.torch_threads + workers + others <= c.logical_threads:
        return None
    keep = max(1, math.floor(c.logical_threads - others - workers))
    if keep >= r.torch_threads:
        return None
    # the measured steps' exact mean (the clock's sums), else the step sample's
    mean = r.mean_ms or (sum(r.step_times_ms) / len(r.step_times_ms) if r.step_times_ms else None)
    tail = (f"; the mean step is {mean:.2f} ms against a median of {r.median_ms:.2f} ms (p90 {r.p90_ms:.2f} ms)"
            if mean is not None and r.median_ms and r.p90_ms else "")
    evidence = (f"other processes kept {others:.1f} of this machine's {c.logical_threads} hardware threads busy while "
                f"the steps were measured, beside torch's {r.torch_threads} intra-op threads and {workers} DataLoader "
                f"workers: a parallel op waits for each of its threads to get a core{tail}")
    action = _set_threads(keep, " while the machine is shared, or stop the other processes")
    predicted = None
    if mean is not None and r.median_ms and mean > r.median_ms:
        # upper bound: every step as fast as the median one, the whole tail being waits for a core
        evidence += " (predicted speed-up is an upper bound: the mean step falling to the median)"
        predicted = _speedup(mean, r.median_ms)
    return Verdict("thread_oversubscription", evidence, action, predicted)


def memory_pressure(r: WatchResult, c: Context) -> Verdict | None:
    if not r.peak_memory_bytes or not r.memory_capacity_bytes:
        return None
    share = r.peak_memory_bytes / r.memory_capacity_bytes
    if share < MEMORY_SHARE:
        return None
    where = "GPU memory" if r.device == "cuda" else "RAM"
    evidence = (f"peak {r.peak_memory_bytes / 2**30:.1f} GiB of {r.memory_capacity_bytes / 2**30:.1f} GiB {where} "
                f"({share:.0%}): the caching allocator has no room left to avoid fragmentation or retries")
    fit = f"the largest batch that fits with a 10% margin is {c.largest_batch}" if c.largest_batch else \
        "`trainspeed memory` gives the largest batch that fits"
    action = f"{fit}; or bf16 autocast, activation checkpointing, or gradient accumulation over smaller batches"
    return Verdict("memory_pressure", evidence, action, None)


def cpu_faster(r: WatchResult, c: Context, launch: Verdict | None) -> Verdict | None:
    if r.device != "cuda" or launch is None or not r.kernels_per_step or not r.median_ms or c.cuda_op_us is None:
        return None
    # the same step on the CPU: the host work stays (Python, autograd, dispatch), each kernel launch
    # becomes a CPU op's dispatch, the waits for the GPU (reads) and the copies to it go, and the
    # arithmetic runs at the CPU's measured rate
    step = r.median_ms
    per_launch = max(0.0, c.cuda_op_us - c.dispatch_us)
    launches_ms = r.kernels_per_step * per_launch / 1e3
    cpu_step = step - _ms(r, "sync") - _ms(r, "h2d") - launches_ms + (_arithmetic_ms(r, c) or 0.0)
    if cpu_step >= step:
        return None
    evidence = (f"predicted CPU step {cpu_step:.2f} ms against {step:.2f} ms measured on the GPU: the GPU step "
                f"less its reads and copies ({_ms(r, 'sync') + _ms(r, 'h2d'):.2f} ms) and {r.kernels_per_step:.0f} "
                f"launches at {per_launch:.1f} us each (a tiny CUDA op measured {c.cuda_op_us:.1f} us "
                f"here, a CPU op {c.dispatch_us:.1f} us), plus the arithmetic at this CPU's measured "
                f"{c.matmul_gflops:.0f} GFLOP/s")
    action = "for a model this small, train on the CPU (or make the GPU step bigger: batch, CUDA graphs)"
    return Verdict("cpu_faster", evidence, action, _speedup(step, cpu_step))


def compute_bound(r: WatchResult, c: Context) -> Verdict | None:
    compute = _compute_ms(r)
    if not r.median_ms:
        return None
    if r.device == "cuda":
        # the host may wait anywhere (a read, the allocator): what counts is whether the GPU is working
        busy_ms = _gpu_busy_ms(r)
        if busy_ms is None or busy_ms / r.median_ms < DEVICE_BUSY_HIGH:
            return None
        evidence = (f"the GPU works {busy_ms:.2f} ms of the {r.median_ms:.2f} ms step ({busy_ms / r.median_ms:.0%}, "
                    f"from {_busy_source(r)})")
    else:
        if compute / r.median_ms < 0.6:
            return None
        arithmetic = _arithmetic_ms(r, c)
        if arithmetic is None:
            return None
        work, heavy = _op_work(r, c)
        done = arithmetic + work
        if done / compute < ARITHMETIC_HIGH:
            return None
        parts = []
        if arithmetic >= 0.05 * compute:
            parts.append(f"their {r.flops_per_step / 1e9:.2f} GFLOP need {arithmetic:.2f} ms at this CPU's measured "
                         f"{c.matmul_gflops:.0f} GFLOP/s")
        if work >= 0.05 * compute:
            parts.append(f"{work:.2f} ms goes to work in ops torch has no FLOP formula for ({_names(heavy)} per step)")
        whole = (f"{done / compute:.0%} of {compute:.2f} ms" if done <= compute else
                 f"more than their {compute:.2f} ms: the run multiplied faster than the probe after it")
        evidence = (f"forward+backward+optimizer are {compute / r.median_ms:.0%} of the step; " + "; ".join(parts)
                    + f" ({whole}): real work")
    action = "healthy; the next levers are bf16 autocast where the hardware has it, torch.compile, or a larger batch"
    return Verdict("compute_bound", evidence, action, None)


def comm_bound(r: WatchResult, c: Context) -> Verdict | None:
    d = r.distributed
    if d is None or d.world_size < 2 or not r.median_ms or d.comm_ms is None:
        return None
    step = r.median_ms
    exposed = r.phases["comm"].share * step
    comm = d.comm_ms
    timed = [s for s in d.ranks if s.exposed_ms is not None and s.comm_ms is not None]
    if len(timed) > 1:  # the least-waiting rank saw the transfer alone; the others also waited for a slower rank
        least = min(timed, key=lambda s: s.exposed_ms or 0.0)
        exposed, comm = min(exposed, least.exposed_ms or 0.0), least.comm_ms
    share = exposed / step
    if share < COMM_SHARE:
        return None
    evidence = (f"the gradient all-reduce ({d.grad_bytes / 2**20:.2f} MiB over {d.world_size} ranks, {d.backend}) takes "
                f"{comm:.2f} ms per step and {exposed:.2f} ms of the {step:.2f} ms step ({share:.0%}) wait for it "
                f"after backward; {max(0.0, 1 - exposed / comm) if comm else 0.0:.0%} of it was hidden behind backward")
    k = NO_SYNC_MICRO_BATCHES
    action = (f"hide or thin out the all-reduce: accumulate gradients over {k} micro-batches with DDP's no_sync() on all "
              "but the last (one all-reduce per optimizer step; the prediction assumes this), or a larger batch per rank "
              "(more compute per byte sent), or a smaller bucket_cap_mb so reductions start earlier in backward")
    return Verdict("comm_bound", evidence, action, _speedup(step, step - exposed * (1 - 1 / k)))


def straggler(r: WatchResult, c: Context) -> Verdict | None:
    """One rank busier than the others: under DDP every rank then waits for it in each all-reduce."""
    d = r.distributed
    if d is None or len(d.ranks) < 2 or not r.median_ms:
        return None
    busy = {s.rank: (s.median_ms or 0.0) - (s.exposed_ms or 0.0) for s in d.ranks}
    slow = max(busy, key=busy.__getitem__)
    others = sorted(v for k, v in busy.items() if k != slow)
    typical = others[len(others) // 2] if len(others) % 2 else (others[len(others) // 2 - 1] + others[len(others) // 2]) / 2
    excess = busy[slow] - typical
    if typical <= 0 or excess < STRAGGLER_EXCESS * typical or excess < STRAGGLER_MIN_MS:
        return None
    by_rank = {s.rank: s for s in d.ranks}
    slow_stat = by_rank[slow]
    rest = [s for s in d.ranks if s.rank != slow]

    def others_ms(phase: str) -> float:
        values = sorted(s.phases_ms.get(phase, 0.0) for s in rest)
        return values[len(values) // 2]

    gaps = {p: ms - others_ms(p) for p, ms in slow_stat.phases_ms.items() if p != "comm"}
    worst = max(gaps, key=gaps.__getitem__)
    waits = ", ".join(f"rank {s.rank} {s.exposed_ms:.2f} ms" for s in rest if s.exposed_ms is not None)
    evidence = (f"rank {slow} ({slow_stat.host}) is busy {busy[slow]:.2f} ms per step against {typical:.2f} ms on the "
                f"other ranks (+{excess / typical:.0%}); its {worst} phase takes {gaps[worst]:.2f} ms more"
                + (f"; the others wait for it in the all-reduce ({waits})" if waits else ""))
    action = (f"make rank {slow}'s {worst} as fast as the others': work done on that rank only (logging, evaluation, "
              "checkpoints on rank 0 belong outside the step or in a background thread), an uneven data shard or "
              "DataLoader, or a slower or shared device")
    return Verdict("straggler", evidence, action, _speedup(r.median_ms, r.median_ms - excess))


def diagnose(r: WatchResult, c: Context) -> list[Verdict]:
    """All verdicts that apply, most important (largest predicted gain) first; healthy last."""
    launch = launch_bound(r, c)
    host = host_code_heavy(r, c)
    found = [v for v in (
        input_bound(r, c), evaluation_heavy(r, c), checkpoint_heavy(r, c), logging_heavy(r, c), host, outside_work(r, c, host), sync_bound(r, c),
        h2d_bound(r, c), slow_dtype(r, c), anomaly_detection(r, c), optimizer_heavy(r, c), optimizer_rebuilt(r, c),
        launch, small_batch(r, c, launch), cpu_faster(r, c, launch), thread_oversubscription(r, c),
        threads_unused(r, c),
        memory_pressure(r, c), comm_bound(r, c), straggler(r, c),
    ) if v is not None]
    found.sort(key=lambda v: v.predicted_speedup or 1.0, reverse=True)
    if not any(v.predicted_speedup and v.predicted_speedup >= 1.2 for v in found):
        healthy = compute_bound(r, c)
        if healthy is not None:
            found.append(healthy)
    return found
