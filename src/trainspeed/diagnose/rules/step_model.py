"""The step-time model the rule families share: a phase's time in the median step, the run's mean step, what a
step's compute and arithmetic take, the predicted speed-up of a shorter step (as the run's, Amdahl), and the cap on
predictions. Each rule's prediction is one of these applied to the run's own figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainspeed.diagnose.rules.context import Context
from trainspeed.hardware.gpu import GpuPeak
from trainspeed.watch.phases import EDGE_PHASES
from trainspeed.watch.result import OpTime, WatchResult

MAX_PREDICTED = 10.0  # no model here is trusted beyond a 10x prediction
OP_FIXED_DISPATCHES = 30.0
"""The most one call of an op costs the host before it does any work, in bare dispatches. In the CPU's profiler window
(its steps come soon after the warm-up, under dispatch modes) the seed's tiny ops take up to about a dozen dispatches a
call (BENCHMARKS.md, "Where the code's constants come from"). A call longer than this does work the FLOP formulas do not
count (an LSTM layer as one mkldnn op, an embedding bag's backward, an optimizer's update of a large tensor): its time
beyond this is work, not per-op overhead (`op_work`). A slow window leaves a tiny op a few microseconds over, which
weighs nothing beside a step's compute phases."""
ANOMALY_OPS = ("aten.isnan", "aten._is_any_true")  # backward's check of every gradient for NaN, in anomaly mode
OP_WORK_DISPATCHES = 2.0
"""On a CPU, ops whose arithmetic averages this many bare dispatches or more are not small: launch_bound leaves them
alone, and what a step without per-op overhead keeps of them (`sized_arithmetic`) is their time in the profiler window
where that is more than their FLOPs at the probe's rate. For launch_bound: for their arithmetic to fall under
ARITHMETIC_LOW of the compute phases, each op's fixed cost (dispatch, autograd's node, the module's Python) would have
to pass 6 dispatches, well above what the seed's tiny ops measure (BENCHMARKS.md, "Where the code's constants come
from"), so ops carrying just over two dispatches of arithmetic under the largest of those fixed costs are the true
positives this gives up. The test uses counted FLOPs and the two probes taken together, not the step's time: a machine
slower during the run than at the probes cannot make big ops look like per-op overhead."""


@dataclass(frozen=True)
class FlopRate:
    """The step's counted FLOPs over its median time, against the GPU's peak: model-FLOP utilisation as
    nanoGPT's `estimate_mfu` has it (achieved over promised)."""

    tflops: float
    """Achieved: FLOPs per step (torch.profiler's formulas) over the median step."""
    peak: GpuPeak

    @property
    def share(self) -> float:
        return self.tflops / self.peak.tflops


def phase_ms(r: WatchResult, phase: str) -> float:
    return r.phases[phase].host_ms


def run_step_ms(r: WatchResult) -> float:
    """Milliseconds per step over the whole run (the mean), where shares of the run's time turn into time."""
    return r.steps.mean_ms or r.steps.median_ms or 0.0


def workers_cores(r: WatchResult) -> float | None:
    """The cores the DataLoader worker processes kept busy while the steps were measured (their CPU time over the
    measured steps' time, `machine.loader_workers`, at the run's mean step): the share of a step's time a step's
    batches cost them; None where unmeasured."""
    spent, step = r.machine.loader_workers, run_step_ms(r)
    if spent is None or not r.steps.measured or not step:
        return None
    return spent.cpu_ms_per_batch * spent.batches / (r.steps.measured * step)


CLAIMED_PHASES = ("data", "checkpoint")
"""Phases whose bursts beyond the median step their own verdicts claim (input_bound, checkpoint_heavy)."""


def steady_mean_ms(r: WatchResult) -> tuple[float, float, list[str]] | None:
    """(the mean step, the mean step less what other verdicts claim of its tail over the median, the parts taken
    out as words): the evaluations inside the measured steps (evaluation_heavy), and the data waits and saves
    beyond the median step's (input_bound, checkpoint_heavy). What is left of the tail is the steps' own spread
    (a shared machine's waits for a core, the allocator, the system). The mean is the clock's exact sums', else
    the step sample's; None without a mean and a median."""
    mean = r.steps.mean_ms or (sum(r.steps.times_ms) / len(r.steps.times_ms) if r.steps.times_ms else None)
    if not mean or not r.steps.median_ms:
        return None
    parts: list[tuple[str, float]] = []
    if r.evaluation is not None and r.evaluation.step_ms > 0:
        parts.append(("the evaluations", r.evaluation.step_ms))
    for phase in CLAIMED_PHASES:
        burst = r.phases[phase].share * mean - phase_ms(r, phase)
        if burst > 0.005 * mean:
            parts.append(({"data": "the data waits", "checkpoint": "the saves"}[phase] + " beyond the median step's",
                          burst))
    taken = sum(ms for _, ms in parts)
    return mean, mean - taken, [f"{name} {ms:.2f} ms" for name, ms in parts]


def other_share(r: WatchResult) -> float:
    """The run's share outside every named phase, less the evaluations that ran inside the measured steps (between
    two steps, the clock stands in "other" then): the training steps' own, which the verdicts on that time judge.
    Their stack samples leave the evaluations out as well (`EvaluationTracker.evaluating`)."""
    share = r.phases["other"].share
    mean = run_step_ms(r)
    if r.evaluation is None or not r.evaluation.step_ms or not mean:
        return share
    return max(0.0, share - r.evaluation.step_ms / mean)


def predicted_label(gain: float) -> str:
    """How a report words a predicted speed-up: the models' cap shown as a floor, not as the figure."""
    if gain >= MAX_PREDICTED:
        return f"predicted at least {MAX_PREDICTED:.0f}x (no prediction goes past {MAX_PREDICTED:.0f}x)"
    return f"predicted {gain:.2f}x"


def speedup(step: float, new_step: float) -> float:
    return round(min(MAX_PREDICTED, step / max(new_step, step / MAX_PREDICTED)), 2)


def step_speedup(r: WatchResult, step: float, new_step: float) -> float:
    """A training step's predicted speed-up (from `step`, the median step, to `new_step` ms) as the run's: what the
    run spends beyond its median steps - evaluations, an epoch's preprocessing, saves, the mean step over the median
    - which a change to the training step leaves as it is, held constant (Amdahl). Every prediction is then of one
    thing, the run's time, which the verdicts are ranked by and a user measures."""
    on_step = speedup(step, new_step)
    held = r.evaluation.share if r.evaluation is not None else 0.0
    if r.steps.mean_ms and r.steps.median_ms and r.steps.mean_ms > r.steps.median_ms:
        held = max(held, 1 - r.steps.median_ms / r.steps.mean_ms)
    if not 0 < held < 1:
        return on_step
    return round(1 / (held + (1 - held) / on_step), 2)

COMPUTE = ("forward", "backward", "optimizer")


def room_ms(r: WatchResult) -> float:
    """Milliseconds of the median step beside its edge phases (data, h2d, sync, checkpoint, comm: timed on
    every step): the room the detailed steps' phases and the profiler window's ops must fit in."""
    return (r.steps.median_ms or 0.0) - sum(phase_ms(r, p) for p in EDGE_PHASES)


def compute_ms(r: WatchResult) -> float:
    """Forward+backward+optimizer of the median step. Their medians come from the detailed steps, which also carry the
    per-call hooks (a module call, backward, the optimizer step each pass through the watcher): on a tiny step those
    medians add up to more than the median step itself (BENCHMARKS.md, "Where the code's constants come from"). Where
    the detailed steps' forward, backward, optimizer and other outgrow the room the median step leaves beside its edge
    phases (data, h2d, sync, checkpoint, comm: timed on every step), they are scaled down to it."""
    compute = sum(phase_ms(r, p) for p in COMPUTE)
    detailed = compute + phase_ms(r, "other")
    room = room_ms(r)
    if r.steps.median_ms and detailed > room > 0:
        return compute * room / detailed
    return compute


def compute_part_ms(r: WatchResult, *phases: str) -> float:
    """Some of forward, backward and optimizer, in the median step: scaled as `compute_ms` scales them all."""
    compute = sum(phase_ms(r, p) for p in COMPUTE)
    return sum(phase_ms(r, p) for p in phases) * compute_ms(r) / compute if compute > 0 else 0.0


def matmul_rate(dtype: str | None, c: Context) -> float:
    """GFLOP/s of a matrix product in `dtype` on this CPU: its own probe where one ran (`Context.dtype_gflops`),
    else float32's."""
    return (c.dtype_gflops.get(dtype) if dtype else None) or c.matmul_gflops


def own_rate_rows(r: WatchResult, c: Context) -> list[OpTime]:
    """The profiler window's matrix products in a dtype with a probe of its own (`Context.dtype_gflops`)."""
    return [row for row in r.window.op_times or () if row.arithmetic and row.flops and row.dtype in c.dtype_gflops]


def arithmetic_ms(r: WatchResult, c: Context) -> float | None:
    """Time the step's counted FLOPs need at the measured matmul rates (CPU): the profiler window's matrix products
    in a dtype with a probe of its own at that dtype's rate (bfloat16 under autocast on a CPU with native bfloat16
    runs near twice float32's), the rest at float32's."""
    if r.window.flops_per_step is None or c.matmul_gflops <= 0:
        return None
    left, ms = r.window.flops_per_step, 0.0
    for row in own_rate_rows(r, c):
        part = min(row.flops or 0.0, left)
        ms += part / (matmul_rate(row.dtype, c) * 1e9) * 1e3
        left -= part
    return ms + left / (c.matmul_gflops * 1e9) * 1e3


def sized_arithmetic(r: WatchResult, c: Context) -> tuple[float, float, float]:
    """CPU: (ms in the window, calls, ms at the measured matmul rate) per step of the profiler window's ops whose
    arithmetic per call is at least OP_WORK_DISPATCHES bare dispatches at that rate. A small matrix product does not
    reach the probe's rate (BENCHMARKS.md, "Where the code's constants come from"), and a captured step runs the same
    product on the same shapes: its time in the window, not its FLOPs at the probe's rate, is what a step without per-op
    overhead keeps. Ops with less arithmetic keep the FLOP model: their time in the window is mostly fixed cost (the
    seed's 120 x 4 addmm took 43 us a call), which a captured step run on fewer threads does not pay."""
    if not r.window.op_times or c.matmul_gflops <= 0:
        return 0.0, 0.0, 0.0

    def rate(row: OpTime) -> float:  # FLOP per ms, at the row's dtype's measured rate
        return matmul_rate(row.dtype, c) * 1e9 / 1e3

    rows = [row for row in r.window.op_times if row.arithmetic and row.flops and row.calls
            and row.flops / row.calls / rate(row) * 1e3 >= OP_WORK_DISPATCHES * c.dispatch_us]
    at_peak = sum((row.flops or 0.0) / rate(row) for row in rows)
    return sum(row.ms for row in rows) * window_scale(r), sum(row.calls for row in rows), at_peak


def rates_text(r: WatchResult, c: Context) -> str:
    """The rates `arithmetic_ms` counted the FLOPs at, in words."""
    others = sorted({row.dtype for row in own_rate_rows(r, c) if row.dtype})
    if not others:
        return f"this CPU's measured {c.matmul_gflops:.0f} GFLOP/s"
    return (f"this CPU's measured rates ({', '.join(f'{matmul_rate(d, c):.0f} GFLOP/s in {d}' for d in others)}, "
            f"{c.matmul_gflops:.0f} in float32)")


LOW_PRECISION = ("bfloat16", "float16")


def low_precision(r: WatchResult) -> str | None:
    """The half-width dtype the run computes in already: torch.autocast's, else that of most of the profiler window's
    counted FLOPs (a model cast to bfloat16)."""
    if r.model.autocast in LOW_PRECISION:
        return r.model.autocast
    flops: dict[str, float] = {}
    for row in r.window.op_times or ():
        if row.arithmetic and row.flops and row.dtype:
            flops[row.dtype] = flops.get(row.dtype, 0.0) + row.flops
    top = max(flops, key=lambda d: flops[d], default=None)
    return top if top in LOW_PRECISION and flops[top] >= 0.5 * sum(flops.values()) else None


def next_lever_names(r: WatchResult) -> list[str]:
    """The levers a healthy step can try next, less what the run does already."""
    return ([] if low_precision(r) else ["bf16 autocast where the hardware has it"]) + \
        ([] if r.window.compiled else ["torch.compile"]) + ["a larger batch"]


def next_levers(r: WatchResult) -> str:
    """What a healthy step can try next, less what the run does already."""
    low = low_precision(r)
    levers = next_lever_names(r)
    done = ([f"computes in {low}{' (autocast)' if r.model.autocast == low else ''}"] if low else []) + \
        (["is compiled"] if r.window.compiled else [])
    already = f"; the run {' and '.join(done)} already" if done else ""
    said = levers[0] if len(levers) == 1 else (", ".join(levers[:-1]) + ("," if len(levers) > 2 else "")
                                               + " or " + levers[-1])
    return f"healthy{already}; the next {'levers are' if len(levers) > 1 else 'lever is'} {said}"


def window_scale(r: WatchResult) -> float:
    """The CPU profiler window's clock against the median step: where the window's ops all together
    outgrow the room the median step leaves beside its edge phases, the window ran slower than the
    median step (soon after the warm-up), and its times are scaled down to that room."""
    if not r.window.op_ms_per_step or not r.steps.median_ms:
        return 1.0
    return max(0.0, min(1.0, room_ms(r) / r.window.op_ms_per_step))


def op_work(r: WatchResult, c: Context) -> tuple[float, list[OpTime]]:
    """CPU: milliseconds per step the window's ops without a FLOP formula spent beyond a fixed cost per call
    (OP_FIXED_DISPATCHES), on the median step's clock; and those ops, most of that work first."""
    if r.model.device != "cpu" or not r.window.op_times:
        return 0.0, []
    fixed = OP_FIXED_DISPATCHES * c.dispatch_us / 1e3
    heavy = sorted(((row.ms - row.calls * fixed, row) for row in r.window.op_times
                    if not row.arithmetic and row.ms > row.calls * fixed), key=lambda w: w[0], reverse=True)
    return sum(w for w, _ in heavy) * window_scale(r), [row for _, row in heavy]


def op_names(rows: list[OpTime], most: int = 3) -> str:
    return ", ".join(f"{row.op} x{row.calls:.0f}" for row in rows[:most])


def gpu_busy_ms(r: WatchResult) -> float | None:
    """Milliseconds per step during which the GPU ran work: its kernels' own times from the profiler
    window, else NVML's utilisation (the share of time some kernel ran) times the step. Not the
    phases' device_ms: an event pair spans the GPU's idle gaps between launches as well."""
    if r.model.device != "cuda" or not r.steps.median_ms:
        return None
    if r.window.gpu_busy_ms_per_step is not None:
        return r.window.gpu_busy_ms_per_step
    if r.gpu_util.available and r.gpu_util.mean is not None:
        return r.gpu_util.mean / 100 * r.steps.median_ms
    return None


def flop_rate(r: WatchResult, c: Context) -> FlopRate | None:
    """CUDA: the step's achieved TFLOP/s against the GPU's peak (None without counted FLOPs or a known peak)."""
    if r.model.device != "cuda" or not r.steps.median_ms or not r.window.flops_per_step or c.gpu_peak is None:
        return None
    return FlopRate(r.window.flops_per_step / (r.steps.median_ms * 1e-3) / 1e12, c.gpu_peak)


def busy_source(r: WatchResult) -> str:
    return "its kernels' own times" if r.window.gpu_busy_ms_per_step is not None else "NVML utilisation"


def burst_note(r: WatchResult, phase: str) -> str:
    """How a phase's time is spread: a median step far under its share means waits in bursts. The
    share of the run's time is said once, and the median step's part of it is its own percentage."""
    typical = phase_ms(r, phase)
    share = r.phases[phase].share
    median = r.steps.median_ms or 0.0
    if typical >= 0.5 * share * median:
        return f"{typical:.2f} ms of a {median:.2f} ms step ({share:.0%} of the run's time)"
    return (f"{share:.0%} of the run's time, in bursts: the median step spends {typical:.2f} ms of "
            f"{median:.2f} ms there ({typical / median:.0%})")


def anomaly_costs(r: WatchResult) -> tuple[float, float, float]:
    """Autograd's anomaly detection, per step: milliseconds storing formatted stacks (timed on the detailed
    steps), milliseconds of its NaN checks in backward and how many ops they are (the CPU profiler window's,
    on the median step's clock). Zeros when it was off."""
    if not r.steps.anomaly_ms_per_step:
        return 0.0, 0.0, 0.0
    rows = [row for row in r.window.op_times or () if row.op in ANOMALY_OPS]
    return (r.steps.anomaly_ms_per_step, sum(row.ms for row in rows) * window_scale(r),
            sum(row.calls for row in rows))
