"""`doctor --fix`'s patch shown: where it was written and how to apply it, each verdict's edit or why there is
none, and the diff (coloured on a terminal); and its part of the JSON report."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.text import Text

from trainspeed.fix.result import Hunk, Patch


def _lines(h: Hunk) -> str:
    return f"line{'s' if '-' in h.span else ''} {h.span}"


def patch_view(patch: Patch) -> list[RenderableType]:
    """Where the patch went and each verdict's edit or why there is none (the diff: `diff_text`)."""
    out: list[RenderableType] = []
    if patch.written:
        out.append(Text(f"Patch of {patch.label} written to {patch.written}: apply it with `git apply {patch.written}` "
                        f"(or `patch -p1 < {patch.written}`) in the script's repository; nothing is changed until then",
                        style="bold"))
    elif not patch.hunks:
        out.append(Text(f"No patch of {patch.label}: no verdict's fix is an edit it can make", style="bold"))
    for h in patch.hunks:
        recipe = f"; changes the recipe: {h.recipe}" if h.recipe else ""
        out.append(Text(f"  {h.verdict}, {_lines(h)}: {h.said}{recipe}"))
    for s in patch.skipped:
        out.append(Text(f"  {s.verdict}: no patch: {s.reason}", style="dim"))
    return out


_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def diff_text(patch: Patch) -> Text:
    """The diff, its added lines green and its removed ones red on a terminal: print it with soft_wrap, so that no
    line is cut and what is copied applies."""
    text = Text()
    for line in patch.diff.splitlines(keepends=True):
        text.append(line, style=next((style for head, style in _STYLES if line.startswith(head)), ""))
    return text


def patch_dict(patch: Patch) -> dict[str, Any]:
    """The JSON report's "patch" (docs/json.md)."""
    return {"script": patch.script, "label": patch.label, "written": patch.written, "diff": patch.diff,
            "hunks": [{"verdict": h.verdict, "lines": list(h.lines), "said": h.said,
                       "same_arithmetic": h.same_arithmetic, "recipe": h.recipe} for h in patch.hunks],
            "skipped": [{"verdict": s.verdict, "reason": s.reason} for s in patch.skipped]}
