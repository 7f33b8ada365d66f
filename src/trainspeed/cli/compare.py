"""`trainspeed compare A B`: two doctor runs side by side, and a gate for CI (`--fail-if-slower PCT`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from trainspeed._io import check_writable_file, emit
from trainspeed.cli._common import add_json_option, console_for
from trainspeed.errors import UsageError
from trainspeed.names import COMPARE_NOISE


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare two doctor runs: faster, slower or no real difference",
                       description="Compare two `trainspeed doctor` reports (doctor.json files, or folders written "
                                   "by --out, each holding one run or several of one script): the step and each "
                                   "phase with 95% intervals from the runs' own samples, the verdicts that "
                                   "appeared or went away, and one line that judges.")
    p.add_argument("a", metavar="A", help="the first run: a doctor.json, a folder holding one, or a folder of "
                                          "several runs written by --out")
    p.add_argument("b", metavar="B", help="the second run (or runs), judged against A")
    p.add_argument("--fail-if-slower", metavar="PCT", type=_percent, default=None,
                   help="exit 1 when B's step is slower than A's by more than PCT percent, with confidence")
    p.add_argument("--noise", metavar="PCT", type=_percent, default=COMPARE_NOISE * 100,
                   help=f"the run-to-run noise band a change must clear to be called real (default {COMPARE_NOISE * 100:.0f}%%)")
    p.add_argument("--label", action="append", default=[], metavar="A=NAME",
                   help="a short name for a side in the output (--label A=before --label B=after); default: the "
                        "folder's or file's name")
    add_json_option(p)
    p.set_defaults(run=run)


def _labels(given: list[str], a: str, b: str) -> tuple[str, str]:
    """The sides' short names: --label A=... / B=..., else each run's folder (or file) name."""
    names = {"A": _short(a), "B": _short(b)}
    if names["A"] == names["B"] and Path(a).parent.name != Path(b).parent.name:  # doctor --try's runs: by their folder
        names = {"A": f"{Path(a).parent.name}/{names['A']}", "B": f"{Path(b).parent.name}/{names['B']}"}
    for text in given:
        side, sep, name = text.partition("=")
        if side.strip().upper() not in names or not sep or not name.strip():
            raise UsageError(f"--label: expected A=NAME or B=NAME, got {text!r}")
        names[side.strip().upper()] = name.strip()
    return names["A"], names["B"]


def _short(given: str) -> str:
    path = Path(given)
    if path.name == "doctor.json" and path.parent.name:
        return path.parent.name
    return path.name or given


def _percent(text: str) -> float:
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage, got {text!r}") from None
    if not math.isfinite(value):  # a gate at NaN never fires; a noise band of inf calls nothing real
        raise argparse.ArgumentTypeError(f"expected a finite percentage, got {text}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a percentage >= 0, got {text}")
    return value


def report_paths(given: str) -> list[Path]:
    """The doctor.json files that `given` names: the file, a folder's doctor.json, or every run folder that
    `trainspeed doctor --out` made inside it (several runs of one script: compared as one side)."""
    path = Path(given)
    if path.is_file():
        return [path]
    if path.is_dir():
        if (path / "doctor.json").is_file():
            return [path / "doctor.json"]
        runs = sorted(path.glob("doctor-*/doctor.json"))
        if runs:
            return runs
        raise UsageError(f"{given}: no doctor.json in this folder")
    raise UsageError(f"{given}: no such file or folder")


def read_report(path: Path, given: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{given}: cannot read {path.name} ({e.__class__.__name__})") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a trainspeed report (a JSON {type(data).__name__}, not an object)")
    return data


def load(given: str) -> list[dict[str, Any]]:
    return [read_report(path, given) for path in report_paths(given)]


def run(args: argparse.Namespace) -> int:
    from trainspeed.diagnose.compare import CompareError, compare
    from trainspeed.report.json import compare_dict, dumps

    if args.json:
        check_writable_file(args.json)
    a_name, b_name = _labels(args.label, args.a, args.b)
    a, b = load(args.a), load(args.b)
    try:
        result = compare(a, b, a_name, b_name, noise=args.noise / 100)
    except CompareError as e:
        raise UsageError(str(e)) from None
    result = dataclasses.replace(result, a_path=args.a, b_path=args.b)
    if args.fail_if_slower is not None and result.step.low is None:
        raise UsageError("--fail-if-slower needs both runs' step samples; " + "; ".join(result.notes))
    if args.json:
        emit(args.json, dumps(compare_dict(result)))
    console_for(args).print(result)  # the comparison renders itself (report/views.py)
    if args.fail_if_slower is not None and result.slower_than(args.fail_if_slower):
        console_for(args).print(f"{b_name} is slower than {a_name} by more than {args.fail_if_slower:g}% with "
                                "confidence: failing (--fail-if-slower)", style="red")
        return 1
    return 0
