"""`fit` capturing its step: a CUDA graph or a replayable aten graph, and the Inductor-compiled
function of several captured steps, each checked against an eager step before it is kept.

Plain functions of the job and its runner: each captures or runs what it is given, hands the form it made to
the runner (`Runner.use_replay`, `use_graph`), and returns the loop's next mode.
"""

from __future__ import annotations

import psutil
import torch

from trainspeed.loop import plan
from trainspeed.loop.capture import CaptureRefused, capture_step
from trainspeed.loop.compiled import STEPS_PER_CALL
from trainspeed.loop.cuda_graph import WARMUP_STEPS, capture_graph, make_capturable
from trainspeed.loop.data import Group
from trainspeed.loop.running import Job, Replay, Runner, flat, unflat

SNAPSHOT_SHARE = 0.25
"""The capture's safety copy of the state may take at most this share of the free host memory."""


def capture(job: Job, runner: Runner, group: Group, full: bool) -> str:
    """Capture the step on `group` (on a CPU a replayable aten graph; on CUDA a graph, `capture_cuda_graph`).
    Returns the next mode: "capture" (a short batch: wait for a full one), "graph_captured", "time_replay", or
    "eager" where the capture was refused."""
    runner.use_template(group)
    if not full:
        runner.run_one("eager", group)  # wait for a full batch to capture
        return "capture"
    if job.device.type == "cuda":
        return capture_cuda_graph(job, runner, group)
    seen: dict[int, torch.Tensor] = {}
    for t in [*job.model.parameters(), *job.model.buffers(),
              *(v for s in job.optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor))]:
        seen.setdefault(id(t), t)
    state = list(seen.values())
    # Capturing runs the step for real; should it fail part-way, put everything back as it was.
    need = sum(t.numel() * t.element_size() for t in state)
    free = psutil.virtual_memory().available
    if need > SNAPSHOT_SHARE * free:
        job.explain.append(f"no capture: a safety copy of the model and optimizer state ({need / 2**30:.1f} GiB) "
                           f"would take more than {SNAPSHOT_SHARE:.0%} of the free memory; plain steps")
        runner.run_one("eager", group)
        return "eager"
    snapshot = [t.detach().clone() for t in state]
    rng = torch.get_rng_state()
    start = job.now()
    try:
        captured = capture_step(runner.step_of_flat(len(state), len(group)), [*state, *flat(group)])
    except Exception as e:  # noqa: BLE001 - any failure to capture leaves the plain step
        with torch.no_grad():
            for t, saved in zip(state, snapshot):
                t.copy_(saved)
        torch.set_rng_state(rng)
        reason = str(e) if isinstance(e, CaptureRefused) else f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        job.explain.append(f"capture refused: {reason}; plain steps throughout")
        runner.run_one("eager", group)
        return "eager"
    finally:
        runner.add_capture_s(job.now() - start)
    del snapshot
    runner.use_replay(Replay(captured, state))
    runner.took("capture", 1, runner.captured_loss())  # the capture's own real step
    for p in job.model.parameters():
        p.grad = None  # the replay computes gradients without storing them in .grad
    job.explain.append(f"captured the step: {captured.ops} aten ops per step, replayed without module "
                       f"calls, autograd or optimizer Python (capture {plan.duration(runner.capture_s)}, measured)")
    return "time_replay"


def compiled_call(job: Job, runner: Runner, group: Group, full: bool, target: int) -> str:
    """This step and the next K-1 in one call of the compiled function (the first call compiles and is checked,
    `compile_and_check`); a short batch in the way, or fewer than K steps left, and they run one by one. Returns
    the next mode ("compiled", or "replay" where the compiled steps failed their check)."""
    k = STEPS_PER_CALL
    if target - runner.done < k or not runner.fits_capture(group, full):
        runner.run_one("replay" if runner.fits_capture(group, full) else "eager", group)
        return "compiled"
    groups = [group]
    while len(groups) < k:
        nxt, nfull = runner.next_group()
        if not runner.fits_capture(nxt, nfull):
            for g in groups:  # a short batch in the way: run these one by one
                runner.run_one("replay", g)
            runner.run_one("eager", nxt)
            return "compiled"
        groups.append(nxt)
    assert runner.replay is not None
    args = [*runner.replay.state, *(t for g in groups for t in flat(g))]
    if runner.counts.get("compiled", 0) == 0:
        losses = compile_and_check(job, runner, groups, args)
        if losses is None:
            return "replay"
    else:
        losses = runner.call_compiled(args)
    runner.took("compiled", k, losses)
    return "compiled"


def compile_and_check(job: Job, runner: Runner, groups: list[Group], args: list[torch.Tensor]) -> torch.Tensor | None:
    """Compile on these K steps, and check them against the replay; None (replayed instead) on failure.

    The K steps are replayed first from a snapshot of the state, then the state is put back
    and the compiled function runs them: losses and final state must agree (rtol 1e-4, atol
    1e-5). Either way the job continues from one consistent state.
    """
    replay, compiled = runner.replay, runner.compiled
    assert replay is not None and compiled is not None
    state = replay.state
    snapshot = [t.detach().clone() for t in state]
    rng = torch.get_rng_state()
    with torch.no_grad():
        expected = torch.stack([replay.captured.replay(*state, *flat(g)) for g in groups])
        expected_state = [t.detach().clone() for t in state]
        for t, saved in zip(state, snapshot):
            t.copy_(saved)
    torch.set_rng_state(rng)
    start = job.now()
    problem = None
    try:
        losses = compiled.k_steps(*args)
    except Exception as e:  # noqa: BLE001 - a compiler failure must not end the job
        problem = f"compile failed ({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''})"
    runner.add_compile_s(job.now() - start)
    if problem is None:
        worst = max((a - b).abs().max().item() for a, b in zip([losses, *state], [expected, *expected_state]))
        if not all(torch.allclose(a, b, rtol=1e-4, atol=1e-5)
                   for a, b in zip([losses, *state], [expected, *expected_state])):
            problem = f"the compiled steps disagreed with the replay (largest difference {worst:.3g})"
    if problem is None:
        return losses
    with torch.no_grad():
        for t, saved in zip(state, expected_state):
            t.copy_(saved)
    job.explain.append(f"{problem}; replaying instead")
    runner.took("replay", len(groups), expected)
    return None


def capture_cuda_graph(job: Job, runner: Runner, group: Group) -> str:
    """Capture the step as a CUDA graph (its warm-up steps are real steps). Returns "graph_captured" (the
    choice to keep it is `Chooser.keep_graph`'s), or "eager" where it could not be captured."""
    if job.scaler is not None:
        job.explain.append("no CUDA graph: the fp16 GradScaler reads its overflow flag on the host; plain steps")
        runner.run_one("eager", group)
        return "eager"
    restore = make_capturable(job.optimizer)
    tensors = flat(group)
    static = tensors if job.data.full_batch else [t.clone() for t in tensors]
    static_group = unflat(static, len(group))

    def feed_next() -> None:  # warm-up steps after the first train on the next batches, as replays will
        nxt, _ = runner.next_group()
        for s, t in zip(static, flat(nxt)):
            if s is not t:
                s.copy_(t)

    warmups = min(WARMUP_STEPS, job.total - runner.done)
    feeds = [lambda: None] + [feed_next] * (warmups - 1)
    start = job.now()
    graph = capture_graph(lambda: runner.eager(static_group), lambda: job.optimizer.zero_grad(set_to_none=True), feeds)
    runner.add_capture_s(job.now() - start)
    runner.use_graph(graph, static, restore)
    for loss in graph.warmup_losses:  # real steps run before the capture
        runner.took("capture", 1, loss)
    if graph.graph is None:
        job.explain.append(f"CUDA graph capture failed ({graph.error}); plain steps throughout")
        return "eager"
    return "graph_captured"
