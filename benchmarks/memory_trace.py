"""Where a memory estimate parts from the measured peak: the step's ops one by one, the real run's against the
replay's, on a CUDA device.

    python benchmarks/memory_trace.py --case transformer-encoder-gpt [--amp bf16] [--batch 8] [--json trace.json]

Cases are workloads.attention's. Each op of the measured (second) step is listed with what it kept (bytes live
after it less before it) and what it rose to while it ran (its outputs and its scratch), as the CUDA caching
allocator counted them and as the estimate's replay counted them; the op sequences are aligned by name, and the
rows that differ are printed, the biggest first.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import trainspeed.memory.estimate as estimate_module
from trainspeed.memory.estimate import Estimator
from trainspeed.memory.measure import build_real
from trainspeed.memory.optimizers import optimizer_factory
from trainspeed.memory.step import StepSetup, default_loss, input_maker, training_step
from trainspeed.memory.tracker import LiveBytes
from trainspeed.workloads.attention import ATTENTION_CASES

Row = tuple[str, str, int, int]
"""(op, phase, bytes kept, bytes risen to during the op)."""


class _RealOps(TorchDispatchMode):
    def __init__(self, device: torch.device) -> None:
        super().__init__()
        self.device, self.rows, self.phase = device, list[Row](), "input"

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        torch.cuda.reset_peak_memory_stats(self.device)
        before = torch.cuda.memory_allocated(self.device)
        out = func(*args, **(kwargs or {}))
        rise = torch.cuda.max_memory_allocated(self.device) - before
        self.rows.append((str(func), self.phase, torch.cuda.memory_allocated(self.device) - before, rise))
        return out


def real_rows(case: str, batch: int, amp: str | None, device: torch.device) -> list[Row]:
    factory, inputs = ATTENTION_CASES[case]
    torch.manual_seed(0)
    _, make_optimizer = optimizer_factory("adamw", device.type)
    setup = StepSetup(input_maker(inputs), default_loss, amp, device.type)
    model = build_real(factory, device, False)
    optimizer = make_optimizer(model.parameters())
    training_step(model, optimizer, setup, batch, device)
    torch.cuda.synchronize(device)
    mode = _RealOps(device)

    def mark(phase: str) -> None:
        mode.phase = phase

    with mode:
        training_step(model, optimizer, setup, batch, device, mark)
    torch.cuda.synchronize(device)
    return mode.rows


def replay_rows(case: str, batch: int, amp: str | None, device: torch.device) -> tuple[list[Row], int]:
    factory, inputs = ATTENTION_CASES[case]
    estimator = Estimator(factory, inputs, "adamw", amp, device=device, warm_batch=batch)
    rows: list[Row] = []

    class Recording(LiveBytes):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            self.op_scratch, before = 0, self.live
            out = super().__torch_dispatch__(func, types, args, kwargs)
            if not str(func).startswith("prim."):  # the fake mode's own questions (prim.device), not the step's ops
                rows.append((str(func), self.phase, self.live - before, self.live - before + self.op_scratch))
            return out

        def _scratch(self, nbytes: int) -> None:
            self.op_scratch += nbytes
            super()._scratch(nbytes)

    estimate_module.LiveBytes = Recording  # type: ignore[misc]
    try:
        tracker, _, _ = estimator.replay.step(batch, record_layers=False)
    finally:
        estimate_module.LiveBytes = LiveBytes  # type: ignore[misc]
    return rows, tracker.peak


def compare(real: list[Row], replayed: list[Row]) -> dict[str, Any]:
    matcher = difflib.SequenceMatcher(a=[r[0] for r in real], b=[r[0] for r in replayed], autojunk=False)
    differing: list[dict[str, Any]] = []
    unmatched: list[dict[str, Any]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for a, b in zip(real[i1:i2], replayed[j1:j2]):
                if a[2] != b[2] or a[3] != b[3]:
                    differing.append({"op": a[0], "phase": a[1], "real_kept": a[2], "replay_kept": b[2],
                                      "real_rise": a[3], "replay_rise": b[3]})
        else:
            unmatched.append({"real": [r[0] for r in real[i1:i2]], "replay": [r[0] for r in replayed[j1:j2]],
                              "real_kept": sum(r[2] for r in real[i1:i2]),
                              "replay_kept": sum(r[2] for r in replayed[j1:j2])})
    differing.sort(key=lambda d: -max(abs(d["real_kept"] - d["replay_kept"]), abs(d["real_rise"] - d["replay_rise"])))
    return {"ops_real": len(real), "ops_replay": len(replayed), "differing": differing, "unmatched": unmatched}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=list(ATTENTION_CASES), required=True)
    parser.add_argument("--amp", choices=["bf16", "fp16"], default=None)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--json", help="write the whole comparison here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("memory_trace.py: needs a CUDA device (the CPU replay is checked op by op in tests/memory)", file=sys.stderr)
        raise SystemExit(2)
    device = torch.device("cuda")
    real = real_rows(args.case, args.batch, args.amp, device)
    replayed, peak = replay_rows(args.case, args.batch, args.amp, device)
    found = compare(real, replayed)
    print(f"{args.case} {args.amp or 'fp32'} batch {args.batch}: {found['ops_real']} ops real, "
          f"{found['ops_replay']} replayed; replay peak {peak:,}")
    for d in found["differing"][:12]:
        print(f"  {d['phase']:>9} {d['op']}: kept {d['real_kept']:,} real / {d['replay_kept']:,} replay; "
              f"rose {d['real_rise']:,} / {d['replay_rise']:,}")
    for u in found["unmatched"][:8]:
        print(f"  unmatched: real {u['real'][:4]} ({u['real_kept']:,} kept) / replay {u['replay'][:4]} "
              f"({u['replay_kept']:,} kept)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(found, f, indent=1)


if __name__ == "__main__":
    main()
