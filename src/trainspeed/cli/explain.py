"""`trainspeed explain ID [DIR]`: the whole evidence of one verdict of a kept doctor report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trainspeed._io import check_writable_file, emit
from trainspeed.cli._common import add_json_option, console_for
from trainspeed.errors import UsageError

DEPTH = 3
"""Folders below DIR searched for the newest doctor.json (`--out DIR` makes DIR/doctor-<stamp>/doctor.json)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="the whole evidence of one verdict of a kept doctor report",
                       description="Print everything one verdict of a `trainspeed doctor` report rests on: its whole "
                                   "evidence and action, the lever, what --try measured, the machine's load, the "
                                   "probes' readings and the report's notes.")
    p.add_argument("verdict", metavar="ID", help="the verdict's id, as the doctor prints it in brackets "
                                                 "(checkpoint_heavy, input_bound, ...)")
    p.add_argument("where", nargs="?", default=".", metavar="DIR",
                   help="a folder written by `doctor --out`, a folder holding such folders (the newest report in "
                        "it), or a doctor.json (default: the newest report under the current folder)")
    add_json_option(p)
    p.set_defaults(run=run)


def report_path(given: str) -> Path:
    """The doctor.json `given` names: the file, a folder's own doctor.json, or the newest one up to DEPTH folders
    below it."""
    path = Path(given)
    if path.is_file():
        return path
    if not path.is_dir():
        raise UsageError(f"{given}: no such file or folder")
    if (path / "doctor.json").is_file():
        return path / "doctor.json"
    found = [p for depth in range(1, DEPTH + 1) for p in path.glob("/".join(["*"] * depth) + "/doctor.json")
             if p.is_file()]
    if not found:
        raise UsageError(f"{given}: no doctor report in this folder or below it (`trainspeed doctor --out DIR` "
                         "keeps one)")
    return max(found, key=lambda p: p.stat().st_mtime)


def run(args: argparse.Namespace) -> int:
    from trainspeed.cli.compare import read_report
    from trainspeed.diagnose.compare import CompareError, check_report
    from trainspeed.report.explain import explain_view, explained, find_verdict, verdict_ids

    path = report_path(args.where)
    doc = read_report(path, args.where)
    try:
        check_report(doc, str(path))
    except CompareError as e:
        raise UsageError(str(e)) from None
    if find_verdict(doc, args.verdict) is None:
        ids = verdict_ids(doc)
        raise UsageError(f"{path}: no verdict {args.verdict!r} in this report"
                         + (f" (its verdicts: {', '.join(ids)})" if ids else " (it has no verdicts)"))
    if args.json:
        check_writable_file(args.json)
        emit(args.json, json.dumps(explained(doc, args.verdict, str(path)), indent=2, allow_nan=False) + "\n")
        if args.json == "-":
            return 0
    console_for(args).print(explain_view(doc, args.verdict, str(path)))
    return 0
