"""`trainspeed explain ID`: one verdict of a kept doctor report with everything it rests on: its whole evidence and
action, the lever, what `--try` measured, the machine's load, the probes' readings and the report's notes. Read from
the report's JSON (docs/json.md), so that it works on any report kept with `--out` or `--json`, torch or not."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.text import Text

Doc = dict[str, Any]


def verdict_ids(doc: Doc) -> list[str]:
    """The ids of the report's verdicts, most important first."""
    return [str(v.get("id")) for v in doc.get("verdicts") or [] if isinstance(v, dict)]


def find_verdict(doc: Doc, verdict_id: str) -> tuple[int, Doc] | None:
    """The verdict of that id (its rank from 1, and its object); the first where several share the id."""
    for i, v in enumerate(doc.get("verdicts") or [], 1):
        if isinstance(v, dict) and v.get("id") == verdict_id:
            return i, v
    return None


def explained(doc: Doc, verdict_id: str, source: str) -> Doc:
    """`trainspeed explain --json`: the verdict's object as the report holds it, with what `--try` measured of it and
    the machine's load and probes it was judged with (docs/json.md, "explain")."""
    found = find_verdict(doc, verdict_id)
    assert found is not None  # the command checks the id first
    rank, v = found
    load = {key: doc.get(key) for key in ("others_cpu_cores", "threads_wait_ms", "steal_share", "threads_one_cpu_share")}
    return {"schema": "trainspeed.explain/1", "report": source, "rank": rank, "verdict": v,
            "tried": _tried_rows(doc, verdict_id),
            "load": load, "probe": doc.get("probe") or {}, "notes": doc.get("notes") or []}


def _gain(v: Doc) -> str:
    predicted, whole = v.get("predicted_speedup"), v.get("predicted_process_speedup")
    if not predicted:
        return f"no prediction: {v.get('unpredicted') or 'no model of this cause predicts a speed-up'}"
    words = f"predicted {predicted:.2f}x on the training loop" + (f", {whole:.2f}x on the whole script" if whole else "")
    return words + " (a prediction from the measurements, not a measurement)"


def _tried_rows(doc: Doc, verdict_id: str) -> list[Doc]:
    """The rows of the report's `tried.levers` for this verdict (none where `--try` did not try it)."""
    return [row for row in (doc.get("tried") or {}).get("levers") or []
            if isinstance(row, dict) and row.get("verdict") == verdict_id]


def _tried(doc: Doc, verdict_id: str) -> list[str]:
    """What `--try` measured of this verdict's lever, where it ran."""
    rounds = (doc.get("tried") or {}).get("rounds")
    lines = []
    for row in _tried_rows(doc, verdict_id):
        if row.get("failed"):
            lines.append(f"--try: {row['failed']}")
            continue
        measured, interval = row.get("measured_speedup"), row.get("interval")
        if measured is None:
            lines.append("--try: not measured (no round finished)")
            continue
        span = f" [{interval[0]:.2f}, {interval[1]:.2f}] (95%)" if interval else " (one round: no interval)"
        losses = (row.get("losses") or {}).get("text")
        lines.append(f"--try measured {measured:.2f}x{span} over {rounds} rounds"
                     + (f"; losses: {losses}" if losses else ""))
    return lines


def _machine(doc: Doc) -> list[str]:
    """The machine's load while the steps were measured, where other processes were seen."""
    lines = []
    others = doc.get("others_cpu_cores")
    if others is not None:
        lines.append(f"other processes kept {others:.2f} CPUs busy while the steps were measured")
    waits = doc.get("threads_wait_ms")
    if waits:
        lines.append(f"the process's threads waited {waits:.2f} ms a step for a CPU, summed over its threads "
                     "(Linux's run-queue counts); where other processes were busy, the verdicts about the script are "
                     "judged on each phase less the training thread's wait in it")
    turns = doc.get("threads_one_cpu_share")
    if turns:
        lines.append(f"in {turns:.0%} of the samples with two of the run's threads runnable, both were on one CPU")
    steal = doc.get("steal_share")
    if steal:
        lines.append(f"the VM's steal time: {steal:.1%}")
    return lines


def _value(value: Any) -> str:
    """A JSON value as a reader takes it: floats to four figures, objects and lists inside out."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return str(value)


def _probes(doc: Doc) -> str | None:
    """The machine's constants measured after the run, as the report holds them (docs/json.md, "probe")."""
    probe = doc.get("probe") or {}
    said = [f"{name} {_value(value)}" for name, value in probe.items() if value not in (None, {}, [])]
    return "; ".join(said) if said else None


def _para(text: str) -> Padding:
    """A paragraph indented by two columns, its wrapped lines too."""
    return Padding(Text(text), (0, 0, 0, 2))


def explain_view(doc: Doc, verdict_id: str, source: str) -> Group:
    """Everything one verdict of the report `doc` (read from `source`) rests on."""
    found = find_verdict(doc, verdict_id)
    assert found is not None  # the command checks the id first
    rank, v = found
    title = v.get("title") or verdict_id
    steps = doc.get("steps") or {}
    parts: list[RenderableType] = [
        Text(f"{verdict_id}: {title}", style="bold cyan"),
        Text(f"verdict {rank} of {len(verdict_ids(doc))} in the report of {doc.get('script') or 'a watched loop'}"
             + (f", {doc['when']}" if doc.get("when") else "") + f" ({source})", style="dim"),
        Text(f"the run: {steps.get('measured')} steps measured, median {_value(steps.get('median_ms'))} ms"),
        Text(_gain(v))]
    parts += [Text(line) for line in _tried(doc, verdict_id)]
    if v.get("brief"):
        parts.append(Text(f"in one line: {v['brief']}"))
    parts += [Text("evidence:", style="bold"), _para(str(v.get("evidence", "")))]
    parts += [Text("action:", style="bold"), _para(str(v.get("action", "")))]
    if v.get("fix"):
        parts.append(Text(f"fix{' at ' + v['site'] if v.get('site') else ''}: {v['fix']}"))
    lever = v.get("lever")
    if isinstance(lever, dict):
        recipe = f"; it changes the recipe: {lever['recipe']}" if lever.get("recipe") else ""
        parts.append(Text(f"lever: {lever.get('paste')} (`trainspeed doctor --try` applies it and times it{recipe})"))
    if machine := _machine(doc):
        parts.append(Text("the machine:", style="bold"))
        parts += [_para(line) for line in machine]
    if probes := _probes(doc):
        parts += [Text("measured after the run (the probes):", style="bold"), _para(probes)]
    notes = [str(n) for n in doc.get("notes") or []]
    parts += [Text(f"note: {n}", style="yellow") for n in notes]
    return Group(*parts)
