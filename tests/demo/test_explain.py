"""The explanation is arithmetic on recorded measurements (GPU rows included, no GPU needed)."""

from __future__ import annotations

import dataclasses

from trainspeed.demo.explain import explain, paired_spread
from trainspeed.demo.result import DemoRun, Start

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
    assert "cost no time this machine can tell apart from its noise" in cpu and "%" not in cpu
    assert not any(line.startswith("CPU: reading") for line in lines)  # no cost, no line to test


def test_linearity_detected_both_ways() -> None:
    lines = explain(_recorded_gpu_and_cpu())
    cuda = next(line for line in lines if line.startswith("CUDA: reading"))
    assert "not linear" in cuda and "waits for all the work queued" in cuda
    # reads that cost 5 us each, the middle run on their line
    linear = [_run("cpu", "seed", 0.2 + 20_200 * 50e-6 / 20, 0.0005),
              _run("cpu", "record_every_200", 0.2 + 300 * 50e-6 / 20, 0.001), _run("cpu", "no_record", 0.2)]
    cpu = next(line for line in explain(linear) if line.startswith("CPU: reading"))
    assert "looks linear" in cpu and "saved 20% of the time" in cpu


def test_a_difference_inside_the_spread_is_said_to_be_none() -> None:
    noisy = [_run("cpu", "seed", 0.20, 0.05), _run("cpu", "sync_free", 0.19)]
    line = next(line for line in explain(noisy) if "sync_free" in line)
    assert "made no measurable difference" in line and "x)" not in line


def _start(others: float | None, per: dict[int, float], epochs: int = 3000) -> Start:
    return Start(device="cpu", epochs=epochs, us_per_epoch=per, threads=2, others_cores=others, cores=2)


def test_the_load_comes_first_with_the_threads_it_leaves() -> None:
    base = dataclasses.replace(_run("cpu", "seed", 0.4, 0.001), epochs=3000)
    one = dataclasses.replace(_run("cpu", "seed", 0.05, 0.002), threads=1)
    lines = explain([base, _run("cpu", "no_record", 0.4, 0.001), one], [_start(1.7, {2: 20_000.0, 1: 1_100.0})])
    assert lines[0].startswith("CPU: other processes kept 1.7 of the 2 cores busy")
    assert "20,000 us with torch's 2 threads and 1,100 us with 1 (18.2x faster)" in lines[0]
    assert 'the row "cpu, 1 thread"' in lines[0] and "torch.set_num_threads(1)" in lines[0]
    assert "with 1 thread the seed's loop took 1.000 s against 8.000 s (8.00x)" in lines[1]
    assert lines[2].startswith("3000 epochs per run, chosen from a short timed start")


def test_a_quiet_start_says_nothing_of_load() -> None:
    lines = explain([_run("cpu", "seed", 0.2)], [_start(0.1, {2: 300.0}, epochs=20_000)])
    assert not any("other processes" in line or "short timed start" in line for line in lines)


def test_disagreeing_losses_are_reported() -> None:
    runs = [_run("cpu", "seed", 0.2, loss=0.5), _run("cpu", "sync_free", 0.2, loss=0.6)]
    assert any("DIFFER" in line for line in explain(runs))


def test_paired_spread() -> None:
    assert paired_spread([1.0]) == 0.0
    assert paired_spread([1.0, 1.0, 1.0]) == 0.0
    assert paired_spread([0.0, 2.0]) > 0
