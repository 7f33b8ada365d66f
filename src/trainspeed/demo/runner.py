"""Run the seed experiment on every requested device, in every variant, interleaved.

Every (device, variant) arm trains its own model through the same epochs, but the arms take
turns chunk by chunk (A1 B1 C1 D1 A2 B2 ...), so slow phases of a shared machine hit every arm
alike, and each arm's chunk times give a paired spread for comparing arms. A chunk's time is
wall time with the device synchronised before and after it; syncs inside are counted.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence

import torch

from trainspeed import names
from trainspeed.demo.calibrate import Start, measure_start, run_weight
from trainspeed.demo.explain import explain
from trainspeed.demo.result import DemoResult, DemoRun, row_name
from trainspeed.demo.variants import LEARNING_RATE, VARIANTS, LoopOutput, make_loop
from trainspeed.threads import intra_op_threads
from trainspeed.watch.syncs import SyncCounter
from trainspeed.workloads.iris import IrisSplit, load_iris_split, make_iris_mlp

SEED_EPOCHS = names.SEED_EPOCHS  # the seed's num_epochs
CHUNKS = 20  # turns per arm: enough pairs for a spread, few enough to cost nothing
WARMUP_EPOCHS = 50

Progress = Callable[[str, str, int, int, float], None]
"""on_progress(row, variant, epochs_done, epochs_total, seconds_so_far): after each chunk of one arm; the row is the
device ("cpu", "cuda") or a CPU row at other threads ("cpu, 1 thread")."""


def chunk_edges(epochs: int, chunks: int = CHUNKS) -> list[int]:
    """Epoch boundaries of the chunks: 0 = e0 < e1 < ... < en = epochs."""
    edges = sorted({round(i * epochs / chunks) for i in range(chunks + 1)})
    return edges


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _warm_up(device: torch.device, data: IrisSplit) -> None:
    """First calls on a device pay one-off costs (CUDA context, cuBLAS handles); pay them untimed."""
    model = make_iris_mlp(seed=1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    criterion = torch.nn.CrossEntropyLoss()
    for _ in range(WARMUP_EPOCHS):
        loss = criterion(model(data.x_train), data.y_train)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    _sync(device)


class _Arm:
    def __init__(self, device: torch.device, variant: str, data: IrisSplit, epochs: int,
                 threads: int | None = None) -> None:
        self.device, self.variant, self.data, self.threads = device, variant, data, threads
        self.model = make_iris_mlp(seed=0).to(device)
        self.loop = make_loop(variant, self.model, data.x_train, data.y_train, epochs)
        self.chunks: list[float] = []
        self.syncs: Counter[str] = Counter()


def run_demo(devices: Sequence[str], epochs: int | None = SEED_EPOCHS, variants: Sequence[str] = VARIANTS,
             on_progress: Progress | None = None, now: Callable[[], float] = time.perf_counter,
             on_start: Callable[[list[Start]], None] | None = None) -> DemoResult:
    """Run every variant on every device (names as torch accepts them: "cpu", "cuda"). `epochs=None`: as many as a
    short timed start says make about a minute (`calibrate`), and on a CPU whose cores other processes hold, the
    seed's loop also at the threads they leave, as a row of its own; `on_start` hears the starts before the runs."""
    cpu_data = load_iris_split()
    prepared = [(torch.device(name), cpu_data.to(torch.device(name))) for name in devices]
    for device, data in prepared:
        _warm_up(device, data)
    starts: list[Start] = []
    if epochs is None:
        weight = run_weight(variants, len(devices))
        starts = [measure_start(device.type, data, weight, SEED_EPOCHS, now=now) for device, data in prepared]
        epochs = min(s.epochs for s in starts)
        if on_start is not None:
            on_start(starts)
    arms: list[_Arm] = []
    for device, data in prepared:
        arms += [_Arm(device, v, data, epochs) for v in variants]
        extra = next((s.extra_threads for s in starts if s.device == device.type), None)
        if extra is not None and "seed" in variants:
            arms.append(_Arm(device, "seed", data, epochs, threads=extra))

    edges = chunk_edges(epochs)
    outputs: dict[int, LoopOutput] = {}
    with SyncCounter() as counter:
        for start, stop in zip(edges, edges[1:]):
            for arm in arms:
                last = stop == epochs
                _sync(arm.device)
                before = counter.by_op.copy()
                with intra_op_threads(arm.threads):
                    t0 = now()
                    arm.loop.run(start, stop)
                    if last:
                        outputs[id(arm)] = arm.loop.finish()  # sync_free's one transfer is part of the run
                    _sync(arm.device)
                    arm.chunks.append(now() - t0)
                arm.syncs.update(counter.by_op - before)
                if on_progress is not None:
                    on_progress(row_name(arm.device.type, arm.threads), arm.variant, stop, epochs, sum(arm.chunks))

    runs = [_result(arm, outputs[id(arm)], epochs) for arm in arms]
    names = [torch.device(d).type for d in devices]
    return DemoResult(epochs=epochs, devices=names, runs=runs, explanation=explain(runs, starts),
                      torch_threads=torch.get_num_threads(), starts=starts)


def _result(arm: _Arm, out: LoopOutput, epochs: int) -> DemoRun:
    # After the clock: reading results costs the run nothing.
    with torch.no_grad():
        predicted = arm.model(arm.data.x_test).argmax(dim=1)
        accuracy = (predicted == arm.data.y_test).float().mean().item()
    seconds = sum(arm.chunks)
    return DemoRun(
        device=arm.device.type, variant=arm.variant, epochs=epochs, seconds=seconds,
        us_per_epoch=seconds / epochs * 1e6, syncs=sum(arm.syncs.values()), syncs_by_op=dict(arm.syncs),
        final_loss=arm.loop.loss.item(), test_accuracy=accuracy,
        chunk_seconds=arm.chunks, losses=out.losses, recorded_epochs=out.recorded_epochs,
        log_lines=out.log_lines, strategy=getattr(arm.loop, "strategy", ""), threads=arm.threads,
    )
