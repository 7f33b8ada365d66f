"""Optimizer verdicts: an unfused optimizer step (`optimizer_heavy`), an optimizer built inside the loop
(`optimizer_rebuilt`), and gradients zeroed in place every step (`zero_grad_kept`).
"""

from __future__ import annotations

import mmap

from trainspeed.diagnose.rules.brief import of_step, part_of_step
from trainspeed.diagnose.rules.context import Context
from trainspeed.diagnose.rules.step_model import compute_part_ms, step_speedup, window_scale
from trainspeed.diagnose.verdict import Lever, Verdict
from trainspeed.watch.result import WatchResult

OPTIMIZER_SHARE = 0.20  # optimizer.step and zero_grad for a fifth of the step: worth a fused kernel
OPTIMIZER_GAIN = 0.05  # ...if fusing would save this share of the step
PROBE_CONTRADICTS = 4.0
"""optimizer_heavy is not given where the run's optimizer phase took this many times the probe's step of the same
optimizer on the same shapes: the phase then holds something else (other processes on the cores: a 320 ms phase against
a 1.96 ms probe on a loaded machine). In a run the phase is slower than the probe's back-to-back steps, which find the
caches warm, but well under this (BENCHMARKS.md, "Where the code's constants come from")."""
REBUILT_PER_STEP = 0.5  # a new optimizer built every other step or more often: inside the loop


def optimizer_candidate(r: WatchResult) -> bool:
    """Whether the run's optimizer is worth probing fused: not fused already, and its phase a fifth of the step
    (not when a new optimizer is built every step: its phase then holds the new one's making of its state)."""
    opt = r.optimizers.info
    return bool(opt is not None and not opt.fused and r.steps.median_ms and not rebuilt_candidate(r) and
                compute_part_ms(r, "optimizer") >= OPTIMIZER_SHARE * r.steps.median_ms)


def rebuilt_candidate(r: WatchResult) -> bool:
    """Whether the script builds a new optimizer every other step or more often (inside its loop)."""
    return r.optimizers.built >= 2 and r.optimizers.built >= REBUILT_PER_STEP * r.steps.seen


def optimizer_rebuilt(r: WatchResult, c: Context) -> Verdict | None:
    """A new optimizer built inside the loop: its construction on every step, and its first step making its
    state (zeroed moment or momentum tensors) anew each time. Predicted from the doctor's probe after the run:
    building one and stepping it once against a step of one kept, on the run's parameter shapes."""
    step = r.steps.median_ms
    if not rebuilt_candidate(r) or not step:
        return None
    kind = r.optimizers.info.kind if r.optimizers.info is not None else "optimizer"
    built = r.optimizers.build_ms or 0.0
    if c.rebuild_ms is not None:
        fresh, kept = c.rebuild_ms
        saved = max(fresh - kept, built)
        how = (f"; on the run's parameter shapes here, building one and taking its first step took {fresh:.2f} ms "
               f"against {kept:.2f} ms for a step of one kept (both measured after the run; predicted speed-up: "
               "the step less the difference)")
    else:
        saved = built
        how = " (predicted speed-up: the step less the construction alone, a lower bound)"
    saved *= min(1.0, r.optimizers.built / max(1, r.steps.seen))
    evidence = (f"a new {kind} was built {r.optimizers.built} times in {r.steps.seen} steps ({built:.3f} ms each in "
                f"its constructor): each starts with no state and makes it at its first step{how}")
    action = ("build the optimizer once, before the loop, and keep it: a new one also throws away its state at every "
              "step (SGD's momentum buffers, Adam's moment estimates and step count), so the run does not train as the "
              "optimizer means to; change the learning rate through `optimizer.param_groups` or a "
              "torch.optim.lr_scheduler instead")
    return Verdict("optimizer_rebuilt", evidence, action, step_speedup(r, step, step - saved),
                   title="A new optimizer every step",
                   brief=f"a new {kind} {r.optimizers.built} times in {r.steps.seen} steps, its state lost each time",
                   fix="build the optimizer once, before the loop")


def optimizer_heavy(r: WatchResult, c: Context) -> Verdict | None:
    """The optimizer step, a few ops per parameter tensor one tensor at a time, against the same class fused
    (one kernel for every tensor), both measured on the run's parameter shapes after the run."""
    if not optimizer_candidate(r) or c.optimizer_ms is None or r.optimizers.info is None:
        return None
    step, opt = r.steps.median_ms or 0.0, compute_part_ms(r, "optimizer")
    configured, fused = c.optimizer_ms
    steps = max(1, round(r.steps.optimizer_steps_per_step or 1))  # the phase holds every optimizer's step (a GAN's two)
    faulted, probe_faulted = _fault_ms(r, c, opt, configured, steps)
    if configured > 0 and opt - faulted > PROBE_CONTRADICTS * configured * steps:
        return None  # the phase is not the optimizer's arithmetic: the machine was busy, or the step waited
    # the phase at the probe's ratio: in the run each step comes after forward and backward have turned the
    # caches over, and runs slower than the probe's back-to-back steps (12.6 ms against 7.3 on /tmp's script); the
    # step's page faults apart, on either side: fused=True takes none, and the probe's steps back to back took more
    # or fewer than the run's (a skip-gram's dense Adam: 2.04x and 3.08x predicted from two probes, 3.19x measured)
    arithmetic = configured - probe_faulted
    saved = max(0.0, opt - (opt - faulted) * min(1.0, fused / arithmetic)) if arithmetic > 0 else 0.0
    if saved < OPTIMIZER_GAIN * step:
        return None
    o = r.optimizers.info
    how = ("foreach=True" if o.foreach else "foreach=False" if o.foreach is False else
           "torch's default, one tensor at a time on a CPU" if r.model.device != "cuda" else "torch's default, foreach")
    others = (f"; {steps} optimizer steps run each step, this one's and {steps - 1} of other optimizers (a GAN's "
              "other network, an actor-critic's critic)" if steps > 1 else "")
    evidence = (f"optimizer.step and zero_grad take {opt:.2f} ms of the {step:.2f} ms step ({opt / step:.0%}): "
                f"{o.kind} updates {o.tensors} parameter tensors ({how}){others}; on the same shapes here one step "
                f"took {configured:.2f} ms as configured and {fused:.2f} ms with fused=True (both measured after the "
                "run; predicted speed-up: the optimizer phase shrunk by that ratio"
                + (", each optimizer fused alike)" if steps > 1 else ")"))
    if faulted > 0:
        pages = (r.optimizers.page_faults or 0.0) * steps
        evidence += (f"; in the run the step also took {pages:,.0f} pages of fresh memory ({pages * mmap.PAGESIZE / 2**20:,.0f}"
                     f" MiB) for its temporaries, about {faulted:.1f} ms at the {c.probed['page_fault_us']:.2f} us one "
                     "page fault took here, which fused=True, updating in place, does not take: the ratio is taken of "
                     "the rest of the phase" + (f" and of the probe's step less its own {c.optimizer_faults:,.0f} "
                                                "faults" if probe_faulted > 0 else ""))
    each = "; the same for each optimizer that steps" if steps > 1 else ""
    action = (f"torch.optim.{o.kind}(..., fused=True){each}: one kernel updates every parameter tensor "
              "(the same algorithm, rounded in another order; on a GPU, where foreach is the default, fused is faster "
              "still)")
    lever = Lever("optimizer", {"fused": True}, f"torch.optim.{o.kind}(..., fused=True)", same_arithmetic=False,
                  match={"kind": o.kind})
    return Verdict("optimizer_heavy", evidence, action, step_speedup(r, step, step - saved), lever,
                   title="An unfused optimizer step",
                   brief=f"{o.kind}'s step: {part_of_step(opt, step)}; fused ran {configured / fused:.1f}x as fast"
                   if fused > 0 else f"{o.kind}'s step: {part_of_step(opt, step)}",
                   fix=lever.paste)


def _fault_ms(r: WatchResult, c: Context, opt: float, configured: float, steps: int) -> tuple[float, float]:
    """(the run's optimizer phase's page faults, the probe's configured step's) in milliseconds at the probed cost of
    one fault (`page_faults`' probe), each at most its step; (0, 0) where either count or the cost is unknown."""
    us = c.probed.get("page_fault_us")
    if us is None or r.optimizers.page_faults is None:
        return 0.0, 0.0
    run = min(opt, r.optimizers.page_faults * steps * us / 1e3)
    probe = min(configured, (c.optimizer_faults or 0.0) * us / 1e3)
    return run, probe


ZERO_OPS = ("aten.zero_", "aten._foreach_zero_")
ZERO_GRAD_SHARE = 0.05
"""Gradients zeroed in place, and added to by the next backward, for a twentieth of the step or more."""
ACCUMULATE_TRAFFIC = 3.0
"""The next backward's accumulation into a zeroed gradient against the zeroing itself, in memory traffic: it reads the
gradient and the new one and writes their sum, where zeroing writes it once."""


def zero_grad_kept(r: WatchResult, c: Context) -> Verdict | None:
    """`optimizer.zero_grad(set_to_none=False)` (or `model.zero_grad(False)`, or `p.grad.zero_()` by hand) on a CPU:
    the profiler window's op table holds a zeroing op for each of the optimizer's parameter tensors every step (or
    torch's foreach zeroing). Predicted: the step without the zeroing and the accumulation it makes the next backward
    do (ACCUMULATE_TRAFFIC times the zeroing's time); with the gradients set to None, backward writes them afresh."""
    info, step = r.optimizers.info, r.steps.median_ms
    if r.model.device != "cpu" or info is None or not r.window.op_times or not step:
        return None
    rows = [row for row in r.window.op_times if row.op in ZERO_OPS]
    calls = sum(row.calls for row in rows)
    if not rows or (calls < info.tensors and not any(row.op == "aten._foreach_zero_" for row in rows)):
        return None
    zeroing = sum(row.ms for row in rows) * window_scale(r)
    saved = zeroing * (1 + ACCUMULATE_TRAFFIC)
    if saved < ZERO_GRAD_SHARE * step:
        return None
    evidence = (f"every step zeroes the gradients in place: {calls:.0f} zeroing ops for the {info.tensors} parameter "
                f"tensors {info.kind} updates took {zeroing:.2f} ms of the {step:.2f} ms step in the profiler window, "
                "and the next backward then adds each new gradient to the zeroed one instead of writing it (predicted "
                f"speed-up: the step without both, {saved:.2f} ms, the accumulation taken as {ACCUMULATE_TRAFFIC:.0f} "
                "times the zeroing's memory traffic)")
    action = ("optimizer.zero_grad() (set_to_none=True, torch's default since 2.0; model.zero_grad() likewise): the "
              "gradients are freed instead of zeroed, and the next backward writes them afresh; code that reads "
              "`p.grad` between zero_grad and backward must then expect None")
    return Verdict("zero_grad_kept", evidence, action, step_speedup(r, step, step - saved),
                   title="Gradients zeroed in place every step",
                   brief=f"zeroing and adding to the zeroed gradients: about {of_step(saved, step)}",
                   fix="optimizer.zero_grad()  # set_to_none=True, torch's default")

