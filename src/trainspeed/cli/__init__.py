"""The `trainspeed` command line: `main(argv) -> int`, one module per subcommand."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from trainspeed._version import __version__
from trainspeed.cli import compare, demo, doctor, explain, hw, memory, sweep
from trainspeed.cli._common import Parser
from trainspeed.errors import UsageError

SUBCOMMANDS = (hw, demo, doctor, explain, memory, sweep, compare)

SIGNED_VALUE_OPTIONS = {"memory": ("--budget",), "sweep": ("--values", "--batches"), "doctor": ("--window",)}
"""Options, by subcommand, whose value a user may give negative by mistake ("-1GiB"), which argparse would read as a
flag: the value is glued to its option, so that the option's own check answers ("a size must be positive")."""


OPTIONAL_COUNT_OPTIONS = {"doctor": {"--try": "2"}}
"""Options, by subcommand, whose count may be left out (`doctor --try train.py`): where the next word is no number,
the default is glued on (`--try=2`), so that the script's name is not read as the count."""


OPTIONAL_PATH_OPTIONS = {"doctor": {"--fix": (".patch", ".diff")}}
"""Options, by subcommand, whose file may be left out (`doctor --fix train.py`): the next word is the option's file
only where it ends as such a file does (`--fix out.patch`; any name as `--fix=NAME`), else the option is glued to ""
(its default), so that the script's name is not read as the file."""


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _glued(argv: list[str]) -> list[str]:
    """`memory ... --budget -1GiB` as `--budget=-1GiB`, `doctor --try train.py` as `--try=2 train.py`, `doctor --fix
    train.py` as `--fix= train.py`. Only the options of SIGNED_VALUE_OPTIONS, OPTIONAL_COUNT_OPTIONS and
    OPTIONAL_PATH_OPTIONS, of their own subcommand: a script's arguments
    (`doctor train.py ...`) pass as given."""
    command = next((a for a in argv if not a.startswith("-")), None)
    options = SIGNED_VALUE_OPTIONS.get(command or "", ())
    counts = OPTIONAL_COUNT_OPTIONS.get(command or "", {})
    paths = OPTIONAL_PATH_OPTIONS.get(command or "", {})
    if not options and not counts and not paths:
        return argv
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return out + argv[i:]
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if token in paths and not nxt.endswith(paths[token]):
            out.append(f"{token}=")
            i += 1
            continue
        if token in counts and not _looks_numeric(nxt):
            out.append(f"{token}={counts[token]}")
            i += 1
            continue
        if token in options and len(nxt) > 1 and nxt[0] == "-" and (nxt[1].isdigit() or nxt[1] == "."):
            out.append(f"{token}={nxt}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


SCRIPT_AFTER_DASHES = ("sweep",)
"""Commands with a positional before their options (`sweep KNOB`) that take a script after `--`: split off before
argparse, whose REMAINDER would swallow the options after the positional."""


def _script_after_dashes(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """(the command's own arguments, the script and its arguments after the first `--`), for SCRIPT_AFTER_DASHES."""
    if argv[:1] and argv[0] in SCRIPT_AFTER_DASHES and "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, None


def build_parser() -> Parser:
    parser = Parser(prog="trainspeed",
                    description="Why is my PyTorch training slow, and what exactly should I change?")
    parser.add_argument("--version", action="version", version=f"trainspeed {__version__}")
    parser.add_argument("--no-color", action="store_true",
                        help="no colour in the output (NO_COLOR in the environment does the same)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return parser


def parse(parser: Parser, argv: list[str]) -> argparse.Namespace:
    """The command line as the commands read it: a negative value glued to its option, a script after `--` split
    off for SCRIPT_AFTER_DASHES (UsageError where argparse refuses it)."""
    head, script = _script_after_dashes(argv)
    args = parser.parse_args(_glued(head))
    if script is None:
        return args
    return argparse.Namespace(**{**vars(args), "script": script[0] if script else None, "args": script[1:]})


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 2 bad usage or input, 130 interrupted)."""
    parser = build_parser()
    try:
        given = list(sys.argv[1:] if argv is None else argv)
        args = parse(parser, given)
        args.argv = given  # the command line as typed, for the reports that name it
        if args.command is None:
            raise UsageError("missing command (choose from " + ", ".join(m.__name__.rsplit(".", 1)[-1] for m in SUBCOMMANDS) + ")")
        return int(args.run(args))
    except UsageError as e:
        print(f"trainspeed: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("trainspeed: interrupted", file=sys.stderr)
        return 130


def entrypoint() -> None:
    """Console-script entry point."""
    sys.exit(main(sys.argv[1:]))
