"""Every verdict the rules make, as the doctor's short screen shows it: a title in words, one line of evidence, a fix,
a prediction or the reason there is none, and at most five lines of 80 columns with room for `--try`'s figure.

`tests/conftest.py` watches every Verdict that trainspeed's own code makes during any test (the rules' tests on
recorded runs, the golden views, the planted examples run in-process) and fails the test that made one that breaks
this."""

from __future__ import annotations

import importlib
import re
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from trainspeed.cli import build_parser, parse
from trainspeed.diagnose.tried import TriedLever
from trainspeed.diagnose.verdict import YOUR_SCRIPT, Verdict
from trainspeed.errors import UsageError
from trainspeed.report.doctor_brief import MOST_LINES, WIDTH, verdict_lines

NAMED_ONLY = ("trainspeed doctor --try", "trainspeed explain")
"""Commands a verdict may name without their script or report: the doctor's own, run on what it was run on."""
STAND_INS = {YOUR_SCRIPT: "examples/too_many_threads.py", "FILE.py:FACTORY": "model.py:build"}
"""What the user puts where a command names their script or model factory: a script and a factory of ours."""


def command_problems(text: str) -> list[str]:
    """Each `trainspeed ...` command in backticks in `text` that would not run as printed (its stand-ins for the
    user's script and factory put in): the CLI's parser refuses it."""
    found = []
    for command in re.findall(r"`(trainspeed [^`]*)`", text):
        if command.startswith(NAMED_ONLY):
            continue
        typed = command
        for placeholder, value in STAND_INS.items():
            typed = typed.replace(placeholder, value)
        try:
            args = parse(build_parser(), shlex.split(typed)[1:])
            check = getattr(importlib.import_module(f"trainspeed.cli.{args.command}"), "check", None)
            if check is not None:  # what the command checks before it runs anything
                check(args)
        except (UsageError, SystemExit) as e:
            found.append(f"the command `{command}` does not run: {e}")
    return found


def problems(v: Verdict) -> list[str]:
    """What is wrong with `v`'s short view (nothing: [])."""
    found = [f"no {what}" for what, given in (("title", v.title), ("brief", v.brief)) if not given]
    found += command_problems(v.action) + command_problems(v.fix)
    if not v.fix and v.lever is None:
        found.append("no fix")
    if v.predicted_speedup is None and not v.unpredicted:
        found.append("no prediction and no reason why")
    # the widest cases: a verdict ranked 10th, with a whole-script figure, and with what `--try` measured of its lever
    lines = verdict_lines(v, 10, whole=9.99 if v.predicted_speedup else None)
    if v.lever is not None and v.predicted_speedup:
        tried = TriedLever(v.id, v.lever, v.predicted_speedup, 10.25, (8.75, 12.5), [1.0], [0.1])
        lines = max(lines, verdict_lines(v, 10, whole=9.99, tried=tried), key=len)
    if len(lines) > MOST_LINES:
        found.append(f"{len(lines)} lines")
    found += [f"a line of {len(line)} columns" for line in lines if len(line) > WIDTH]
    return [f"{v.id}: {p}" for p in found] + (["    " + line for line in lines] if found else [])


def _maker(depth: int) -> str:
    """The module that made the verdict being built: the first caller outside dataclasses (`replace`)."""
    frame: Any = sys._getframe(depth)
    while frame is not None and frame.f_globals.get("__name__") == "dataclasses":
        frame = frame.f_back
    return frame.f_globals.get("__name__", "") if frame is not None else ""


@contextmanager
def watched() -> Iterator[list[Verdict]]:
    """The verdicts trainspeed's rules make while inside: those of `trainspeed.diagnose` (a framework's words over a
    verdict made by hand in a test are not the rules')."""
    made: list[Verdict] = []
    original = Verdict.__init__

    def init(self: Verdict, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        if _maker(2).startswith("trainspeed.diagnose") and (self.title or _maker(2) != "trainspeed.diagnose.rules.frameworks"):
            made.append(self)

    Verdict.__init__ = init  # type: ignore[method-assign]
    try:
        yield made
    finally:
        Verdict.__init__ = original  # type: ignore[method-assign]
