"""The fast loop's decisions, from recorded numbers."""

from __future__ import annotations

from trainspeed.loop import plan


def test_capture_needs_enough_steps_left_to_repay_it() -> None:
    assert not plan.decide_capture(100, 400e-6).take  # saves >= 10 ms, costs ~80 ms
    taken = plan.decide_capture(20_000, 400e-6)
    assert taken.take and "20000 steps left" in taken.reason and "predicted" in taken.reason


def test_a_replay_is_kept_only_when_it_measured_faster() -> None:
    assert plan.decide_replay(130e-6, 390e-6).take
    assert "3.00×" in plan.decide_replay(130e-6, 390e-6).reason
    assert not plan.decide_replay(400e-6, 390e-6).take


def test_compile_prediction_without_history_is_labelled_predicted() -> None:
    p = plan.predict_compile(130e-6, None)
    assert p.compile_s == plan.COLD_COMPILE_S and "predicted" in p.source
    assert abs(p.step_s - 130e-6 * plan.COMPILED_STEP_SHARE) < 1e-12


def test_compile_prediction_uses_what_an_earlier_run_measured() -> None:
    warm = plan.predict_compile(130e-6, {"cold_s": 20.0, "warm_s": 2.5, "step_s": 36e-6})
    assert (warm.compile_s, warm.step_s) == (2.5, 36e-6) and "measured" in warm.source
    first = plan.predict_compile(130e-6, {"cold_s": 20.0, "step_s": 36e-6})
    assert abs(first.compile_s - 20.0 * plan.WARM_COMPILE_SHARE) < 1e-9


def test_compile_is_taken_only_when_the_steps_left_repay_it() -> None:
    cold = plan.predict_compile(130e-6, None)  # 25 s predicted
    assert not plan.decide_compile(200_000, 130e-6, cold).take  # saves ~18 s < 1.5 x 25 s
    assert plan.decide_compile(2_000_000, 130e-6, cold).take
    warm = plan.CompilePrediction(2.5, 36e-6, "measured")
    assert plan.decide_compile(200_000, 130e-6, warm).take  # saves ~19 s
    assert not plan.decide_compile(20_000, 130e-6, warm).take  # saves ~1.9 s < 3.75 s


def test_the_fastest_thread_count_is_picked_with_its_numbers() -> None:
    d = plan.pick_threads({1: 120e-6, 2: 131e-6})
    assert d.reason.startswith("1 intra-op thread ") and "2: 131 µs" in d.reason


def test_times_read_in_the_unit_a_reader_takes_in() -> None:
    from trainspeed.loop.plan import duration

    # a 29 ms step once read "2.91e+04 µs"
    assert [duration(s) for s in (2.91e-2, 4.12e-4, 3.456e-6, 12.345, 0.0)] == [
        "29.1 ms", "412 µs", "3.46 µs", "12.3 s", "0 µs"]
    d = plan.decide_capture(5, 2.91e-2)
    assert "29.1 ms" in d.reason and "e+" not in d.reason
