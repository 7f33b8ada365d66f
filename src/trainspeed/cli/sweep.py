"""`trainspeed sweep KNOB --workload SPEC`: controlled experiments over one knob of a training loop."""

from __future__ import annotations

import argparse
import io
import re
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from trainspeed._io import check_writable_file, emit, write_atomic
from trainspeed.cli._common import add_json_option, console_for, positive_int
from trainspeed.errors import UsageError
from trainspeed.report.json import dumps, sweep_dict
from trainspeed.report.plots import sweep_png
from trainspeed.report.text import sweep_view
from trainspeed.sweep.knobs import KNOBS
from trainspeed.sweep.result import Trial
from trainspeed.sweep.sweep import DEFAULT_REPEATS, DEFAULT_STEPS, DEFAULT_WARMUP, execute, plan
from trainspeed.workloads.catalog import BUILTINS


def add_parser(sub: argparse._SubParsersAction) -> None:
    knobs = "; ".join(f"{name}: {k.summary}" for name, k in KNOBS.items())
    p = sub.add_parser("sweep", help="turn one knob of a training loop and measure each value",
                       description="Controlled experiments: warm-up, repeats interleaved across values, median and "
                                   "95% bootstrap interval per value, 'no measurable difference' when intervals "
                                   "overlap. Trials are appended to DIR/trials.jsonl; an interrupted sweep resumes. "
                                   f"Knobs - {knobs}.")
    p.add_argument("knob", metavar="KNOB", help=f"one of {', '.join(KNOBS)}")
    p.add_argument("--workload", required=True, metavar="SPEC",
                   help=f"a built-in ({', '.join(BUILTINS)}; sized like mlp:width=1024,batch=256) or "
                        "FILE.py:FACTORY returning a trainspeed.Workload")
    p.add_argument("--values", metavar="A,B,C", help="values to try (default: the knob's values for this machine)")
    p.add_argument("--steps", type=positive_int, default=DEFAULT_STEPS,
                   help=f"optimizer steps per timed trial (default {DEFAULT_STEPS})")
    p.add_argument("--repeats", type=positive_int, default=DEFAULT_REPEATS,
                   help=f"timed trials per value (default {DEFAULT_REPEATS})")
    p.add_argument("--warmup", type=positive_int, default=DEFAULT_WARMUP,
                   help=f"untimed steps when each value's loop is built (default {DEFAULT_WARMUP})")
    p.add_argument("--device", choices=("cpu", "cuda"), default=None, help="where the loop trains (default cpu)")
    p.add_argument("--save-every", type=positive_int, default=None, metavar="N",
                   help="checkpoint-save: save every N steps (default steps/5)")
    p.add_argument("--batches", default=None, metavar="B1,B2,...",
                   help="crossover: the batch sizes of the grid (default 16,128,1024)")
    p.add_argument("--gpu", default="RTX 3080", metavar="NAME",
                   help="device/crossover without CUDA: the GPU whose step time is predicted (default RTX 3080)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="folder for trials.jsonl, sweep.json, sweep.png, table.txt "
                        "(default trainspeed-out/sweep-KNOB-WORKLOAD; an existing journal there is resumed)")
    p.add_argument("--fresh", action="store_true", help="do not resume: set an existing journal aside and start over")
    add_json_option(p)
    p.set_defaults(run=run)


def _batches(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise UsageError(f"--batches: expected positive integers separated by commas, got {text!r}")
    return sorted(set(values))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", text).strip("_")[:80] or "workload"


def run(args: argparse.Namespace) -> int:
    if args.json:
        check_writable_file(args.json)
    knob, ctx = plan(args.knob, args.workload, args.values, args.steps, args.device, args.save_every,
                     _batches(args.batches), args.gpu)
    folder = Path(args.out or Path("trainspeed-out") / f"sweep-{knob.name}-{_slug(args.workload)}")
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {folder}: not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    journal = folder / "trials.jsonl"
    if args.fresh and journal.exists():
        journal.rename(folder / f"trials-{time.strftime('%Y%m%d-%H%M%S')}.jsonl")  # set aside, never deleted

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(f"{knob.name} on {args.workload}", total=None)

        def on_trial(t: Trial, done: int, total: int) -> None:
            progress.update(task, completed=done, total=total, description=f"{knob.name} = {t.value}")

        result = execute(knob, ctx, args.repeats, args.warmup, journal, on_trial)

    payload = sweep_dict(result)
    files = {"journal": journal.name, "json": "sweep.json", "png": "sweep.png", "table": "table.txt"}
    write_atomic(folder / files["png"], sweep_png(result))
    view = sweep_view(result)
    plain = Console(width=110, record=True, file=io.StringIO())  # renders the table as plain text
    plain.print(view)
    write_atomic(folder / files["table"], plain.export_text())
    write_atomic(folder / files["json"], dumps({**payload, "files": files}))
    if args.json:
        emit(args.json, dumps(payload))
    console = console_for(args)
    console.print(view)
    console.print(f"Wrote {folder}")
    return 0
