"""The figures behind BENCHMARKS.md's memory table: predicted vs measured peak, torchinfo beside.

    python benchmarks/memory_accuracy.py                 # CPU: zoo x {sgd, adam} x {fp32, bf16} x {1, 8, 64}
    python benchmarks/memory_accuracy.py --device cuda   # against torch.cuda.max_memory_allocated

torchinfo (a dev dependency) is run on the same model and input; its "Estimated Total Size" is
input + forward/backward pass + params (it has no gradients or optimizer state).
"""

from __future__ import annotations

import argparse
import datetime
import time

import torch

from trainspeed.hardware import detect_hardware
from trainspeed.memory import estimate_memory, measure_memory
from trainspeed.memory.estimate import EstimateError
from trainspeed.workloads import ZOO


def _maker(name: str):  # type: ignore[no-untyped-def]
    e = ZOO[name]
    if e.input_dtype.is_floating_point:
        return lambda b: torch.randn(b, *e.input_shape)
    return lambda b: torch.randint(0, e.input_high, (b, *e.input_shape))


def _torchinfo_total(name: str, batch: int, device: str) -> int | None:
    try:
        import torchinfo
    except ImportError:
        return None
    model = ZOO[name].factory().to(device)
    stats = torchinfo.summary(model, input_data=_maker(name)(batch).to(device), verbose=0)
    return int(stats.total_input + stats.total_output_bytes + stats.total_param_bytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--models", default=",".join(ZOO))
    args = parser.parse_args()

    hw = detect_hardware()
    where = hw.gpu.gpus[0].name if args.device == "cuda" and hw.gpu.gpus else f"{hw.cpu.model} ({hw.cpu.microarchitecture})"
    print(f"Measured {datetime.date.today()} on {args.device}: {where}; torch {hw.torch_version}.\n")
    print("| model | optimizer | amp | batch | predicted | measured | error | torchinfo | torchinfo error | estimate time |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    errors: list[float] = []
    failed = unestimated = 0
    for name in args.models.split(","):
        for opt in ("sgd", "adam"):
            for amp in (None, "bf16"):
                for batch in (1, 8, 64):
                    t0 = time.perf_counter()
                    try:
                        est = estimate_memory(ZOO[name].factory, _maker(name), batch, optimizer=opt, amp=amp,
                                              device=args.device)
                    except EstimateError as e:
                        unestimated += 1
                        print(f"| {name} | {opt} | {amp or 'fp32'} | {batch} | no estimate: {str(e)[:90]} | | | | | |")
                        continue
                    seconds = time.perf_counter() - t0
                    try:
                        real = measure_memory(ZOO[name].factory, _maker(name), batch, optimizer=opt, amp=amp,
                                              device=args.device).peak_bytes
                    except RuntimeError as e:
                        failed += 1
                        print(f"| {name} | {opt} | {amp or 'fp32'} | {batch} | {est.total_bytes:,} | "
                              f"real step fails: {str(e).splitlines()[0][:60]} | | | | {seconds:.2f} s |")
                        continue
                    err = (est.total_bytes - real) / real * 100
                    errors.append(err)
                    ti = _torchinfo_total(name, batch, args.device)
                    ti_cell = f"{ti:,} | {(ti - real) / real * 100:+.1f}%" if ti else "- | -"
                    flag = " **" if abs(err) > 5 else ""
                    print(f"| {name} | {opt} | {amp or 'fp32'} | {batch} | {est.total_bytes:,} | {real:,} | "
                          f"{err:+.2f}%{flag} | {ti_cell} | {seconds:.2f} s |")
    inside = sum(abs(e) <= 5 for e in errors)
    print(f"\n{inside} of {len(errors)} measured cases within +/-5% "
          f"(largest error {max(errors, key=abs):+.2f}%); {failed} cases whose real step fails on this device; "
          f"{unestimated} cases the estimator could not replay.")


if __name__ == "__main__":
    main()
