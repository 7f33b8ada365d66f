"""`trainspeed demo`: the seed lesson - a tiny Iris MLP, slower on a GPU than on a CPU, and why."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from trainspeed._io import check_writable_file, emit, new_run_dir, write_atomic
from trainspeed.cli._common import add_json_option, console_for, line_console, positive_int
from trainspeed.errors import UsageError
from trainspeed.names import SEED_EPOCHS

if TYPE_CHECKING:
    from rich.progress import TaskID

    from trainspeed.demo.result import DemoResult, Start

KNOWN_DEVICES = ("cpu", "cuda")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="reproduce the seed lesson: Iris on CPU vs GPU, four ways of recording the loss, and trainspeed.fit",
                       description="Train the seed's Iris MLP on every device in four variants (seed, "
                                   "record_every_200, no_record, sync_free) and with trainspeed.fit, count host "
                                   "reads, explain the timings.")
    p.add_argument("--epochs", type=positive_int, default=None,
                   help="full-batch epochs per run (default: as many as a short timed start says make a demo of "
                        f"about a minute here; {SEED_EPOCHS} as in the seed)")
    p.add_argument("--devices", default=None,
                   help="comma-separated devices among cpu,cuda (default: cpu, plus cuda when available)")
    p.add_argument("--out", default="trainspeed-out", metavar="DIR",
                   help="parent folder; each run writes a new subfolder there (default ./trainspeed-out)")
    add_json_option(p)
    p.set_defaults(run=run)


def parse_devices(text: str | None, cuda_available: bool) -> list[str]:
    """The --devices list, checked: known names only, CUDA only when present."""
    if text is None:
        return ["cpu", "cuda"] if cuda_available else ["cpu"]
    names = [d.strip().lower() for d in text.split(",") if d.strip()]
    if not names:
        raise UsageError("--devices is empty: give cpu, cuda or cpu,cuda")
    for name in names:
        if name not in KNOWN_DEVICES:
            raise UsageError(f"--devices: unknown device {name!r} (choose from {', '.join(KNOWN_DEVICES)})")
    if "cuda" in names and not cuda_available:
        import torch

        why = "this PyTorch is a CPU-only build" if torch.version.cuda is None else "no CUDA device is visible"
        raise UsageError(f"--devices cuda: CUDA is not available ({why})")
    return list(dict.fromkeys(names))


def start_lines(starts: list[Start]) -> list[str]:
    """What the short timed start measured, said before the runs: the load, the threads, the epochs chosen."""
    from trainspeed.diagnose.rules.brief import plural

    out = []
    for s in starts:
        per = ", ".join(f"{us:,.1f} us with {plural(k, 'thread')}" for k, us in s.us_per_epoch.items())
        load = (f"; other processes kept {s.others_cores:.1f} of {s.cores} cores busy"
                if s.others_cores is not None and s.others_cores >= 0.25 else "")
        out.append(f"{s.device}: a seed epoch took {per} in a short start{load}: {s.epochs} epochs per run")
    return out


def _write_outputs(folder: Path, result: DemoResult, payload: dict) -> dict[str, str]:
    from trainspeed.report.json import dumps
    from trainspeed.report.plots import demo_loss_png, demo_timing_png

    files = {"json": "demo.json", "loss_png": "loss_curves.png", "timing_png": "timing.png"}
    write_atomic(folder / files["loss_png"], demo_loss_png(result))
    write_atomic(folder / files["timing_png"], demo_timing_png(result))
    for r in result.runs:
        if r.log_lines:
            name = f"train-log-{r.device}-{r.variant}.txt"
            write_atomic(folder / name, "\n".join(r.log_lines) + "\n")
    write_atomic(folder / files["json"], dumps({**payload, "files": files}))
    return files


def run(args: argparse.Namespace) -> int:
    import torch
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from trainspeed.demo.doctor_section import DOCTOR_EPOCHS, doctor_on_seed
    from trainspeed.demo.runner import run_demo
    from trainspeed.hardware.report import detect_hardware
    from trainspeed.report.json import demo_dict, dumps
    from trainspeed.report.text import demo_view

    devices = parse_devices(args.devices, torch.cuda.is_available())
    if args.json:
        check_writable_file(args.json)
    folder = new_run_dir(args.out, "demo")
    console = console_for(args)
    hardware = detect_hardware()

    lines = line_console()
    say = (lambda text: lines.print(text, markup=False)) if lines is not None else (lambda _text: None)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        tasks: dict[tuple[str, str], TaskID] = {}
        quarter = [0]

        def on_start(starts: list[Start]) -> None:
            for line in start_lines(starts):
                progress.console.print(line, markup=False, highlight=False)

        def on_progress(row: str, variant: str, done: int, total: int, seconds: float) -> None:
            key = (row, variant)
            if key not in tasks:
                tasks[key] = progress.add_task(f"{row:>4} {variant:<17}", total=total)
            progress.update(tasks[key], completed=done)
            if lines is None:
                return
            if done == total:
                say(f"{row} {variant}: {total} epochs in {seconds:.2f} s ({seconds / total * 1e6:.1f} us/epoch)")
            elif done * 4 >= total * (quarter[0] + 1) and (row, variant) == next(iter(tasks)):
                quarter[0] = done * 4 // total
                say(f"{done} of {total} epochs on every run so far ({row} {variant}: {seconds:.2f} s)")

        result = run_demo(devices, epochs=args.epochs, on_progress=on_progress, on_start=on_start)

    say(f"the doctor watches the seed's loop for {min(result.epochs, DOCTOR_EPOCHS)} steps")
    doctor = {d: doctor_on_seed(d, min(result.epochs, DOCTOR_EPOCHS)) for d in devices}
    payload = demo_dict(result, hardware, doctor=doctor)
    files = _write_outputs(folder, result, payload)
    if args.json:
        emit(args.json, dumps({**payload, "files": {k: str(folder / v) for k, v in files.items()}}))
    console.print(demo_view(result, str(folder), doctor))
    return 0

