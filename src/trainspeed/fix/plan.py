"""`doctor --fix`: each verdict of a diagnosis turned into an edit of the script it ran, where its fix is one
(`fix.edits`), or the reason it is not; and the unified diff of them all, which `git apply` and `patch -p1` apply
in the script's repository."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import libcst as cst

from trainspeed.diagnose.verdict import Verdict
from trainspeed.fix import dtype as dtype_edits
from trainspeed.fix import loaders
from trainspeed.fix.edits import (
    Planned,
    after_imports,
    call_at,
    called_in_loops,
    enclosing,
    every_n_steps,
    keywords,
    loop_statements,
    only,
)
from trainspeed.fix.result import Hunk, Patch, Skipped
from trainspeed.fix.source import Change, NoPatch, Source, walk

_INTERVAL = re.compile(r"step % (\d+) == 0")

NOT_AN_EDIT = {
    "small_batch": "a larger batch changes the training recipe (the learning rate, the steps an epoch): choose one "
                   "with `trainspeed fit` or `trainspeed sweep batch`, then set it",
    "cpu_faster": "the device is the script's choice: run it with its device set to the CPU",
    "compute_bound": "the model's arithmetic is the work itself: a lever (AMP, compile) is a choice of recipe",
    "memory_pressure": "memory is a limit, not a line of the script",
    "optimizer_rebuilt": "the optimizer must be made once, before the loop: a move of code the patch does not guess",
    "zero_grad_kept": "the script keeps gradients between steps on purpose or by mistake: the patch does not guess",
    "compile_heavy": "recompiles come from shapes that change: pad or bucket them where the data is made",
    "comm_bound": "the traffic between ranks is the parallel layout's: not one line",
    "straggler": "a slow rank is the machine's or its data's: not one line",
    "launch_bound": "many small ops are the model's and the batch's: a larger batch, fused layers or CUDA graphs "
                    "change the recipe or the model, not one line",
    "dropout_heavy": "dropout's cost is the model's: a lower rate or another layer changes the model itself",
    "recompute_heavy": "activation checkpointing trades memory for time on purpose: turning it off needs the memory",
    "h2d_bound": "the copies follow from where the data lives: keeping it on the device moves code, not one line",
    "outside_work": "the time outside the steps is the script's own set-up or its end, not a line of the loop",
    "threads_unused": "torch's threads are set from outside the script",
}
"""Verdicts whose fix is no edit at one line, and why (the others without an edit say what the run lacked)."""


def repository_label(script: Path) -> str:
    """The script's path as a diff names it: from the root of its git repository, else from the working folder,
    else its name (then `patch -p1` applies it in the script's folder)."""
    resolved = script.resolve()
    for folder in resolved.parents:
        if (folder / ".git").exists():
            return resolved.relative_to(folder).as_posix()
    try:
        return resolved.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return resolved.name


def unified(before: str, after: str, label: str) -> str:
    """`git diff`'s unified diff of one file, "\\ No newline at end of file" marked as git marks it."""
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=f"a/{label}", tofile=f"b/{label}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def _site_line(v: Verdict, script: Path) -> int | None:
    """The line of the script the verdict names (None: it names none, or a line of another file)."""
    if not v.site or ":" not in v.site:
        return None
    file, _, line = v.site.rpartition(":")
    if not line.isdigit():
        return None
    if Path(file).resolve() != script.resolve():
        raise NoPatch(f"the line it names ({v.site}) is in another file than the script: --fix edits the script")
    return int(line)


def _merged(plans: list[Planned]) -> Planned:
    spans = [p.lines for p in plans]
    recipes = [p.recipe for p in plans if p.recipe]
    return Planned([c for p in plans for c in p.changes], enclosing(spans),
                   "; ".join(p.said for p in plans), all(p.same_arithmetic for p in plans),
                   "; ".join(recipes) if recipes else None)


def _signature(name: str) -> Any:
    import importlib
    import inspect

    module, _, attr = name.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module), attr)
        return inspect.signature(obj)
    except (ImportError, AttributeError, ValueError, TypeError):
        return None


def _lever_edit(source: Source, v: Verdict, line: int | None) -> Planned:
    lever = v.lever
    assert lever is not None
    s = lever.settings
    if lever.kind == "malloc":
        raise NoPatch(f"an environment setting, read before Python starts: {lever.paste}")
    if lever.kind == "threads":
        return _threads(source, int(s["threads"]))
    if lever.kind == "matmul_precision":
        return _setting(source, "torch.set_float32_matmul_precision", f'("{s["float32_matmul_precision"]}")',
                        "float32 matrix products in TF32 on a GPU", same=False)
    if lever.kind == "validate_args_off":
        return _setting(source, "torch.distributions.Distribution.set_default_validate_args", "(False)",
                        "torch.distributions' argument checks off", same=True)
    if lever.kind == "anomaly_off":
        return _anomaly_off(source)
    if lever.kind == "optimizer":
        kind = str(lever.match.get("kind"))
        calls = [c for c, name in source.calls() if name == f"torch.optim.{kind}"]
        call = only(source, call_at(source, calls, line), f"torch.optim.{kind}(...)")
        plan = keywords(source, call, {"fused": True}, _signature(f"torch.optim.{kind}"),
                        f"torch.optim.{kind} made with fused=True", same=False)
        if any(a.keyword and a.keyword.value == "foreach" for a in call.args):
            raise NoPatch(f"the call at line {plan.lines[0]} sets foreach=, which torch refuses beside fused=True")
        return plan
    if lever.kind == "dataloader":
        return _dataloader(source, v, line)
    if lever.kind in ("lightning", "transformers"):
        return _framework(source, v, line)
    raise NoPatch(f"a {lever.kind} setting has no edit")


def _setting(source: Source, function: str, arguments: str, said: str, same: bool) -> Planned:
    """`function(arguments)` after the imports, or in place of the script's own call of it."""
    line = function + arguments
    return after_imports(source, [line], {function: line}, said, same)


def _threads(source: Source, k: int) -> Planned:
    return _setting(source, "torch.set_num_threads", f"({k})", f"torch's threads set to {k}", same=False)


def _made_with(what: str, values: dict[str, Any]) -> str:
    """"the DataLoader made with num_workers=2": a call's new keyword arguments, said."""
    return f"{what} made with " + ", ".join(f"{k}={val!r}" for k, val in values.items())


def _dataloader(source: Source, v: Verdict, line: int | None) -> Planned:
    lever = v.lever
    assert lever is not None
    calls = [c for c, name in source.calls() if name.rsplit(".", 1)[-1] == "DataLoader"]
    calls = call_at(source, calls, line)
    wanted = lever.match.get("batch_size")
    kept = [c for c in calls if _batch_literal(c) in (_UNKNOWN, wanted)]
    named = [c for c in kept if _dataset_name(c) == lever.match.get("dataset")]
    call = only(source, named or kept, "DataLoader(...)")
    plans = []
    if lever.settings.get("batched"):
        plans.append(loaders.batched_loader(source, call))
    values = {k: val for k, val in lever.settings.items() if k not in ("batched", "threads")}
    if values:
        plans.append(keywords(source, call, values, _signature("torch.utils.data.DataLoader"),
                              _made_with("the DataLoader", values), same=lever.same_arithmetic, recipe=lever.recipe))
    if "threads" in lever.settings:
        plans.append(_threads(source, int(lever.settings["threads"])))
    return _merged(plans)


_UNKNOWN = "?"


def _batch_literal(call: cst.Call) -> int | str | None:
    """A DataLoader call's batch_size where the source says it (an integer; None: `batch_size=None`), else _UNKNOWN
    (an expression) or 1 (not given: DataLoader's default)."""
    for i, arg in enumerate(call.args):
        if arg.star:
            continue
        if (arg.keyword is not None and arg.keyword.value == "batch_size") or (arg.keyword is None and i == 1):
            if isinstance(arg.value, cst.Integer):
                return int(arg.value.value)
            if isinstance(arg.value, cst.Name) and arg.value.value == "None":
                return None
            return _UNKNOWN
    return _UNKNOWN if any(arg.star == "**" for arg in call.args) else 1


def _dataset_name(call: cst.Call) -> str | None:
    first = call.args[0].value if call.args and call.args[0].keyword is None else None
    if isinstance(first, cst.Call):
        func = first.func
        return func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
    return None


def _framework(source: Source, v: Verdict, line: int | None) -> Planned:
    lever = v.lever
    assert lever is not None
    by_class: dict[str, dict[str, Any]] = {}
    for key, value in lever.settings.items():
        cls, _, name = key.rpartition(".")
        by_class.setdefault(cls or "TrainingArguments", {})[name] = value
    plans = []
    for cls, values in by_class.items():
        calls = [c for c, name in source.calls() if name.rsplit(".", 1)[-1] == cls]
        call = only(source, call_at(source, calls, line) if cls != "ModelCheckpoint" else calls, f"{cls}(...)")
        plans.append(keywords(source, call, values, None, _made_with(cls, values), same=lever.same_arithmetic,
                              recipe=lever.recipe))
    return _merged(plans)


def _anomaly_call_off(_node: cst.CSTNode) -> cst.CSTNode:
    return cst.parse_expression("torch.autograd.set_detect_anomaly(False)")


def _anomaly_off(source: Source) -> Planned:
    changes, spans = [], []
    for call, name in source.calls():
        if name in ("torch.autograd.set_detect_anomaly", "torch.autograd.detect_anomaly"):
            changes.append(Change(call, _anomaly_call_off))
            spans.append(source.lines(call))
    if not changes:
        raise NoPatch("the script does not turn anomaly detection on itself (a library or a setting does)")
    return Planned(changes, enclosing(spans),
                   "anomaly detection off (torch.autograd.set_detect_anomaly(False))", same_arithmetic=True)


def _interval(v: Verdict) -> int:
    found = _INTERVAL.search(v.fix) or _INTERVAL.search(v.action)
    if found is None:
        raise NoPatch("the run found no interval in steps for it (its work has no step counter to go by)")
    return int(found.group(1))


def _periodic(source: Source, v: Verdict, line: int | None) -> Planned:
    every = _interval(v)
    if v.id == "checkpoint_heavy":
        calls = called_in_loops(source, lambda _c, name: name == "torch.save")
        what, recipe = "save", f"a checkpoint every {every} steps"
    elif v.id == "evaluation_heavy":
        calls = called_in_loops(source, lambda c, _name: _evaluates(c))
        what, recipe = "evaluate", f"an evaluation every {every} steps"
    else:
        if line is None:
            raise NoPatch("the run named no line of the script for it")
        stmt = source.statement_at(line)
        return every_n_steps(source, [stmt], every, f"line {line} runs", f"line {line} every {every} steps")
    groups = loop_statements(source, calls)
    if not groups:
        raise NoPatch(f"{source.path} makes no such call inside a loop")
    if v.id == "evaluation_heavy":
        groups = [_through_train(source, g) for g in groups]
    return _merged([every_n_steps(source, g, every, what, recipe) for g in groups])


def _evaluates(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "eval" and not call.args


def _through_train(source: Source, group: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """An evaluation's statements: from `model.eval()` through the `model.train()` after it in the same block."""
    parent = source.parent(group[0])
    assert isinstance(parent, cst.IndentedBlock | cst.Module)
    body = list(parent.body)
    start = next(i for i, s in enumerate(body) if s is group[-1])
    for j in range(start, len(body)):
        if any(isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "train"
               and not n.args for n in walk(body[j])):
            return body[body.index(group[0]):j + 1]
    return group


def plan_verdict(source: Source, v: Verdict, script: Path) -> Planned:
    """The edit that makes `v`'s fix in the script, or NoPatch."""
    line = _site_line(v, script)
    if v.lever is not None:
        return _lever_edit(source, v, line)
    if v.id in ("checkpoint_heavy", "evaluation_heavy", "logging_heavy", "host_code_heavy", "sync_bound"):
        return _periodic(source, v, line)
    if v.id == "slow_dtype":
        return dtype_edits.float32(source)
    if v.id == "launch_bound" and ("LSTMCell" in v.evidence + v.action or "GRUCell" in v.evidence + v.action):
        raise NoPatch("nn.LSTM in place of a loop over a cell has parameters of other names and shapes (a saved "
                      "state_dict no longer loads) and needs the whole sequence before the loop: rewrite it by hand")
    if v.id == "input_bound":
        raise NoPatch(f"the data's own work{f' at {v.site}' if v.site else ''} is to be made cheaper: a change of what "
                      "it computes, which the patch does not guess")
    raise NoPatch(NOT_AN_EDIT.get(v.id, "its fix is not one edit at a line the run recorded"))


def _blocks(plan: Planned) -> set[int]:
    """The blocks a plan wraps statements of (two plans that wrap the same lines cannot both be made)."""
    return {id(c.node) for c in plan.changes if isinstance(c.node, cst.IndentedBlock)}


def make_patch(verdicts: list[Verdict], script: Path, text: str) -> Patch:
    """Every verdict's edit of `script` (whose text is `text`), each checked to compile; the diff of them all."""
    label = repository_label(script)
    try:
        source = Source(str(script), text)
    except NoPatch as e:
        return Patch(str(script), label, [], [Skipped(v.id, str(e)) for v in verdicts], "")
    hunks: list[Hunk] = []
    skipped: list[Skipped] = []
    planned: list[tuple[str, Planned]] = []
    for v in verdicts:
        try:
            plan = plan_verdict(source, v, script)
            for other_id, other in planned:
                if _blocks(plan) & _blocks(other) and \
                        plan.lines[0] <= other.lines[1] and other.lines[0] <= plan.lines[1]:
                    raise NoPatch(f"it would edit the lines {other_id}'s edit changes")
            alone = source.rewrite(plan.changes)
            if alone == text:
                raise NoPatch("the script already reads as the fix would make it")
            compile(alone, str(script), "exec")
        except NoPatch as e:
            skipped.append(Skipped(v.id, str(e)))
            continue
        except SyntaxError as e:  # an edit that would not compile is no fix
            skipped.append(Skipped(v.id, f"the edit would not compile ({e.msg})"))
            continue
        planned.append((v.id, plan))
        hunks.append(Hunk(v.id, plan.lines, plan.said, plan.same_arithmetic, plan.recipe, alone))
    every = source.rewrite([c for _, p in planned for c in p.changes]) if planned else text
    return Patch(str(script), label, hunks, skipped, unified(text, every, label) if planned else "")
