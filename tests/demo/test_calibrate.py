"""The demo's short timed start: the epochs it chooses, the threads the load leaves, the row they get."""

from __future__ import annotations

import itertools

from trainspeed.demo.calibrate import MIN_EPOCHS, START_S, epochs_for, free_threads, measure_start, run_weight
from trainspeed.demo.result import Start
from trainspeed.demo.variants import VARIANTS
from trainspeed.names import SEED_EPOCHS
from trainspeed.workloads.iris import load_iris_split


def test_epochs_fill_the_budget_in_round_figures() -> None:
    runs = run_weight(VARIANTS, 1)
    assert runs == 4.25  # four loops of the seed's cost and trainspeed.fit's replay at a quarter of it
    assert epochs_for(260.0, runs, SEED_EPOCHS) == SEED_EPOCHS  # a quiet 2-core machine: the seed's 20,000
    assert epochs_for(1_976.0, runs, SEED_EPOCHS) == 2000  # 24 s / 4.25 / 1.976 ms = 2,858
    assert epochs_for(20_000.0, runs, SEED_EPOCHS) == 200  # 282 in hundreds
    assert epochs_for(200_000.0, runs, SEED_EPOCHS) == MIN_EPOCHS  # never too few to chunk
    assert epochs_for(1.0, runs, 500) == 500  # never more than asked


def test_free_threads_are_the_cores_the_others_leave() -> None:
    assert free_threads(2, 1.7, 2) == 1
    assert free_threads(2, 0.3, 2) == 2
    assert free_threads(16, 6.0, 16) == 10
    assert free_threads(2, 3.0, 2) == 1  # never none
    assert free_threads(8, None, 8) == 8  # unread: as torch has them


def test_a_row_of_its_own_only_where_the_start_ran_much_faster() -> None:
    start = Start("cpu", 3000, {2: 20_000.0, 1: 1_100.0}, threads=2, others_cores=1.7, cores=2)
    assert start.best_threads == 1 and start.extra_threads == 1
    close = Start("cpu", 3000, {2: 1_300.0, 1: 1_100.0}, threads=2, others_cores=0.8, cores=2)
    assert close.extra_threads is None
    assert Start("cpu", 3000, {2: 300.0}, threads=2, others_cores=0.0, cores=2).extra_threads is None


def test_the_start_is_timed_on_the_clock_it_is_given() -> None:
    ticks = itertools.count(step=0.001)  # 1 ms a reading of the clock, five epochs between readings
    start = measure_start("cpu", load_iris_split(), 5, SEED_EPOCHS, now=lambda: next(ticks))
    per_epoch_us = 1e3 / 5
    assert abs(start.us_per_epoch[start.threads] - per_epoch_us) < 1e-6
    assert start.epochs == SEED_EPOCHS and START_S > 0.5
