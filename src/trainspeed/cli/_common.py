"""Pieces every subcommand shares: argument types, the --json option, the console."""

from __future__ import annotations

import argparse

from rich.console import Console

from trainspeed.errors import UsageError


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors become one line and exit status 2 (not usage + traceback)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", default=None,
                        help="write the result object as JSON to PATH ('-' for stdout)")


def console_for(args: argparse.Namespace) -> Console:
    """The human view goes to stderr when stdout carries the JSON."""
    return Console(stderr=getattr(args, "json", None) == "-")
