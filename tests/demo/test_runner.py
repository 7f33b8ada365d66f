"""The demo on the CPU with few epochs: same math in every variant, host reads counted exactly."""

from __future__ import annotations

import itertools

import pytest

from trainspeed.demo import VARIANTS, run_demo
from trainspeed.demo.runner import chunk_edges

EPOCHS = 300


@pytest.fixture(scope="module")
def result():  # type: ignore[no-untyped-def]
    return run_demo(["cpu"], epochs=EPOCHS)


def test_every_variant_ran(result) -> None:  # type: ignore[no-untyped-def]
    assert [r.variant for r in result.runs] == list(VARIANTS)
    assert all(r.device == "cpu" and r.epochs == EPOCHS for r in result.runs)


def test_sync_counts(result) -> None:  # type: ignore[no-untyped-def]
    syncs = {r.variant: r.syncs for r in result.runs}
    # seed: item() every epoch + one in each print every 100; every 200: 1 record + 3 prints
    assert syncs == {"seed": EPOCHS + 3, "record_every_200": 1 + 3, "no_record": 0, "sync_free": 1, "fit": 1}
    assert result.run("cpu", "sync_free").syncs_by_op == {"tolist": 1}


def test_same_math_in_every_variant(result) -> None:  # type: ignore[no-untyped-def]
    finals = {r.final_loss for r in result.runs}
    assert len(finals) == 1
    seed, free, every200 = (result.run("cpu", v) for v in ("seed", "sync_free", "record_every_200"))
    assert seed.losses == free.losses and len(seed.losses) == EPOCHS
    fast = result.run("cpu", "fit")
    assert fast.losses == seed.losses and fast.strategy.startswith("cpu:")
    assert every200.recorded_epochs == [200] and every200.losses == [seed.losses[199]]
    assert seed.losses[-1] == seed.final_loss
    assert seed.losses[-1] < seed.losses[0]  # it trains


def test_timings_are_the_sum_of_chunks(result) -> None:  # type: ignore[no-untyped-def]
    for r in result.runs:
        assert len(r.chunk_seconds) == len(chunk_edges(EPOCHS)) - 1
        assert r.seconds == pytest.approx(sum(r.chunk_seconds))
        assert r.us_per_epoch == pytest.approx(r.seconds / EPOCHS * 1e6)
        assert r.seconds > 0


def test_prints_are_kept(result) -> None:  # type: ignore[no-untyped-def]
    assert result.run("cpu", "seed").log_lines[-1].startswith(f"Epoch [{EPOCHS}/{EPOCHS}], Loss: ")
    assert result.run("cpu", "no_record").log_lines == []


def test_explanation_is_computed(result) -> None:  # type: ignore[no-untyped-def]
    text = "\n".join(result.explanation)
    assert "Only the CPU was measured" in text
    assert "bit for bit" in text


def test_chunk_edges_cover_every_epoch() -> None:
    assert chunk_edges(20_000)[:3] == [0, 1000, 2000] and chunk_edges(20_000)[-1] == 20_000
    assert chunk_edges(5) == [0, 1, 2, 3, 4, 5]
    assert chunk_edges(1) == [0, 1]


def test_injected_clock_gives_exact_times() -> None:
    ticks = itertools.count(step=0.5)
    r = run_demo(["cpu"], epochs=40, variants=("no_record",), now=lambda: next(ticks))
    run = r.runs[0]
    assert run.chunk_seconds == [0.5] * 20 and run.seconds == 10.0


def test_progress_reports_every_chunk() -> None:
    seen: list[tuple[str, str, int, int, float]] = []
    run_demo(["cpu"], epochs=40, variants=("seed",), on_progress=lambda *a: seen.append(a))
    assert seen[-1][:4] == ("cpu", "seed", 40, 40) and len(seen) == 20
    assert seen[-1][4] >= seen[0][4] > 0  # the arm's seconds so far


def test_without_epochs_a_timed_start_sizes_the_run() -> None:
    ticks = itertools.count(step=0.1)  # a clock that says 20 ms an epoch: 24 s / 20 ms = 1,200 epochs
    heard: list[list] = []
    r = run_demo(["cpu"], epochs=None, variants=("no_record",), now=lambda: next(ticks), on_start=heard.append)
    assert r.epochs == 1200 and r.runs[0].epochs == 1200
    assert heard == [r.starts] and r.starts[0].device == "cpu" and r.starts[0].epochs == 1200


def test_the_doctor_on_the_demo_charges_no_line_of_trainspeed_or_its_caller() -> None:
    from trainspeed.demo.doctor_section import doctor_on_seed

    report = doctor_on_seed("cpu", 600)
    assert report.verdicts
    for v in report.verdicts:  # the demo's loop is trainspeed's code, and this test is what calls it
        assert v.site is None and v.id != "host_code_heavy", v
