"""`fit`'s steps as they run: eager steps, replays of a captured step, and calls of the compiled
function, over the job's batches, with the losses recorded without host reads.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from typing import TYPE_CHECKING

import torch

from trainspeed.loop import plan
from trainspeed.loop.checks import check_loss
from trainspeed.loop.compiled import STEPS_PER_CALL, save_times
from trainspeed.loop.data import Group

if TYPE_CHECKING:
    from trainspeed.loop.fit import FastLoop

COMPILED_TIMED_CALLS = 3


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _data_device(data: object) -> torch.device | None:
    tensors = data if isinstance(data, (tuple, list)) else getattr(data, "tensors", None)
    if tensors is None:
        tensors = getattr(getattr(data, "dataset", None), "tensors", None)
    found = {t.device for t in tensors or () if isinstance(t, torch.Tensor)}
    return found.pop() if len(found) == 1 else None


def _flat(group: Group) -> list[torch.Tensor]:
    return [t for inputs, target in group for t in (*inputs, target)]


def _unflat(flat: list[torch.Tensor] | tuple[torch.Tensor, ...], micro_batches: int) -> Group:
    """The inverse of _flat: `micro_batches` (inputs..., target) groups from one flat list."""
    width = len(flat) // micro_batches
    return [(tuple(flat[i * width:(i + 1) * width - 1]), flat[(i + 1) * width - 1]) for i in range(micro_batches)]


def _signature(flat: list[torch.Tensor]) -> tuple:
    return tuple((t.shape, t.dtype, t.device) for t in flat)


def _iter_groups(self: FastLoop) -> Iterator[tuple[Group, bool]]:
    for _ in range(self.epochs):
        group: Group = []
        full = True
        for batch, is_full in self.data.epoch():
            group.append(batch)
            full = full and is_full
            if len(group) == self.accumulate:
                yield group, full
                group, full = [], True
        if group:
            yield group, False

# ---- one step, each runner ----------------------------------------------------------------

def _eager(self: FastLoop, group: Group) -> torch.Tensor:
    self.optimizer.zero_grad(set_to_none=True)
    k = len(group)
    total: torch.Tensor | None = None
    for inputs, target in group:
        weight = share = 1.0
        if self.dist is not None and self.data.loader is None:  # resident data: this rank's rows of the batch
            inputs, target, weight, share = self.dist.rows(inputs, target)
        with self.autocast:
            loss = self.loss_fn(self.net(*inputs), target)
        if self.mode == "first":
            check_loss(loss)
        scaled = loss / k if k > 1 else loss
        if weight != 1.0:
            scaled = scaled * weight
        (self.scaler.scale(scaled) if self.scaler else scaled).backward()
        part = loss.detach().float()
        if self.dist is not None:
            part = part * (share if self.data.loader is None else 1.0 / self.dist.env.world_size)
        total = part if total is None else total + part
    if self.scaler:
        self.scaler.step(self.optimizer)
        self.scaler.update()
    else:
        self.optimizer.step()
    assert total is not None
    return total / k if k > 1 else total


def _step_of_flat(self: FastLoop, *args: torch.Tensor) -> torch.Tensor:
    """The eager step with every tensor it touches as an argument (what capture needs)."""
    loss = self._eager(_unflat(args[len(self.state):], len(self.template)))
    self._capture_loss = loss.detach()
    return loss


def _record(self: FastLoop, first_step: int, losses: torch.Tensor) -> None:
    """Record the losses of steps first_step, first_step+1, ... that fall on record_every."""
    every = self.record_every
    if every is None:
        return
    n = losses.numel()
    steps = [s for s in range(first_step, first_step + n) if s % every == 0]
    if not steps:
        return
    if len(steps) == n:
        self.recorder.add(losses)
    else:
        self.recorder.add(losses.reshape(-1)[[s - first_step for s in steps]])
    self.recorded_steps.extend(steps)


def _run_one(self: FastLoop, runner: str, group: Group) -> float:
    """One optimizer step by `runner`; returns its host wall time."""
    start = self.now()
    if runner == "eager":
        loss = self._eager(group)
    elif runner == "replay":
        with torch.no_grad():
            loss = self.captured.replay(*self.state, *_flat(group))
    else:  # graph
        for static, t in zip(self.static, _flat(group)):
            if static is not t:
                static.copy_(t)
        graph = self.graph
        assert graph.graph is not None and graph.loss is not None  # a failed capture is never kept
        graph.graph.replay()
        loss = graph.loss.clone()
    elapsed = self.now() - start
    self._spent(runner, elapsed)
    self.done += 1
    self.counts[runner] = self.counts.get(runner, 0) + 1
    self._record(self.done, loss)
    return elapsed


def _spent(self: FastLoop, runner: str, seconds: float) -> None:
    self.seconds[runner] = self.seconds.get(runner, 0.0) + seconds


def _fits_capture(self: FastLoop, group: Group, full: bool) -> bool:
    return full and len(group) == len(self.template) and _signature(_flat(group)) == self.signature


def _captured_steps(self: FastLoop, target: int) -> None:
    resident = self.data.full_batch and self.accumulate == 1
    if self.mode == "replay" and resident:
        self._replay_resident(target)
        return
    if self.mode == "compiled" and resident and self.counts.get("compiled", 0) and self.done < target:
        self._compiled_resident(target)
        if self.done < target and self.mode == "compiled":
            self._replay_resident(target)  # fewer than K steps left
        return
    while self.done < target:
        group, full = next(self._groups)
        if self.mode == "capture":
            self._capture(group, full)
        elif self.mode in ("replay", "time_replay", "graph") or not full:
            runner = "graph" if self.mode == "graph" else "replay"
            if not self._fits_capture(group, full):
                runner = "eager"
            elapsed = self._run_one(runner, group)
            if self.mode == "time_replay" and runner == "replay":
                self._replay_sample(elapsed)
        else:  # compiled: this step and the next K-1 in one call
            self._compiled_call(group, full, target)
        if self.mode == "eager":
            return


def _replay_resident(self: FastLoop, target: int) -> None:
    """The hot loop: the same resident full batch every step, nothing but the replay and the record."""
    n = target - self.done
    args = [*self.state, *_flat(self.template)]
    replay, add, every, first = self.captured.replay, self.recorder.add, self.record_every, self.done + 1
    start = self.now()
    with torch.no_grad():
        if every == 1:
            for _ in range(n):
                add(replay(*args))
        else:
            for step in range(first, first + n):
                loss = replay(*args)
                if every is not None and step % every == 0:
                    add(loss)
    self._spent("replay", self.now() - start)
    if every is not None:
        self.recorded_steps.extend(s for s in range(first, first + n) if s % every == 0)
    for _ in range(n):  # keep the data iterator in step with the steps taken
        next(self._groups)
    self.done += n
    self.counts["replay"] = self.counts.get("replay", 0) + n


def _compiled_resident(self: FastLoop, target: int) -> None:
    """The compiled hot loop: K steps per call on the resident full batch."""
    k = STEPS_PER_CALL
    calls = (target - self.done) // k
    args = [*self.state, *(_flat(self.template) * k)]
    first = self.done + 1
    timed = min(calls, COMPILED_TIMED_CALLS - len(self.compile_calls))
    for i in range(timed):
        self._record(first + i * k, self._call_compiled(args))
    fn, add, every = self.k_steps, self.recorder.add, self.record_every
    start = self.now()
    for i in range(timed, calls):
        losses = fn(*args)
        if every == 1:
            add(losses)
        elif every is not None:
            self._record(first + i * k, losses)
    self._spent("compiled", self.now() - start)
    if every == 1:
        self.recorded_steps.extend(range(first + timed * k, first + calls * k))
    for _ in range(calls * k):
        next(self._groups)
    self.done += calls * k
    self.counts["compiled"] += calls * k


def _call_compiled(self: FastLoop, args: list[torch.Tensor]) -> torch.Tensor:
    """One timed call of K compiled steps; the first few after the compile give the step time."""
    start = self.now()
    losses = self.k_steps(*args)
    elapsed = self.now() - start
    self._spent("compiled", elapsed)
    if len(self.compile_calls) < COMPILED_TIMED_CALLS:
        self.compile_calls.append(elapsed / STEPS_PER_CALL)
        if len(self.compile_calls) == COMPILED_TIMED_CALLS:
            self._note_compiled()
    return losses


def _note_compiled(self: FastLoop) -> None:
    step_s = statistics.median(self.compile_calls)
    save_times(self.cache_dir, self.compile_key, self.compile_s, step_s)
    self.explain.append(f"compiled {STEPS_PER_CALL} steps per call: {plan.us(step_s)} per step, compile "
                        f"{self.compile_s:.1f} s (measured)")
    self.samples["compiled"] = list(self.compile_calls)
