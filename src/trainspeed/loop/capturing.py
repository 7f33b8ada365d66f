"""`fit` capturing its step: a CUDA graph or a replayable aten graph, and the Inductor-compiled
function of several captured steps, each checked against an eager step before it is kept.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

import psutil
import torch

from trainspeed.loop import plan
from trainspeed.loop.capture import CaptureRefused, capture_step
from trainspeed.loop.choosing import REPLAY_TIMED_STEPS
from trainspeed.loop.compiled import STEPS_PER_CALL
from trainspeed.loop.cuda_graph import WARMUP_STEPS, capture_graph, make_capturable
from trainspeed.loop.data import Group
from trainspeed.loop.running import _flat, _signature, _unflat

if TYPE_CHECKING:
    from trainspeed.loop.fit import FastLoop

SNAPSHOT_SHARE = 0.25
"""The capture's safety copy of the state may take at most this share of the free host memory."""


def _capture(self: FastLoop, group: Group, full: bool) -> None:
    self.template = group
    self.signature = _signature(_flat(group))
    if not full:
        self._run_one("eager", group)  # wait for a full batch to capture
        return
    if self.device.type == "cuda":
        self._capture_graph(group)
        return
    seen: dict[int, torch.Tensor] = {}
    for t in [*self.model.parameters(), *self.model.buffers(),
              *(v for s in self.optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor))]:
        seen.setdefault(id(t), t)
    self.state = list(seen.values())
    # Capturing runs the step for real; should it fail part-way, put everything back as it was.
    need = sum(t.numel() * t.element_size() for t in self.state)
    free = psutil.virtual_memory().available
    if need > SNAPSHOT_SHARE * free:
        self.explain.append(f"no capture: a safety copy of the model and optimizer state ({need / 2**30:.1f} GiB) "
                            f"would take more than {SNAPSHOT_SHARE:.0%} of the free memory; plain steps")
        self.mode = "eager"
        self._run_one("eager", group)
        return
    snapshot = [t.detach().clone() for t in self.state]
    rng = torch.get_rng_state()
    start = self.now()
    try:
        self.captured = capture_step(self._step_of_flat, [*self.state, *_flat(group)])
    except Exception as e:  # noqa: BLE001 - any failure to capture leaves the plain step
        with torch.no_grad():
            for t, saved in zip(self.state, snapshot):
                t.copy_(saved)
        torch.set_rng_state(rng)
        reason = str(e) if isinstance(e, CaptureRefused) else f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        self.explain.append(f"capture refused: {reason}; plain steps throughout")
        self.mode = "eager"
        self._run_one("eager", group)
        return
    finally:
        self.capture_s += self.now() - start
    del snapshot
    self.done += 1  # the capture's own real step
    self.counts["capture"] = self.counts.get("capture", 0) + 1
    self._record(self.done, self._capture_loss)
    for p in self.model.parameters():
        p.grad = None  # the replay computes gradients without storing them in .grad
    self.explain.append(f"captured the step: {self.captured.ops} aten ops per step, replayed without module "
                        f"calls, autograd or optimizer Python (capture {plan.ms(self.capture_s)}, measured)")
    self.mode = "time_replay"
    self.replay_times = {}


def _compiled_call(self: FastLoop, group: Group, full: bool, target: int) -> None:
    k = STEPS_PER_CALL
    if target - self.done < k or not self._fits_capture(group, full):
        self._run_one("replay" if self._fits_capture(group, full) else "eager", group)
        return
    groups = [group]
    while len(groups) < k:
        nxt, nfull = next(self._groups)
        if not self._fits_capture(nxt, nfull):
            for g in groups:  # a short batch in the way: run these one by one
                self._run_one("replay", g)
            self._run_one("eager", nxt)
            return
        groups.append(nxt)
    args = [*self.state, *(t for g in groups for t in _flat(g))]
    first_step = self.done + 1
    if self.counts.get("compiled", 0) == 0:
        losses = self._compile_and_check(groups, args)
        if losses is None:
            return
    else:
        losses = self._call_compiled(args)
    self.done += k
    self.counts["compiled"] = self.counts.get("compiled", 0) + k
    self._record(first_step, losses)


def _compile_and_check(self: FastLoop, groups: list[Group], args: list[torch.Tensor]) -> torch.Tensor | None:
    """Compile on these K steps, and check them against the replay; None (replayed instead) on failure.

    The K steps are replayed first from a snapshot of the state, then the state is put back
    and the compiled function runs them: losses and final state must agree (rtol 1e-4, atol
    1e-5). Either way the job continues from one consistent state.
    """
    snapshot = [t.detach().clone() for t in self.state]
    rng = torch.get_rng_state()
    with torch.no_grad():
        expected = torch.stack([self.captured.replay(*self.state, *_flat(g)) for g in groups])
        expected_state = [t.detach().clone() for t in self.state]
        for t, saved in zip(self.state, snapshot):
            t.copy_(saved)
    torch.set_rng_state(rng)
    start = self.now()
    problem = None
    try:
        losses = self.k_steps(*args)
    except Exception as e:  # noqa: BLE001 - a compiler failure must not end the job
        problem = f"compile failed ({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''})"
    self.compile_s += self.now() - start
    if problem is None:
        worst = max((a - b).abs().max().item() for a, b in zip([losses, *self.state], [expected, *expected_state]))
        if not all(torch.allclose(a, b, rtol=1e-4, atol=1e-5)
                   for a, b in zip([losses, *self.state], [expected, *expected_state])):
            problem = f"the compiled steps disagreed with the replay (largest difference {worst:.3g})"
    if problem is None:
        return losses
    with torch.no_grad():
        for t, saved in zip(self.state, expected_state):
            t.copy_(saved)
    self.explain.append(f"{problem}; replaying instead")
    self.mode = "replay"
    first_step = self.done + 1
    self.done += len(groups)
    self.counts["replay"] = self.counts.get("replay", 0) + len(groups)
    self._record(first_step, expected)
    return None


def _capture_graph(self: FastLoop, group: Group) -> None:
    if self.scaler is not None:
        self.explain.append("no CUDA graph: the fp16 GradScaler reads its overflow flag on the host; plain steps")
        self.mode = "eager"
        self._run_one("eager", group)
        return
    self._restore_capturable = make_capturable(self.optimizer)
    flat = _flat(group)
    self.static = flat if self.data.full_batch else [t.clone() for t in flat]
    static_group = _unflat(self.static, len(group))

    def feed_next() -> None:  # warm-up steps after the first train on the next batches, as replays will
        nxt, _ = next(self._groups)
        for static, t in zip(self.static, _flat(nxt)):
            if static is not t:
                static.copy_(t)

    warmups = min(WARMUP_STEPS, self.total - self.done)
    feeds = [lambda: None] + [feed_next] * (warmups - 1)
    start = self.now()
    self.graph = capture_graph(lambda: self._eager(static_group),
                               lambda: self.optimizer.zero_grad(set_to_none=True), feeds)
    self.capture_s += self.now() - start
    for loss in self.graph.warmup_losses:  # real steps run before the capture
        self.done += 1
        self.counts["capture"] = self.counts.get("capture", 0) + 1
        self._record(self.done, loss)
    if self.graph.graph is None:
        self.explain.append(f"CUDA graph capture failed ({self.graph.error}); plain steps throughout")
        self.mode = "eager"
        return
    eager_s = statistics.median(self.samples["eager"])
    graph_s = self._time_window("graph", REPLAY_TIMED_STEPS, self.total)
    decision = plan.decide_replay(graph_s, eager_s)
    self.explain.append("CUDA graph: " + decision.reason)
    self.samples["graph"] = [graph_s]
    self.mode = "graph" if decision.take else "eager"
