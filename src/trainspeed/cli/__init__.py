"""The `trainspeed` command line: `main(argv) -> int`, one module per subcommand."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from trainspeed._version import __version__
from trainspeed.cli import compare, demo, doctor, explain, hw, memory, sweep
from trainspeed.cli._common import Parser
from trainspeed.errors import UsageError

SUBCOMMANDS = (hw, demo, doctor, explain, memory, sweep, compare)

SIGNED_VALUE_OPTIONS = {"memory": ("--budget",)}
"""Options, by subcommand, whose value a user may give negative by mistake ("-1GiB"), which argparse would read as a
flag: the value is glued to its option, so that the option's own check answers ("a size must be positive")."""


OPTIONAL_COUNT_OPTIONS = {"doctor": {"--try": "2"}}
"""Options, by subcommand, whose count may be left out (`doctor --try train.py`): where the next word is no number,
the default is glued on (`--try=2`), so that the script's name is not read as the count."""


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _glued(argv: list[str]) -> list[str]:
    """`memory ... --budget -1GiB` as `--budget=-1GiB`, and `doctor --try train.py` as `--try=2 train.py`. Only the
    options of SIGNED_VALUE_OPTIONS and OPTIONAL_COUNT_OPTIONS, of their own subcommand: a script's arguments
    (`doctor train.py ...`) pass as given."""
    command = next((a for a in argv if not a.startswith("-")), None)
    options = SIGNED_VALUE_OPTIONS.get(command or "", ())
    counts = OPTIONAL_COUNT_OPTIONS.get(command or "", {})
    if not options and not counts:
        return argv
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return out + argv[i:]
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 2 bad usage or input, 130 interrupted)."""
    parser = build_parser()
    try:
        given = list(sys.argv[1:] if argv is None else argv)
        args = parser.parse_args(_glued(given))
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
