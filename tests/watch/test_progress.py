"""watch/progress.py and report/live.py: the live line's figures read from a running watcher (the step, the median,
the phase split, the leading suspicion), the steps a second over the last seconds, and the words of the line."""

from __future__ import annotations

import torch

from trainspeed.report.live import live_words
from trainspeed.watch.progress import Progress, Rate, progress_of
from trainspeed.watch.session import Watcher
from trainspeed.watch.window import WindowSpec


def test_progress_reads_the_running_watcher() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(32, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    readings: list[Progress] = []
    with Watcher(window=WindowSpec(10, 200)) as w:
        for step in range(120):
            opt.zero_grad()
            model(torch.randn(64, 32)).pow(2).mean().backward()
            opt.step()
            if step in (4, 99):
                readings.append(progress_of(w))
    before, inside = readings
    assert (before.step, before.watching, before.window, before.opens_at) == (5, False, "10:200", 10)
    assert before.median_ms is None and before.shares == {}
    assert inside.step == 100 and inside.watching and inside.median_ms is not None and inside.median_ms > 0
    assert {"forward", "backward", "optimizer"} <= set(inside.shares)
    assert 0.9 < sum(inside.shares.values()) < 1.1  # the detailed steps' phases, each of the steps' time


def test_the_leading_suspicion_is_an_edge_phase_of_15_percent_or_more() -> None:
    p = Progress(412, True, median_ms=24.1, shares={"backward": 0.41, "forward": 0.30, "data": 0.22, "other": 0.07})
    assert p.suspect == ("data", 0.22)
    assert live_words(p, 38.24) == ("trainspeed: step 412 | 38.2 steps/s | median 24.10 ms | backward 41% forward 30% "
                                    "data 22% | suspect: data 22%")
    calm = Progress(9, True, median_ms=1.0, shares={"backward": 0.6, "forward": 0.3, "sync": 0.1})
    assert calm.suspect is None and live_words(calm, None).endswith("| no wait stands out yet")
    assert live_words(Progress(3, False, "50:150", 50), None) == "trainspeed: step 3; the window 50:150 opens at step 50"


def test_the_rate_is_steps_a_second_over_the_last_seconds() -> None:
    rate = Rate(span_s=5.0)
    assert rate.read(0, now=0.0) is None
    assert rate.read(100, now=1.0) == 100.0
    for t in range(2, 7):  # 100 steps a second for six seconds, then 10 a second
        rate.read(100 * t, now=float(t))
    for t in range(7, 12):
        rate.read(600 + 10 * (t - 6), now=float(t))
    assert rate.read(660, now=12.0) == 10.0  # the readings of the last five seconds
    assert rate.read(0, now=13.0) is None  # counted anew (a window opened): the rate starts over
