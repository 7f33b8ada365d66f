"""`trainspeed hw`: what hardware this is, and what matters about it for training."""

from __future__ import annotations

import argparse

from trainspeed._io import check_writable_file, emit
from trainspeed.cli._common import add_json_option, console_for


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hw", help="report CPU and GPU facts that matter for training",
                       description="Report the CPU (generation, cores, threads, ISA) and each GPU "
                                   "(tier, generation, VRAM, bf16, peaks, PCIe).")
    add_json_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from trainspeed.hardware.report import detect_hardware
    from trainspeed.report.json import dumps, hardware_dict

    if args.json:
        check_writable_file(args.json)
    report = detect_hardware()
    if args.json:
        emit(args.json, dumps(hardware_dict(report)))
    console_for(args).print(report)  # the report renders itself (report/views.py)
    return 0
