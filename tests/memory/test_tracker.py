"""LiveBytes: births, deaths, views and in-place ops, on meta tensors."""

from __future__ import annotations

import torch

from trainspeed.memory.tracker import LiveBytes, round_up


def test_new_storages_count_views_and_inplace_do_not() -> None:
    with LiveBytes() as t:
        a = torch.empty(100, device="meta")  # 400 bytes
        v = a[10:20]  # a view: same storage
        a.mul_(2)  # in place: same storage
        b = a + 1  # new: 400 bytes
        assert t.live == 800
        del a, v
        assert t.live == 400  # a's storage died with its last view
        del b
    assert t.live == 0 and t.peak == 800


def test_a_storage_lives_while_any_view_does() -> None:
    with LiveBytes() as t:
        a = torch.empty(256, device="meta")
        v = a[:1]
        del a
        assert t.live == 1024
        del v
    assert t.live == 0


def test_adopted_tensors_are_part_of_the_baseline() -> None:
    w = torch.empty(10, device="meta")
    t = LiveBytes()
    t.adopt([w, w[2:]], "params")
    with t:
        x = w * 2
        assert t.live == 80
        del x
    assert t.peak == 80


def test_quantum_rounds_like_an_allocator() -> None:
    with LiveBytes(quantum=512) as t:
        a = torch.empty(3, device="meta")  # 12 bytes -> one 512-byte block
        assert t.live == 512
        del a
    assert round_up(513, 512) == 1024 and round_up(7, 1) == 7


def test_scratch_counts_only_during_its_op() -> None:
    t = LiveBytes(workspace=lambda op, args, out, kwargs: 1000 if "mul" in op else 0)
    with t:
        a = torch.empty(10, device="meta")
        b = a * 3
        c = a + 1
    assert t.peak == 40 + 40 + 1000  # a, b and the scratch of the multiplication
    assert t.live == 3 * 40  # a, b, c: the scratch is gone
    del a, b, c


def test_alive_at_reconstructs_the_peak() -> None:
    with LiveBytes() as t:
        a = torch.empty(10, device="meta")
        b = torch.empty(20, device="meta")
        del a
        c = torch.empty(5, device="meta")
    alive = t.alive_at(t.peak_at)
    assert sorted(blk.nbytes for blk in alive) == [40, 80]
    del b, c
