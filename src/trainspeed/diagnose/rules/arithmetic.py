"""Arithmetic verdicts: matrix work in a dtype this CPU runs slowly (`slow_dtype`), and a step doing real work
(`compute_bound`, the healthy verdict).
"""

from __future__ import annotations

from trainspeed.diagnose.rules.brief import of_step, part_of_step
from trainspeed.diagnose.rules.context import Context
from trainspeed.diagnose.rules.step_model import (
    OP_FIXED_DISPATCHES,
    arithmetic_ms,
    busy_source,
    compute_ms,
    flop_rate,
    gpu_busy_ms,
    low_precision,
    next_lever_names,
    next_levers,
    op_names,
    op_work,
    rates_text,
    room_ms,
    sized_arithmetic,
    step_speedup,
    window_scale,
)
from trainspeed.diagnose.verdict import Lever, Verdict
from trainspeed.load.view import others_busy
from trainspeed.watch.result import OpTime, WatchResult

ARITHMETIC_HIGH = 0.50  # arithmetic over half of them: the step is doing real work
DEVICE_BUSY_HIGH = 0.8
TF32 = Lever("matmul_precision", {"float32_matmul_precision": "high"}, 'torch.set_float32_matmul_precision("high")',
             same_arithmetic=False, recipe="float32 matrix products rounded to TF32 inputs")
"""compute_bound's lever on a GPU whose TF32 tensor cores torch was not allowed to use (its default)."""
SLOW_DTYPE_SHARE = 0.20  # matrix arithmetic in one dtype for a fifth of the step...
SLOW_DTYPE_RATE = 0.6
"""...in a dtype this CPU multiplies at most this share of its float32 rate: float64 on AVX2 (about
0.45 on Zen 3), bfloat16 and float16 without native matrix units (about 0.01 there). A CPU with AMX
runs bfloat16 faster than float32, and the rule stays silent."""
SLOW_DTYPES = ("bfloat16", "float16", "float64")
BF16_SHARE = 0.30
"""A float32 CPU run whose matrix arithmetic took this share of the step or more, on a CPU with native bfloat16
(AVX512-BF16, AMX), has bfloat16's matmul rate probed: what bf16 autocast would save is the healthy verdict's
prediction (`_bf16_autocast`)."""
BF16_FASTER = 1.2
"""bf16 autocast is predicted where this CPU multiplied bfloat16 matrices at least this much faster than float32."""


def _dtype_arithmetic(r: WatchResult) -> dict[str, list[OpTime]]:
    """A CPU run's matrix arithmetic (the window's ops with a FLOP formula) in each dtype but float32."""
    out: dict[str, list[OpTime]] = {}
    if r.model.device != "cpu" or not r.window.op_times:
        return out
    for row in r.window.op_times:
        if row.arithmetic and row.dtype in SLOW_DTYPES:
            out.setdefault(row.dtype, []).append(row)
    return out


def slow_dtype_candidates(r: WatchResult) -> list[str]:
    """The dtypes whose matrix arithmetic took SLOW_DTYPE_SHARE of the step or more: the ones whose matmul
    rate `slow_dtype` needs probed. Where other processes held the cores (`others_busy`), every such dtype whose
    products have a FLOP count: the window's op times less their threads' waits are no measure of them there
    (`_loaded_ms`)."""
    if not r.steps.median_ms:
        return []
    return [dtype for dtype, rows in _dtype_arithmetic(r).items()
            if sum(row.ms for row in rows) >= SLOW_DTYPE_SHARE * r.steps.median_ms
            or (others_busy(r) and all(row.flops for row in rows))]


def _float32_arithmetic(r: WatchResult) -> tuple[list[OpTime], float]:
    """The profiler window's float32 matrix arithmetic (its ops with a FLOP formula) and their milliseconds a step on
    the median step's clock (`window_scale`)."""
    rows = [row for row in r.window.op_times or () if row.arithmetic and row.dtype == "float32"]
    return rows, sum(row.ms for row in rows) * window_scale(r)


def bf16_candidate(r: WatchResult, native_bf16: bool) -> bool:
    """Whether `compute_bound` wants bfloat16's matmul rate probed: a float32 CPU run (no autocast, no half-width model)
    on a CPU with native bfloat16 whose float32 matrix arithmetic took BF16_SHARE of the step or more."""
    if not native_bf16 or r.model.device != "cpu" or not r.steps.median_ms or low_precision(r) or r.model.autocast:
        return False
    return _float32_arithmetic(r)[1] >= BF16_SHARE * r.steps.median_ms


def _bf16_autocast(r: WatchResult, c: Context) -> tuple[str, str, float] | None:
    """What bf16 autocast would save a step of a float32 CPU run, where bfloat16's matmul rate was probed
    (`bf16_candidate`) and is BF16_FASTER or more: (the evidence's words, the brief, ms a step) - the float32 matrix
    arithmetic's FLOPs at the float32 rate less the same at the bfloat16 rate; what those ops took beyond their FLOPs at
    the float32 rate (a small convolution's shapes, its memory) stays as measured, as does the rest of the step. A
    DCGAN's 32 convolutions took 58 ms where their FLOPs need 40 at the float32 rate: the time at the rate alone
    predicted 1.54x, the FLOPs 1.37x, and bf16 autocast measured 1.22x to 1.34x (BENCHMARKS.md, "Realistic
    scripts")."""
    rate = c.dtype_gflops.get("bfloat16")
    if rate is None or c.matmul_gflops <= 0 or rate < BF16_FASTER * c.matmul_gflops or not r.steps.median_ms:
        return None
    rows, window_ms = _float32_arithmetic(r)
    took = min(window_ms, room_ms(r))
    flops = sum(row.flops or 0.0 for row in rows)
    # beside busy processes the window's times less their waits for a core fall far under the ops' time alone, where
    # their FLOPs at the rate come near it (`_loaded_ms`): there the FLOPs at the float32 rate are the time
    loaded = _loaded_ms(r, rows, c.matmul_gflops)
    at_float32 = loaded if loaded is not None else min(took, flops / (c.matmul_gflops * 1e6))
    saved = at_float32 * (1 - c.matmul_gflops / rate)
    if saved <= 0:
        return None
    brief = (f"float32 matrix math: {part_of_step(took, r.steps.median_ms)}; bfloat16 runs "
             f"{rate / c.matmul_gflops:.1f}x as fast here")
    words = (f"; bf16 autocast: this CPU multiplies bfloat16 matrices at {rate:.0f} GFLOP/s against "
             f"{c.matmul_gflops:.0f} in float32 (measured after the run, the two compared on one thread); the step's "
             f"float32 matrix arithmetic ({op_names(rows)} per step, {flops / 1e9:.2f} GFLOP) took {took:.2f} ms, "
             f"{at_float32:.2f} ms of it their FLOPs at the float32 rate: at the bfloat16 rate {saved:.2f} ms less "
             "(predicted speed-up: those FLOPs at the bfloat16 rate, the rest of the step as measured; a recipe "
             "change: the products' inputs rounded to bfloat16's 8 bits of mantissa, compare the loss)")
    return words, brief, saved


def _loaded_ms(r: WatchResult, rows: list[OpTime], rate: float) -> float | None:
    """Where other processes held the cores (`others_busy`), the milliseconds a step `rows` take at `rate` GFLOP/s
    (their FLOPs over it), where all have a FLOP count; else None. Beside busy processes a product's wall time less its
    threads' summed wait for a core falls far under its time alone, where its FLOPs at the dtype's rate come near it
    (BENCHMARKS.md, "Where the code's constants come from"): an op's threads wait for a core at once, and one spins at
    the product's barrier while the other waits, so a product's time is not its wall time less either."""
    if not others_busy(r) or not rows or not all(row.flops for row in rows) or rate <= 0:
        return None
    return sum(row.flops or 0.0 for row in rows) / (rate * 1e6)


def slow_dtype(r: WatchResult, c: Context) -> Verdict | None:
    """Matrix arithmetic (matmul, convolution) in a dtype this CPU runs far slower than float32:
    bfloat16 autocast on a CPU without native bfloat16, a model in float64 (numpy's default)."""
    if not r.steps.median_ms or c.matmul_gflops <= 0:
        return None
    step = r.steps.median_ms
    room = room_ms(r)
    scale = window_scale(r)
    found: list[tuple[float, Verdict]] = []
    for dtype, rows in _dtype_arithmetic(r).items():
        rate = c.dtype_gflops.get(dtype)
        if rate is None:
            continue
        window_ms = sum(row.ms for row in rows)
        loaded = _loaded_ms(r, rows, rate)
        took = min(max(window_ms * scale, loaded or 0.0), room)
        if took < SLOW_DTYPE_SHARE * step or rate > SLOW_DTYPE_RATE * c.matmul_gflops:
            continue
        gain = took * (1 - rate / c.matmul_gflops)  # those ops at the float32 rate
        ops = op_names(rows)
        flops = sum(row.flops or 0.0 for row in rows)
        if loaded is not None and loaded > window_ms * scale:
            ran = (f", {flops / 1e9:.2f} GFLOP at the {dtype} rate below: beside busy processes the profiler "
                   f"window's times less their waits for a core, {window_ms:.2f} ms, are no measure of them")
        else:
            ran = f", {flops / (window_ms * 1e6):.1f} GFLOP/s" if all(row.flops for row in rows) else ""
        evidence = (f"{took:.2f} ms of the {step:.2f} ms step ({took / step:.0%}) is matrix arithmetic in {dtype} "
                    f"({ops} per step{ran}); this CPU multiplies {dtype} matrices at {rate:.1f} GFLOP/s against "
                    f"{c.matmul_gflops:.0f} GFLOP/s in float32 (measured after the run, the two dtypes compared on "
                    "one thread)")
        if dtype == "float64":
            action = ("train in float32: model.float() and inputs .float(); numpy's float64 passes into "
                      "torch.from_numpy / torch.tensor unchanged, so convert the data once as it is loaded "
                      "(.astype(np.float32))")
            fix = "model.float() and x.float() (numpy data: .astype(np.float32))"
        else:
            action = (f"train in float32 on this CPU: drop torch.autocast('cpu', dtype=torch.{dtype}) or the "
                      f".to(torch.{dtype}) of the model and inputs; {dtype} pays on CPUs with native matrix units "
                      "(AMX, AVX512-BF16/FP16) and on GPUs, not here")
            fix = f"drop torch.autocast(\"cpu\", dtype=torch.{dtype})"
        brief = (f"{dtype} matrix math: {part_of_step(took, step)}; float32 runs {c.matmul_gflops / rate:.1f}x as "
                 "fast here")
        found.append((gain, Verdict("slow_dtype", evidence + " (predicted speed-up: those ops at the float32 "
                                    "rate, the rest of the step as measured)", action, step_speedup(r, step, step - gain),
                                    title=f"Matrix math in {dtype}, which this CPU runs slowly", brief=brief,
                                    fix=fix)))
    return max(found, key=lambda f: f[0])[1] if found else None


def compute_bound(r: WatchResult, c: Context) -> Verdict | None:
    compute = compute_ms(r)
    if not r.steps.median_ms:
        return None
    if r.model.device == "cuda":
        # the host may wait anywhere (a read, the allocator): what counts is whether the GPU is working
        busy_ms = gpu_busy_ms(r)
        if busy_ms is None or busy_ms / r.steps.median_ms < DEVICE_BUSY_HIGH:
            return None
        evidence = (f"the GPU works {busy_ms:.2f} ms of the {r.steps.median_ms:.2f} ms step ({busy_ms / r.steps.median_ms:.0%}, "
                    f"from {busy_source(r)})")
        brief = f"the GPU works {of_step(busy_ms, r.steps.median_ms)}"
        rate = flop_rate(r, c)
        if rate is not None:
            evidence += (f"; its {(r.window.flops_per_step or 0.0) / 1e9:.1f} GFLOP per step (torch.profiler's FLOP formulas) "
                         f"run at {rate.tflops:.1f} TFLOP/s, {rate.share:.0%} of the {rate.peak.gpu}'s "
                         f"{rate.peak.tflops:g} TFLOP/s {rate.peak.math} peak (model-FLOP utilisation; spec sheet)")
    else:
        if compute / r.steps.median_ms < 0.6:
            return None
        arithmetic = arithmetic_ms(r, c)
        if arithmetic is None:
            return None
        work, heavy = op_work(r, c)
        # matrix products and convolutions with real work took what they took in the profiler window where that
        # is more than their FLOPs at the probe's rate (a small CNN's convolutions run well under the matmul probe's
        # rate): the same model as launch_bound's
        big_ms, big_calls, big_at_peak = sized_arithmetic(r, c)
        kept = max(0.0, arithmetic - big_at_peak) + max(big_ms, big_at_peak)
        done = kept + work
        loaded = _loaded_work(r, c, compute) if done / compute < ARITHMETIC_HIGH else None
        if done / compute < ARITHMETIC_HIGH and loaded is None:
            return None
        parts = [loaded] if loaded is not None else []
        if kept >= 0.05 * compute and loaded is None:
            part = (f"their {(r.window.flops_per_step or 0.0) / 1e9:.2f} GFLOP need {arithmetic:.2f} ms at "
                    f"{rates_text(r, c)}")
            if big_ms > big_at_peak:
                part += (f"; the {big_calls:.0f} with real arithmetic (matrix products, convolutions) took "
                         f"{big_ms:.2f} ms in the profiler window, their rate on these shapes")
            parts.append(part)
        if work >= 0.05 * compute and loaded is None:
            parts.append(f"{work:.2f} ms goes to work in ops torch has no FLOP formula for ({op_names(heavy)} per step)")
        whole = (f"{done / compute:.0%} of {compute:.2f} ms" if done <= compute else
                 f"more than their {compute:.2f} ms: the run multiplied faster than the probe after it")
        evidence = (f"forward+backward+optimizer are {compute / r.steps.median_ms:.0%} of the step; " + "; ".join(parts)
                    + (f" ({whole})" if loaded is None else "") + ": real work")
        brief = (f"forward, backward and the optimizer: {compute / r.steps.median_ms:.0%} of the step, "
                 + (f"{min(done / compute, 1.0):.0%} of it arithmetic" if loaded is None else
                    f"{_compute_ops(r):.0f} ops doing real work"))
    tf32 = c.gpu_peak is not None and r.model.device == "cuda" and c.gpu_peak.tf32_tflops is not None
    if tf32 and c.gpu_peak is not None:
        action = (f"{next_levers(r)}; and float32 matrix products on the {c.gpu_peak.gpu}'s TF32 tensor cores "
                  f"({c.gpu_peak.tf32_tflops:g} TFLOP/s against {c.gpu_peak.tflops:g} in plain float32): "
                  "torch.set_float32_matmul_precision(\"high\"), 10 mantissa bits in the products' inputs")
        return Verdict("compute_bound", evidence, action, None, TF32, title=HEALTHY, brief=brief,
                       fix='torch.set_float32_matmul_precision("high")', unpredicted=UNPREDICTED)
    bf16 = _bf16_autocast(r, c) if r.model.device == "cpu" else None
    if bf16 is not None:
        words, short, saved = bf16
        step = r.steps.median_ms
        return Verdict("compute_bound", evidence + words, next_levers(r).replace(
            "bf16 autocast where the hardware has it", "bf16 autocast (this CPU has native bfloat16: "
            "with torch.autocast(\"cpu\", dtype=torch.bfloat16) around the forward and the loss)"),
            step_speedup(r, step, step - saved), title="Healthy, and bf16 autocast would speed it up", brief=short,
            fix='with torch.autocast("cpu", dtype=torch.bfloat16): the forward and loss')
    return Verdict("compute_bound", evidence, next_levers(r), None, title=HEALTHY, brief=brief,
                   fix="next: " + ", ".join(name.replace(" where the hardware has it", "")
                                            for name in next_lever_names(r)), unpredicted=UNPREDICTED)


def _compute_ops(r: WatchResult) -> float:
    """The profiler window's ops a step in forward, backward and the optimizer (a DataLoader's and "other"'s aside)."""
    return (r.window.ops_per_step or 0.0) - (r.window.edge_ops_per_step or 0.0) - (r.window.other_ops_per_step or 0.0)


def _loaded_work(r: WatchResult, c: Context, compute: float) -> str | None:
    """Beside busy processes (`others_busy`), the words that the step's ops do real work where their fixed cost (each
    at most OP_FIXED_DISPATCHES dispatches) is under half of forward, backward and the optimizer; else None. There the
    matmul probe's readings less their waits read up to twice alone's rate and the window's op times less their waits
    fall to near nothing, while the phases less their waits keep about alone's time (BENCHMARKS.md, "Where the code's
    constants come from"): the arithmetic's share reads a fraction of alone's, and what the ops' count bounds holds."""
    ops = _compute_ops(r)
    if not others_busy(r) or ops <= 0:
        return None
    fixed = ops * OP_FIXED_DISPATCHES * c.dispatch_us / 1e3
    if fixed > (1 - ARITHMETIC_HIGH) * compute:
        return None
    return (f"beside busy processes the rates probed after the run are no measure of this CPU's, but its {ops:.0f} ops a "
            f"step cost at most {fixed:.2f} ms of fixed cost ({OP_FIXED_DISPATCHES:.0f} dispatches of {c.dispatch_us:.2f} "
            f"us each): the rest of the {compute:.2f} ms is their work")


HEALTHY = "Healthy: the step does real work"
UNPREDICTED = "no waste found to remove"
