"""Pieces every subcommand shares: argument types, the --json option, the console."""

from __future__ import annotations

import argparse
import importlib.util
import os
from typing import Any

from rich.console import Console

from trainspeed.errors import UsageError


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors become one line and exit status 2 (not usage + traceback)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


COUNT_LIMIT = 2**31 - 1
"""The largest count (steps, epochs, a batch's rows, workers) an argument may give: past it torch's int32 indexing and
the loops' counters overflow, and no run of that length finishes."""


def _int_at_least(text: str, minimum: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
    if value > COUNT_LIMIT:
        raise argparse.ArgumentTypeError(f"expected {what} of at most {COUNT_LIMIT}, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _int_at_least(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _int_at_least(text, 0, "a whole number >= 0")


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", default=None,
                        help="write the result object as JSON to PATH ('-' for stdout)")


class ViewConsole(Console):
    """A console whose output, where it is not a terminal (a CI log, a pipe, a file), carries no trailing spaces:
    rich pads a table's lines to the width, which a log shows as noise and a diff as changes."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if self.is_terminal:
            super().print(*objects, **kwargs)
            return
        with self.capture() as captured:
            super().print(*objects, **kwargs)
        self.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
        self.file.flush()


def console_for(args: argparse.Namespace) -> Console:
    """The human view: on stderr when stdout carries the JSON or the script's own output (`doctor --window`, whose
    report comes while the script runs); without colour or any other styling under --no-color or NO_COLOR
    (https://no-color.org); without trailing spaces where it is not a terminal."""
    plain = bool(getattr(args, "no_color", False) or os.environ.get("NO_COLOR"))
    stderr = getattr(args, "json", None) == "-" or getattr(args, "window", None) is not None
    return ViewConsole(stderr=stderr, color_system=None) if plain else ViewConsole(stderr=stderr)


def line_console() -> Console | None:
    """Where a long command says one line per finished arm or phase: stderr, when it is not a terminal (a CI log,
    a pipe), where the progress bars draw nothing. None on a terminal: the bars show it."""
    err = Console(stderr=True, soft_wrap=True)
    return None if err.is_terminal else err


def script_target(args: argparse.Namespace) -> tuple[str, list[str], bool]:
    """The script (or -m module) a command runs, and its arguments: `SCRIPT ARGS`, `-- SCRIPT ARGS`, `-m MODULE ARGS`;
    checked, in one line where it is not there."""
    if args.module:
        script_args = ([args.script] if args.script else []) + list(args.args)
        try:
            found = importlib.util.find_spec(args.module)
        except (ImportError, ValueError):  # a dotted name whose package is missing, or an empty name
            found = None
        if found is None:
            raise UsageError(f"-m {args.module}: no such module")
        return args.module, script_args, True
    if not args.script:
        raise UsageError("give a SCRIPT to run (or -m MODULE)")
    script, script_args = args.script, list(args.args)
    if script_args[:1] == ["--"]:
        script_args = script_args[1:]
    if script == "--":
        if not script_args:
            raise UsageError("give a SCRIPT to run after --")
        script, script_args = script_args[0], script_args[1:]
    from trainspeed.watch.runner import check_script

    return str(check_script(script)), script_args, False
