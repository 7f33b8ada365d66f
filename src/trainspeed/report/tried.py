"""`doctor --try`'s table, in the terminal (rich) and as JSON (docs/json.md, "tried")."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from trainspeed.diagnose.tried import NotTried, Tried, TriedLever


def measured_words(row: TriedLever) -> str:
    """"1.42x [1.31, 1.55]", "failed: ...", or why nothing was measured."""
    if row.failed:
        return row.failed
    if row.measured is None:
        return "not measured (no round finished)"
    interval = f" [{row.interval[0]:.2f}, {row.interval[1]:.2f}]" if row.interval else " (one round: no interval)"
    return f"{row.measured:.2f}x{interval}"


def applied_words(row: TriedLever) -> str:
    """What the lever changes in the recipe, the losses' check, what the doctor then names first."""
    lever = row.lever
    parts = []
    if lever.recipe:
        parts.append(f"changes the recipe: {lever.recipe}")
    if row.losses is not None:
        parts.append(f"losses: {row.losses.text}" + (
            " (expected the same)" if lever.same_arithmetic and not row.losses.same and row.losses.plain_repeat
            and row.losses.counts[0] == row.losses.counts[1] else ""))
    if row.after:
        parts.append(f"first verdict then: {row.after}")
    return "; ".join(parts)


def edit_place(edit: NotTried) -> str:
    """"at train.py:42", or "of the script" where the verdict names no line."""
    return f"at {edit.site}" if edit.site else "of the script"


WIDE = 100
"""Below this many columns each lever's line to paste goes under the table, not in a column of its own (where a
paste such as `torch.set_num_threads(2)` would fold mid-word)."""


class TriedRows:
    """The tried levers: verdict | predicted | measured [95%] | applied as where the console is WIDE, else the first
    three with "applied as" in the line under the table that also gives the recipe, the losses and what came next."""

    def __init__(self, rows: list[TriedLever]) -> None:
        self.rows = rows

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wide = options.max_width >= WIDE
        table = Table(box=box.SIMPLE, show_edge=False, pad_edge=False)
        table.add_column("verdict", no_wrap=True)
        table.add_column("predicted", no_wrap=True)
        table.add_column("measured [95%]", min_width=19)
        if wide:
            table.add_column("applied as", ratio=1, overflow="fold")
        for row in self.rows:
            predicted = f"{row.predicted:.2f}x" if row.predicted else "-"
            table.add_row(row.verdict, predicted, measured_words(row), *([row.lever.paste] if wide else []))
        yield table
        for row in self.rows:
            said = applied_words(row)
            words = ([] if wide else [f"applied as {row.lever.paste}"]) + ([said] if said else [])
            if words:
                yield Text(f"  {row.verdict}: {'; '.join(words)}")


def tried_view(t: Tried) -> list[RenderableType]:
    """The "Tried" table (`TriedRows`), then the edits not tried."""
    parts: list[RenderableType] = []
    rounds = f"{t.rounds} round{'s' if t.rounds != 1 else ''}"
    steps = f"{t.steps} steps each" if t.steps else "each to the script's end"
    if t.rows:
        parts.append(Text(f"Tried ({rounds} of alternated runs, {steps}, {t.seconds:.0f} s in all; measured: "
                          f"{t.timed}):", style="bold"))
        parts.append(TriedRows(t.rows))
    for edit in t.edits:
        parts.append(Text(f"not tried: {edit.verdict} needs an edit {edit_place(edit)}: {edit.action}", style="dim"))
    if t.interrupted:
        parts.append(Text("interrupted (Ctrl-C): the table holds the rounds finished until then", style="yellow"))
    parts += [Text(f"note: {n}", style="yellow") for n in t.notes]
    return parts


def tried_dict(t: Tried) -> dict[str, Any]:
    """The "tried" object of doctor.json."""
    return {
        "rounds": t.rounds, "steps": t.steps, "seconds": t.seconds, "interrupted": t.interrupted, "timed": t.timed,
        "levers": [{"verdict": r.verdict, "kind": r.lever.kind, "settings": r.lever.settings, "applied_as": r.lever.paste,
                    "recipe": r.lever.recipe, "predicted_speedup": r.predicted, "measured_speedup": r.measured,
                    "interval": list(r.interval) if r.interval else None, "plain_s": r.plain_s, "lever_s": r.lever_s,
                    "within_25_percent": r.within, "failed": r.failed, "first_verdict_after": r.after,
                    "folder": r.folder,
                    "losses": None if r.losses is None else {
                        "compared": r.losses.compared, "same": r.losses.same, "max_relative": r.losses.max_relative,
                        "plain_repeat": r.losses.plain_repeat, "counts": list(r.losses.counts),
                        "text": r.losses.text}}
                   for r in t.rows],
        "edits": [{"verdict": e.verdict, "action": e.action, "site": e.site} for e in t.edits],
        "notes": t.notes,
    }
