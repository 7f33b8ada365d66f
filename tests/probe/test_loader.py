"""The loader probes: a worker's handover of batches shaped like the run's, and a TensorDataset's batch taken whole."""

from __future__ import annotations

import torch

from trainspeed.probe.loader import PROBE_BYTES, Handover, batched_ms, handover_ms, item_bytes, item_like


def test_item_like_keeps_the_structure_of_a_collated_batch_one_row_each() -> None:
    batch = (torch.randn(8, 3, 5), torch.arange(8), ["a"] * 8, torch.zeros(3))
    item = item_like(batch, 8)
    assert isinstance(item, tuple) and len(item) == 2  # the strings and the tensor of another length left out
    assert item[0].shape == (3, 5) and item[0].dtype == torch.float32
    assert item[1].shape == () and item[1].dtype == torch.int64
    nested = item_like({"x": torch.ones(4, 2, dtype=torch.float16), "meta": {"id": torch.arange(4)}, "name": "n"}, 4)
    assert set(nested) == {"x", "meta"} and nested["x"].shape == (2,) and nested["x"].dtype == torch.float16
    assert nested["meta"]["id"].shape == ()
    assert item_like(["only", "strings"], 2) is None and item_like(torch.zeros(3), 8) is None
    assert item_bytes(item) == 3 * 5 * 4 + 8


def test_a_worker_hands_batches_over_in_measured_time() -> None:
    got = handover_ms((torch.zeros(16), torch.zeros((), dtype=torch.int64)), 32, batches=6)
    assert isinstance(got, Handover)
    assert 0 < got.main_ms <= got.wall_ms < 1000


def test_a_batch_too_large_or_nothing_to_hand_over_is_not_probed() -> None:
    big = torch.zeros(PROBE_BYTES // 4 + 1)
    assert handover_ms((big,), 4) is None
    assert handover_ms(None, 32) is None


def test_a_tensor_dataset_batch_taken_whole_is_timed_on_zeros_of_its_row_shape() -> None:
    item = (torch.zeros(64), torch.zeros((), dtype=torch.int64))
    ms = batched_ms(item, 64, rows=20000, batches=6)
    assert ms is not None and 0 < ms < 1000
    assert batched_ms(item, 64, rows=64 * 3) is None  # under the settling batches and one timed one
    assert batched_ms({"x": torch.zeros(4)}, 64, rows=20000) is None  # a TensorDataset gives tuples


def test_no_worker_is_started_where_it_could_not_be_forked(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # spawn and forkserver import the main module again: a watched script without a __main__ guard would rerun
    monkeypatch.setattr("sys.platform", "darwin")
    assert handover_ms((torch.zeros(16),), 32, batches=2) is None


def test_a_run_of_batches_that_waited_for_a_core_counts_less_its_wait() -> None:
    """Beside busy processes a batch's time holds the waits for a core of the training thread and of the worker
    that makes it: each run of batches is taken less its wait (here a stand-in: every run waited three quarters of
    its time), as the other probes take theirs."""
    import time

    calls, started, spans = [0], [0.0], []

    def waited() -> float:  # a call before each run of batches, one after it (its wait)
        calls[0] += 1
        if calls[0] % 2 == 1:
            started[0] = time.perf_counter()
            return 0.0
        spans.append(time.perf_counter() - started[0])
        return 0.75 * spans[-1]

    item = (torch.zeros(64), torch.zeros((), dtype=torch.int64))
    ms = batched_ms(item, 64, rows=20000, batches=6, waited=waited)
    assert calls[0] == 2 * 3  # three runs of two batches
    assert ms is not None and 0.0 < ms <= 0.25 * max(spans) / 2 * 1e3


def test_the_handover_counts_the_workers_wait_for_a_core_too(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import os

    import pytest

    from trainspeed.load import waits as run_queue

    if run_queue.thread_wait() is None:
        pytest.skip("this system does not count a thread's wait for a core")
    added: list[int] = []
    original = run_queue.ThreadWait.add_process

    def add_process(self: run_queue.ThreadWait, pid: int) -> bool:
        added.append(pid)
        return original(self, pid)

    monkeypatch.setattr(run_queue.ThreadWait, "add_process", add_process)
    got = handover_ms((torch.zeros(16), torch.zeros((), dtype=torch.int64)), 32, batches=6)
    assert got is not None and 0 < got.main_ms <= got.wall_ms
    assert len(added) == 1 and added[0] != os.getpid()  # the one worker process
