"""The explanation is arithmetic on recorded measurements (GPU rows included, no GPU needed)."""

from __future__ import annotations

from trainspeed.demo.explain import explain, paired_spread
from trainspeed.demo.result import DemoRun

SYNCS = {"seed": 20_200, "record_every_200": 300, "no_record": 0, "sync_free": 1}


def _run(device: str, variant: str, chunk: float, jitter: float = 0.0, loss: float = 0.06) -> DemoRun:
    chunks = [chunk + (jitter if i % 2 else -jitter) for i in range(20)]
    seconds = sum(chunks)
    n = 20_000
    losses = [loss] * (n if variant in ("seed", "sync_free") else 100 if variant == "record_every_200" else 0)
    return DemoRun(device=device, variant=variant, epochs=n, seconds=seconds, us_per_epoch=seconds / n * 1e6,
                   syncs=SYNCS[variant], syncs_by_op={}, final_loss=loss, test_accuracy=1.0,
                   chunk_seconds=chunks, losses=losses, recorded_epochs=list(range(len(losses))), log_lines=[])


def _recorded_gpu_and_cpu() -> list[DemoRun]:
    # shaped like a launch-bound GPU: every read costs ~20 us, rare reads cost more
    return [
        _run("cpu", "seed", 0.20, 0.001), _run("cpu", "record_every_200", 0.20, 0.001),
        _run("cpu", "no_record", 0.20, 0.001), _run("cpu", "sync_free", 0.21, 0.001),
        _run("cuda", "seed", 0.60, 0.002), _run("cuda", "record_every_200", 0.45, 0.002),
        _run("cuda", "no_record", 0.40, 0.002), _run("cuda", "sync_free", 0.41, 0.002),
    ]


def test_names_the_winner_and_ratio() -> None:
    text = "\n".join(explain(_recorded_gpu_and_cpu()))
    assert "seed: the CPU won, 3.0x faster than the CUDA (200 vs 600 us/epoch)" in text


def test_sync_cost_measured_on_gpu_but_not_on_cpu() -> None:
    lines = explain(_recorded_gpu_and_cpu())
    cuda = next(line for line in lines if line.startswith("CUDA: the seed loop's"))
    cpu = next(line for line in lines if line.startswith("CPU: the seed loop's"))
    assert "cost 33% of its time" in cuda and "4.000 s" in cuda
    assert "no measurable time" in cpu


def test_linearity_detected_both_ways() -> None:
    lines = explain(_recorded_gpu_and_cpu())
    cuda = next(line for line in lines if line.startswith("CUDA: reading"))
    cpu = next(line for line in lines if line.startswith("CPU: reading"))
    assert "not linear" in cuda and "waits for all the work queued" in cuda
    assert "looks linear" in cpu


def test_disagreeing_losses_are_reported() -> None:
    runs = [_run("cpu", "seed", 0.2, loss=0.5), _run("cpu", "sync_free", 0.2, loss=0.6)]
    assert any("DIFFER" in line for line in explain(runs))


def test_paired_spread() -> None:
    assert paired_spread([1.0]) == 0.0
    assert paired_spread([1.0, 1.0, 1.0]) == 0.0
    assert paired_spread([0.0, 2.0]) > 0
