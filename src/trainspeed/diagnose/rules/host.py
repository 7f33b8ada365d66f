"""Host verdicts: the script's own work outside forward, backward and the optimizer (`logging_heavy`,
`host_code_heavy`, `outside_work`) and autograd's anomaly detection left on (`anomaly_detection`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from trainspeed.diagnose.rules.brief import ms, of_step, part_of_step, round_interval
from trainspeed.diagnose.rules.context import Context
from trainspeed.diagnose.rules.step_model import anomaly_costs, other_share, phase_ms, step_speedup
from trainspeed.diagnose.verdict import Lever, Verdict
from trainspeed.watch.result import WatchResult
from trainspeed.watch.sites import OtherSite, SyncSite

OTHER_SHARE = 0.15
LOG_SITE_SHARE = 0.30  # the logging line must hold this much of the unexplained time
OTHER_OP_DISPATCHES = 2.0
"""Python's part of each torch op in "other", in bare dispatches, beside its measured host time: the window times an op
below its dispatch mode, and the call that issued it (a torch.nn.functional wrapper, the indexing of a tensor) runs
above. host_code_heavy charges both to torch, not to the script. The window's timings are if anything high (its steps
run under dispatch modes, and soon after the warm-up: BENCHMARKS.md, "Where the code's constants come from"), so torch's
share is an upper bound, and the script's own code is blamed only for what torch cannot have taken."""
LOOP_LINE_MORE = 0.15
"""A training loop's line names a verdict instead of the innermost line the samples name most where the samples
under it (its own and those of the functions it called) outnumber that line's by this share of all: a function
called from the loop (a data generator, a metric helper) spreads its time over its lines."""
SITE_SAMPLES = 5
"""The fewest stack samples in "other", and at the line it names, a verdict that names a line rests on: at the
sampler's 50 Hz, a tenth of a second of that time. A seeded regression's 0.2 s loop (9 samples in "other") named
`outside_work` or `host_code_heavy` at a line of 3 or 4 of them in some runs and neither in others; one sample (a
progress bar's `stop` at the run's end) named a line that held "100%" and predicted 1.84x; removing it gained
nothing."""
OUTSIDE_SHARE = 0.20  # torch's work outside forward, backward and the optimizer for a fifth of the run
ANOMALY_SHARE = 0.10  # anomaly detection's own work for a tenth of the step
_LOSS = re.compile(r"\bloss\w*|criterion|cross_entropy|_loss\(|\bnll")  # a loss computed outside the model: the step's own work
_LOGGING = re.compile(  # a name or a method that logs; not log_prob, log_softmax, logits, torch.log(x), x.log()
    r"(?<![\w.])(print|pprint|log|logs|logger|logging|tqdm|wandb|mlflow|writer|json\.dump)\b"
    r"|\.(write|writelines|flush|set_postfix|add_scalars?|add_histogram|add_text"
    r"|log_(?:metrics?|dict|scalars?|params?|artifacts?|images?|text|hyperparams|table))\s*\("
    r"|(?<!torch)(?<!np)(?<!numpy)(?<!math)\.log\s*\((?!\s*\))|\bos\.fsync\b")
_GRADIENT = re.compile(r"\.grad\b|\b(?:add|sub|addcmul|addcdiv)_\(.*\bgrad\b")
_IN_PLACE = re.compile(r"_\(|-=|\+=")
"""With `_GRADIENT`, a line that updates parameters from their gradients by hand, in place
(`p.data.add_(p.grad, alpha=-lr)`, `w -= lr * w.grad`): the optimizer's work, done one tensor at a time."""
_RECORD = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*(?:[{\[]|f?[\"']|dict\()")
"""A line that builds a record, a row or a message under one name (`record = {"loss": loss.item(), ...}`,
`msg = f"..."`): logging, where one of the run's logging lines uses that name (`log.write(json.dumps(record))`)."""


def _logs(r: WatchResult) -> Callable[[str | None], bool]:
    """Whether a line of the run logs: a logging call (_LOGGING), or a line that builds what one of the run's logging
    lines (among the lines its samples and reads name) logs. The record's line holds the reads and the Python of
    the logging as much as the line that writes it, and a verdict on it alone would say "host code"."""
    codes = {s.code for s in (*r.sites.other, *r.sites.loop) if s.code} | \
        {s.code for s in (*r.reads.sync_sites, *r.reads.host_read_sites) if s.code}
    logging = [code for code in codes if _LOGGING.search(code)]
    built = set()
    for code in codes:
        record = _RECORD.match(code)
        if record and code not in logging and \
                any(re.search(rf"\b{re.escape(record.group(1))}\b", line) for line in logging):
            built.add(code)

    def logs(code: str | None) -> bool:
        return bool(code) and (code in built or bool(_LOGGING.search(code or "")))

    return logs


def _logging_reads(r: WatchResult, logs: Callable[[str | None], bool]) -> list[SyncSite]:
    """The reads of CPU tensors made on logging lines (`logs`, the run's `_logs`; `print(loss)` formats a tensor:
    its `__repr__`), the most time first. Their time is in the phase they ran in ("other", where the stack samples
    charge it to the logging line); on a GPU a read of a device tensor is also a wait for the device: sync_bound's."""
    return [s for s in r.reads.host_read_sites if logs(s.code)]


def logging_heavy(r: WatchResult, c: Context) -> Verdict | None:
    """Logging on every step: stack samples outside every phase on logging lines (a print, a logger, a
    flush), and, on a CPU, the tensors those lines format (their host reads)."""
    if not r.steps.median_ms:
        return None
    step, share, other = r.steps.median_ms, other_share(r), phase_ms(r, "other")
    logs = _logs(r)
    logging_sites = [s for s in r.sites.other if logs(s.code)]
    part = sum(s.share_of_other for s in logging_sites)
    if share < OTHER_SHARE or part < LOG_SITE_SHARE or other_samples(r) < SITE_SAMPLES:
        return None
    top = logging_sites[0]
    found = [f"{share:.0%} of the step ({other:.2f} ms) is outside every PyTorch phase; {part:.0%} of those "
             f"{other_samples(r)} stack samples are on logging lines, most at {_site(top)}"]
    action = "log every N steps (and aggregate in between), without flushing to disk each time; keep values on the device until then"
    read_sites = _logging_reads(r, logs)
    if read_sites:
        top_read = read_sites[0]
        per_call = top_read.total_ms / max(top_read.count, 1)
        per_step = top_read.count / r.steps.seen if r.steps.seen else 0.0
        found.append(f"the tensors they format are read {per_step:.1f} times a step at {top_read.where} "
                     f"({top_read.op}, {per_call:.2f} ms a read, within that time): `{top_read.code}`")
        if any(s.op == "__repr__" for s in read_sites):
            action += "; print numbers (loss.item()), not tensors: a tensor's repr formats every element"
    every = round_interval(max(10.0, other * part / (0.01 * step)))  # logging under 1% of the step
    return Verdict("logging_heavy", "; ".join(found), action, step_speedup(r, step, step - other * part),
                   site=top.where, title="Logging on every step",
                   brief=f"logging lines take about {of_step(other * part, step)}",
                   fix=f"run it only when step % {every} == 0")


def other_samples(r: WatchResult) -> int:
    """The stack samples taken in "other" during the measured steps (each site holds its share of them)."""
    return max((round(s.samples / s.share_of_other) for s in r.sites.other if s.share_of_other > 0), default=0)


def _site(top: OtherSite) -> str:
    """A stack-sampled line as the evidence names it, with the library its time ran in, where one held most."""
    inside = f", most of its samples inside {top.inside}" if top.inside else ""
    return f"{top.where}: `{top.code}`{inside}"


VALIDATE_ARGS_OFF = Lever("validate_args_off", {}, "torch.distributions.Distribution.set_default_validate_args(False)",
                          same_arithmetic=True)
"""host_code_heavy's lever where torch.distributions holds the line's time: its argument checks off (they compute
nothing the script uses)."""


def _in_distributions(r: WatchResult) -> bool:
    """Whether torch.distributions holds most of one of the top lines' samples in `other`."""
    return any(s.inside == "torch.distributions" for s in r.sites.other[:3])


def _library_tip(r: WatchResult) -> str:
    """Advice for a library that holds most of a top line's time in `other`, where there is a known lever."""
    if _in_distributions(r):
        return ("; torch.distributions checks its arguments on every distribution it builds and every log_prob: "
                "torch.distributions.Distribution.set_default_validate_args(False) (or validate_args=False) turns "
                "that off once the script is known to be right")
    return ""


def _subject(r: WatchResult, top: OtherSite, keep: Callable[[OtherSite], bool]) -> tuple[OtherSite, str]:
    """The line a verdict about time in "other" names, and the words that say why where it is not `top` (the
    innermost line the samples name most): the training loop's line the samples ran under, when more of them
    did than at `top` by LOOP_LINE_MORE (of those `keep` lets through)."""
    loop = [s for s in r.sites.loop if keep(s)]
    if not loop or loop[0].where == top.where or loop[0].share_of_other < top.share_of_other + LOOP_LINE_MORE:
        return top, ""
    line = loop[0]
    return line, (f"; {line.share_of_other:.0%} ran under the training loop's line {line.where}: `{line.code}` (the "
                  "line and the functions it calls)")


def _held(r: WatchResult, line: OtherSite, top: OtherSite, keep: Callable[[OtherSite], bool]) -> tuple[float, str]:
    """The share of the samples in "other" a verdict's line holds, and words for the evidence: where the line is
    the innermost one the samples name most and its samples ran inside a library, the lines inside that library
    together (a library's work spread over the lines that call it: a distribution built on one line, sampled on
    the next and scored on a third, each a third of the samples)."""
    if line is not top or top.inside is None:
        return line.share_of_other, ""
    lines = [s for s in r.sites.other if s.inside == top.inside and keep(s)]
    together = sum(s.share_of_other for s in lines)
    if len(lines) < 2:
        return line.share_of_other, ""
    path = top.where.rpartition(":")[0]
    same = all(s.where.rpartition(":")[0] == path for s in lines)
    where = ("lines " + ", ".join(s.where.rpartition(":")[2] for s in lines) if same else
             ", ".join(s.where for s in lines))  # line numbers alone where they are of one file
    return max(line.share_of_other, together), (f"; {together:.0%} of them in all at lines inside {top.inside} "
                                                 f"({where})")


def host_code_heavy(r: WatchResult, c: Context) -> Verdict | None:
    """Time outside every phase that torch's ops there do not explain: the script's own host code on
    every step (a metric computed with numpy or scikit-learn, a Python loop over items, a sleep or
    a wait, a cache flush), at the line the stack samples name. Logging lines are logging_heavy's."""
    share = other_share(r)
    if share < OTHER_SHARE or not r.steps.median_ms or not r.sites.other or r.window.other_ops_per_step is None or \
            other_samples(r) < SITE_SAMPLES:
        return None
    logs = _logs(r)
    sites = [s for s in r.sites.other if not logs(s.code)]
    if not sites:
        return None
    top = sites[0]
    line, under = _subject(r, top, lambda s: not logs(s.code))
    held, spread = _held(r, line, top, lambda s: not logs(s.code))
    if not _line_holds(r, held):
        return None
    # by the run's share of other (summed over every detailed step), steadier than other's median
    step = r.steps.median_ms
    other = share * step
    torch_ms = (r.window.other_op_ms_per_step or 0.0) + r.window.other_ops_per_step * OTHER_OP_DISPATCHES * c.dispatch_us / 1e3
    host = other - torch_ms
    if host < OTHER_SHARE * step:
        return None
    gain = min(host, other * line.share_of_other)  # that line's part, less all of torch's
    ops = (f"the {r.window.other_ops_per_step:.0f} torch ops per step there take at most {torch_ms:.2f} ms"
           if r.window.other_ops_per_step >= 0.5 else "no torch op runs there")
    evidence = (f"{share:.0%} of the run's time ({other:.2f} ms of the median {step:.2f} ms step) is outside every "
                f"PyTorch phase; {ops}, so "
                f"{host:.2f} ms ({host / step:.0%}) is the script's own host code; {top.share_of_other:.0%} of the "
                f"{other_samples(r)} stack samples there are at {_site(top)}{spread}{under}")
    action = ("that line runs on every step: run it every N steps or after the loop, hand it to a background "
              "thread, or make it cheaper (vectorise Python loops; keep metrics as tensors and read them every N "
              "steps); if it prepares data, a DataLoader with workers runs it beside the step" + _library_tip(r))
    every = round_interval(max(10.0, gain / (0.01 * step)))  # that line's time under 1% of the step
    fix = ("torch.distributions.Distribution.set_default_validate_args(False)" if _in_distributions(r) else
           f"run it only when step % {every} == 0, or after the loop")
    return Verdict("host_code_heavy", evidence + " (predicted speed-up: that line's host time out of the step)",
                   action, step_speedup(r, step, step - gain), VALIDATE_ARGS_OFF if _in_distributions(r) else None,
                   site=line.where, title="The script's own Python code, every step",
                   brief=f"the script's own code: {part_of_step(host, step)}, {held:.0%} of that at one line",
                   fix=fix)


def outside_work(r: WatchResult, c: Context, host: Verdict | None) -> Verdict | None:
    """Work outside forward, backward and the optimizer on every step that host_code_heavy leaves to torch (its
    ops there explain the time): a deep copy of the model, a running average of its weights, a metric, data
    prepared in the loop, at the line the stack samples name. Lines that compute a loss are the step's own
    work, and logging lines logging_heavy's. No prediction: whether that line's work is needed on every
    step is the script's to say, not the watcher's."""
    share = other_share(r)
    if host is not None or share < OUTSIDE_SHARE or not r.steps.median_ms or other_samples(r) < SITE_SAMPLES:
        return None
    logs = _logs(r)
    sites = [s for s in r.sites.other if not logs(s.code) and not _LOSS.search(s.code)]
    if not sites:
        return None
    top, step = sites[0], r.steps.median_ms
    line, under = _subject(r, top, lambda s: not logs(s.code) and not _LOSS.search(s.code))
    held, spread = _held(r, line, top, lambda s: not logs(s.code) and not _LOSS.search(s.code))
    if not _line_holds(r, held):
        return None
    other = share * step
    ops = (f"; {r.window.other_ops_per_step:.0f} torch ops per step run there" if r.window.other_ops_per_step else "")
    evidence = (f"{share:.0%} of the run's time ({other:.2f} ms of the median {step:.2f} ms step) is outside forward, "
                f"backward and the optimizer{ops}; {top.share_of_other:.0%} of the {other_samples(r)} stack samples there are at "
                f"{_site(top)}{spread}{under} (about {other * held:.2f} ms per step; no prediction: "
                "whether that work is needed on every step is the script's to say)")
    action = ("that line runs on every step, beside the training step: if it need not (a copy of the model, an average "
              "of its weights, a metric), run it every N steps; copy weights into one model kept for it "
              "(torch._foreach_copy_, torch._foreach_lerp_ for an average, or torch.optim.swa_utils.AveragedModel) "
              "rather than copy.deepcopy a new one; a loop over parameters can be one torch._foreach_* call, and an update "
              "of the parameters by hand a torch.optim optimizer (fused=True); data preparation belongs in a "
              "DataLoader's workers" + _library_tip(r))
    code = line.code or ""
    if _GRADIENT.search(code) and _IN_PLACE.search(code):  # an update of the parameters by hand
        title, what = "The parameters updated by hand, one tensor at a time", "the update's line outside the optimizer"
        fix = "a torch.optim optimizer (SGD(model.parameters(), lr=lr, foreach=True))"
        unpredicted = "one foreach update in place of the loop was not timed here"
    else:
        title, what = "Work beside the training step, every step", "one line outside forward, backward and the optimizer"
        fix = "run it every N steps; copy weights into a kept model, not copy.deepcopy"
        unpredicted = "whether that work must run every step is the script's to say"
    return Verdict("outside_work", evidence, action, None, site=line.where, title=title,
                   brief=f"{what}: about {ms(other * held)} a step", fix=fix, unpredicted=unpredicted)


def _line_holds(r: WatchResult, held: float) -> bool:
    """Whether the line a verdict names holds enough of "other": LOG_SITE_SHARE of its samples, and SITE_SAMPLES of
    them."""
    return held >= LOG_SITE_SHARE and held * other_samples(r) >= SITE_SAMPLES - 0.5


def anomaly_detection(r: WatchResult, c: Context) -> Verdict | None:
    """Autograd's anomaly detection left on: every op that records a gradient stores a formatted Python stack,
    and backward checks every gradient for NaN. Prediction: the step without both."""
    stacks, checks, _ = anomaly_costs(r)
    step = r.steps.median_ms
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
    return Verdict("anomaly_detection", evidence, action, step_speedup(r, step, step - cost),
                   Lever("anomaly_off", {}, "torch.autograd.set_detect_anomaly(False)", same_arithmetic=True),
                   title="Autograd's anomaly detection is on",
                   brief=f"its stacks and NaN checks: {part_of_step(cost, step)}",
                   fix="torch.autograd.set_detect_anomaly(False)")
