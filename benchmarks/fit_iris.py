"""The figures behind BENCHMARKS.md's fit table: trainspeed.fit vs the seed's loop on the Iris job.

    python benchmarks/fit_iris.py                          # CPU, 20 000 and 200 000 epochs
    python benchmarks/fit_iris.py --caches fresh           # empty compile caches: a first-ever run
    python benchmarks/fit_iris.py --device cuda --epochs 20000

Each ratio comes from one run of this script on one device: the seed's loop (loss.item() every
epoch, a print every 100) and fit, alternated `--repeats` times, each end to end (capture and
compile included), with the final losses compared. `steady` is the per-step time of the runner
fit spent most steps in, from its own timings. Lightning's Trainer (installed with the dev extra)
runs the same job once at the smallest epoch count.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import statistics
import sys
import tempfile
import time


def _fresh_caches() -> None:
    root = tempfile.mkdtemp(prefix="trainspeed-bench-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "inductor")
    os.environ["XDG_CACHE_HOME"] = os.path.join(root, "xdg")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", default="20000,200000")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--caches", choices=("as-is", "fresh"), default="as-is",
                        help="fresh: empty Inductor and trainspeed caches, as on a first run")
    parser.add_argument("--no-lightning", action="store_true")
    args = parser.parse_args()
    if args.caches == "fresh":
        _fresh_caches()  # before torch reads them

    import torch
    from bench_common import measured_on
    from torch import nn

    from trainspeed import fit
    from trainspeed.demo.variants import make_loop
    from trainspeed.hardware import detect_hardware
    from trainspeed.workloads.iris import load_iris_split, make_iris_mlp

    device = torch.device(args.device)
    data = load_iris_split().to(device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def seed(epochs: int) -> tuple[float, float]:
        model = make_iris_mlp(0).to(device)
        loop = make_loop("seed", model, data.x_train, data.y_train, epochs)
        sync()
        start = time.perf_counter()
        loop.run(0, epochs)
        sync()
        return time.perf_counter() - start, loop.losses[-1]

    def fast(epochs: int):  # noqa: ANN202
        model = make_iris_mlp(0).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        sync()
        start = time.perf_counter()
        result = fit(model, (data.x_train, data.y_train), nn.CrossEntropyLoss(), opt, epochs, device=device)
        sync()
        return time.perf_counter() - start, result

    hw = detect_hardware()
    gpus = ", ".join(g.name for g in hw.gpu.gpus) or "no GPU"
    print(f"{measured_on(hw)}, {gpus}; device {device}; torch {hw.torch_version}, "
          f"Python {platform.python_version()}; caches {args.caches}.\n")
    print("| epochs | seed s | fit s | end-to-end | seed µs/step | fit steady µs/step | steady | fit strategy "
          "| capture s | compile s | final loss seed / fit |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|")
    notes = []
    for epochs in (int(e) for e in args.epochs.split(",")):
        seeds, fits = [], []
        for _ in range(args.repeats):  # alternated: drift hits both
            seeds.append(seed(epochs))
            fits.append(fast(epochs))
        seed_s = statistics.median(s for s, _ in seeds)
        fit_s = statistics.median(s for s, _ in fits)
        result = fits[-1][1]
        main = max((r for r in result.timings.steps_by_runner if r != "capture"),
                   key=result.timings.steps_by_runner.__getitem__)
        steady = result.timings.seconds_by_runner[main] / result.timings.steps_by_runner[main]
        seed_step = seed_s / epochs
        print(f"| {epochs} | {seed_s:.2f} | {fit_s:.2f} | {seed_s / fit_s:.2f}× | {seed_step * 1e6:.0f} | "
              f"{steady * 1e6:.1f} | {seed_step / steady:.1f}× | {result.strategy.name} | "
              f"{result.timings.capture_s:.3f} | {result.timings.compile_s:.1f} | "
              f"{seeds[-1][1]:.6f} / {result.losses[-1]:.6f} |")
        notes.append((epochs, [s for s, _ in seeds], [s for s, _ in fits], result.strategy.explain))
        sys.stdout.flush()

    if not args.no_lightning:
        epochs = min(int(e) for e in args.epochs.split(","))
        seconds, loss = _lightning(epochs, data, device)
        print(f"\nLightning Trainer, same job ({epochs} epochs, one full batch per epoch, logging and "
              f"checkpoints off): {seconds:.2f} s, final loss {loss:.6f}.")
    for epochs, seed_runs, fit_runs, explain in notes:
        print(f"\n{epochs} epochs: seed runs {', '.join(f'{s:.2f}' for s in seed_runs)} s; "
              f"fit runs {', '.join(f'{s:.2f}' for s in fit_runs)} s. fit's reasons (last run):")
        for line in explain:
            print(f"- {line}")


def _lightning(epochs: int, data, device):  # noqa: ANN001, ANN202
    import logging

    import lightning as L
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from trainspeed.workloads.iris import make_iris_mlp

    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)

    class Iris(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.model = make_iris_mlp(0)
            self.last = torch.zeros(())

        def training_step(self, batch, _):  # noqa: ANN001, ANN202
            x, y = batch
            loss = nn.functional.cross_entropy(self.model(x), y)
            self.last = loss.detach()
            return loss

        def configure_optimizers(self):  # noqa: ANN202
            return torch.optim.SGD(self.parameters(), lr=0.01)

    x, y = data.x_train.cpu(), data.y_train.cpu()
    loader = DataLoader(TensorDataset(x, y), batch_size=len(x))
    module = Iris()
    trainer = L.Trainer(max_epochs=epochs, accelerator="gpu" if device.type == "cuda" else "cpu", devices=1,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    start = time.perf_counter()
    with io.StringIO() as sink:
        old, sys.stdout = sys.stdout, sink
        try:
            trainer.fit(module, loader)
        finally:
            sys.stdout = old
    return time.perf_counter() - start, module.last.item()


if __name__ == "__main__":
    main()
