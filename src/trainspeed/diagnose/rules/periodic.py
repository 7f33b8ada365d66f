"""Periodic work verdicts: evaluating (`evaluation_heavy`) and saving checkpoints (`checkpoint_heavy`) too
often.
"""

from __future__ import annotations

import math

from trainspeed.diagnose.rules.brief import every, ms, plural
from trainspeed.diagnose.rules.context import Context
from trainspeed.diagnose.rules.step_model import burst_note, phase_ms, speedup
from trainspeed.diagnose.verdict import Verdict
from trainspeed.watch.result import WatchResult

CHECKPOINT_SHARE = 0.10
EVAL_SHARE = 0.15  # evaluation for this share of the run: worth asking whether it is needed that often
EVAL_LESS = 4  # evaluation_heavy's prediction: evaluating a quarter as often


def checkpoint_factor(r: WatchResult) -> int:
    """How many times less often to save: enough to bring the saves under 1% of the run's time."""
    return max(2, math.ceil(r.phases["checkpoint"].share / 0.01))


def at_interval(steps: int, every: int, epoch: int | None = None) -> int:
    """How many times work done every `every` steps runs in a run of `steps` steps; with `epoch` (batches an epoch),
    counted afresh in each epoch, as Lightning's `val_check_interval` counts (an epoch's last part interval runs
    nothing). The advice's "N times less often" is this count against the run's own, not the factor it began
    from: 12 validations every 4 of 24 batches an epoch become 2, not 3, at an interval of 16."""
    if every <= 0:
        return 0
    if epoch:
        full, rest = divmod(steps, epoch)
        return full * (epoch // every) + rest // every
    return steps // every


def counted(what: str, count: int, seen: int, steps: int) -> str:
    """"2 validations in this run's 48 steps instead of 12": an interval's advice in the run's own counts."""
    return f"{count} {what}{'' if count == 1 else 's'} in this run's {steps} steps instead of {seen}"


def save_interval(r: WatchResult) -> tuple[int, int] | None:
    """checkpoint_heavy's interval in steps (the run's times `checkpoint_factor`) and the saves it makes in this
    run; None where the run's saves had no interval (one save, or saves not told apart)."""
    if not r.checkpoints.every_steps:
        return None
    every = math.ceil(r.checkpoints.every_steps * checkpoint_factor(r))
    return every, at_interval(r.steps.seen, every)


def eval_interval(r: WatchResult) -> tuple[int, int] | None:
    """evaluation_heavy's interval in steps (the run's times EVAL_LESS) and the evaluations it makes in this run
    (at least the one a run's end usually makes); None where the run evaluated once."""
    ev = r.evaluation
    if ev is None or not ev.every_steps:
        return None
    every = math.ceil(ev.every_steps * EVAL_LESS)
    return every, max(1, at_interval(r.steps.seen, every))


def checkpoint_heavy(r: WatchResult, c: Context) -> Verdict | None:
    share = r.phases["checkpoint"].share
    if share < CHECKPOINT_SHARE or not r.steps.median_ms:
        return None
    evidence = f"saving checkpoints took {burst_note(r, 'checkpoint')}"
    if r.checkpoints.saves:
        calls = f" of {r.checkpoints.calls} torch.save calls" if r.checkpoints.calls > r.checkpoints.saves else ""
        evidence += f" ({r.checkpoints.saves} checkpoints{calls} in the run" + (f", {every(r.checkpoints.every_steps)})"
                                                                   if r.checkpoints.every_steps else ")")
    factor = checkpoint_factor(r)
    interval = save_interval(r)
    keep = 1 / factor
    every_step = phase_ms(r, "checkpoint") > 0 or (r.checkpoints.every_steps or 2.0) < 1.5
    if interval is not None and r.checkpoints.saves:
        new, count = interval
        keep = min(1.0, count / r.checkpoints.saves)
        action = (f"save every {new} steps ({counted('checkpoint', count, r.checkpoints.saves, r.steps.seen)}), or hand the "
                  "state_dict copy to a background thread")
        fix = f"if step % {new} == 0: torch.save(...)"
    elif phase_ms(r, "checkpoint") > 0:  # the median step saves: the script saves every step (or nearly)
        action = f"save every {factor} steps instead of every step, or hand the state_dict copy to a background thread"
        fix = f"if step % {factor} == 0: torch.save(...)"
    else:
        action = f"save {factor} times less often, or hand the state_dict copy to a background thread"
        fix = f"save {factor} times less often"
    saves = (f", {plural(r.checkpoints.saves, 'checkpoint')} in {r.steps.seen} steps" if r.checkpoints.saves else "")
    return Verdict("checkpoint_heavy", evidence, action, speedup(1.0, 1 - share * (1 - keep)),
                   title="Saving a checkpoint every step" if every_step else "Saving checkpoints too often",
                   brief=f"saving checkpoints takes {share:.0%} of the run{saves}", fix=fix)


def evaluation_heavy(r: WatchResult, c: Context) -> Verdict | None:
    """Evaluation (model.eval() to model.train(), or the model called under torch.no_grad()) a large share of the
    run: no training happens then."""
    ev = r.evaluation
    if ev is None or ev.share < EVAL_SHARE or not r.steps.median_ms:
        return None
    often = f", {every(ev.every_steps)}" if ev.every_steps else ""
    told = {"model.eval()": "from model.eval() until the model trains again",
            "no_grad": "the model called under torch.no_grad() or inference_mode, outside the training step"}
    seen = ev.seen
    timed = f" ({ev.count} during the measured steps)" if ev.count != seen else ""
    interval = eval_interval(r)
    if interval is not None and seen:
        new, count = interval
        keep = min(1.0, count / seen)
        less, how = f"every {new} steps ({counted('evaluation', count, seen, r.steps.seen)})", f"every {new} steps"
        fix = f"if step % {new} == 0: evaluate(...)  # under torch.inference_mode()"
    else:
        keep, less, how = 1 / EVAL_LESS, "less often", f"{EVAL_LESS} times less often"
        fix = f"evaluate {EVAL_LESS} times less often, under torch.inference_mode()"
    evidence = (f"evaluation ({told.get(ev.by, ev.by)}) took {ev.share:.0%} of the measured run's time: {seen} "
                f"evaluations in the run{often}{timed}, {ev.mean_ms:.1f} ms each, beside a {r.steps.median_ms:.2f} ms "
                f"training step (predicted speed-up: evaluating {how})")
    action = (f"evaluate {less}, or on a fixed subset of the validation data; and under torch.inference_mode() with "
              "the largest batch that fits (evaluation keeps no gradients or activations), so the same data costs "
              "fewer, larger ops")
    brief = f"{plural(seen, 'evaluation')}{often}, {ms(ev.mean_ms)} each: {ev.share:.0%} of the run"
    return Verdict("evaluation_heavy", evidence, action, speedup(1.0, 1 - ev.share * (1 - keep)),
                   title="Evaluating too often", brief=brief, fix=fix)
