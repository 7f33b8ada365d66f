"""`doctor --fix`'s result: each verdict's edit of the script (a `Hunk`) or the reason there is none (`Skipped`),
and the unified diff of them all (`Patch`). Plain data: the report holds it without reading libcst."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hunk:
    """A verdict's edit of the script: the lines of the script it changes, what it does, whether the script computes
    the same numbers after it, what it changes in the recipe, and the script with this edit alone (a --try arm)."""

    verdict: str
    lines: tuple[int, int]
    said: str
    same_arithmetic: bool
    recipe: str | None
    patched: str

    @property
    def span(self) -> str:
        """Its lines as said: "32", "13-40"."""
        a, b = self.lines
        return str(a) if a == b else f"{a}-{b}"


@dataclass(frozen=True)
class Skipped:
    """A verdict with no edit: "no patch: <reason>"."""

    verdict: str
    reason: str


@dataclass(frozen=True)
class Patch:
    """The fixes of a diagnosis as an edit of its script: `diff` (every hunk; "" where none) names the script by
    `label`, its path in its repository (or from the working folder), as `git diff` would."""

    script: str
    label: str
    hunks: list[Hunk]
    skipped: list[Skipped]
    diff: str
    written: str | None = None
    """Where the diff was written (None: not written, no hunk)."""

    def hunk(self, verdict: str) -> Hunk | None:
        return next((h for h in self.hunks if h.verdict == verdict), None)
