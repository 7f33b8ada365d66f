"""The `trainspeed` command line: `main(argv) -> int`, one module per subcommand."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from trainspeed import __version__
from trainspeed.cli import compare, demo, doctor, hw, memory, sweep
from trainspeed.cli._common import Parser
from trainspeed.errors import UsageError

SUBCOMMANDS = (hw, demo, doctor, memory, sweep, compare)


def build_parser() -> Parser:
    parser = Parser(prog="trainspeed",
                    description="Why is my PyTorch training slow, and what exactly should I change?")
    parser.add_argument("--version", action="version", version=f"trainspeed {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 ok, 2 bad usage or input, 130 interrupted)."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
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
