"""logging_heavy, host_code_heavy, outside_work and anomaly_detection on recorded measurements: GPU runs judged without a GPU."""

from __future__ import annotations

import dataclasses

import pytest
from recorded_runs import CTX, ids, recorded

from trainspeed.diagnose.rules import Context, diagnose
from trainspeed.diagnose.rules.host import _LOGGING
from trainspeed.watch.result import PhaseStat, WatchResult
from trainspeed.watch.sites import OtherSite, SyncSite


def test_checkpoint_logging_and_h2d() -> None:
    r = recorded(30.0, {"forward": 5.0, "backward": 6.0, "optimizer": 1.0, "checkpoint": 17.0}, flops=1e9)
    v = diagnose(r, CTX)[0]
    assert v.id == "checkpoint_heavy" and "every" in v.action
    r = recorded(10.0, {"forward": 2.0, "backward": 3.0, "optimizer": 0.5, "h2d": 4.0}, dev="cuda",
                 device={"forward": 2.0, "backward": 3.0, "optimizer": 0.4, "h2d": 3.9}, flops=1e9, h2d=64 * 2**20,
                 busy=5.0)
    assert diagnose(r, CTX)[0].id == "h2d_bound"


@pytest.mark.parametrize("code", [
    "print(f'{loss}')", "logger.info('x')", "log.write(json.dumps(r)); log.flush(); os.fsync(log.fileno())",
    "wandb.log({'loss': l})", "writer.add_scalar('loss', l, i)", "pbar.set_postfix(loss=l)", "self.log('loss', l)",
    "mlflow.log_metric('loss', l)", "json.dump(history, f)", "sys.stdout.write(s)", "logs.append(loss.item())"])
def test_logging_lines_are_known(code: str) -> None:
    assert _LOGGING.search(code)


@pytest.mark.parametrize("code", [
    "logps.append(dist.log_prob(a))", "logits = model(x)", "out = F.log_softmax(z, -1)", "y = torch.log(p)",
    "h = p.log()", "z = torch.logsumexp(x, 0)", "x = np.log(a)", "catalog = build()"])
def test_math_named_log_is_no_logging(code: str) -> None:
    # REINFORCE's log-probability line was called a logging line (2026-11-23)
    assert not _LOGGING.search(code)


def _metric_run(other_ops: float | None, other_op_ms: float | None) -> WatchResult:
    # examples/metric_every_step.py as the doctor saw it on the 2-vCPU VM (2026-11-23): a 4.82 ms
    # step, 3.85 ms of it outside every phase, 98% of those samples at the scikit-learn metric's line
    r = recorded(4.82, {"forward": 0.35, "backward": 0.45, "optimizer": 0.15, "sync": 0.02}, ops=78, flops=1.035e7,
                 batch=256, threads=2)
    sites = [OtherSite("train.py:36", 'scores.append(f1_score(yb.numpy(), out.argmax(1).numpy(), average="macro"))',
                       98, 0.98),
             OtherSite("train.py:30", "xb, yb = x[start:start + args.batch], y[start:start + args.batch]", 2, 0.02)]
    return dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=sites),
                               window=dataclasses.replace(r.window, other_ops_per_step=other_ops,
                                                          other_op_ms_per_step=other_op_ms))


def test_host_code_outside_every_phase_is_named_at_its_line() -> None:
    found = diagnose(_metric_run(3, 0.45), CTX)
    host = found[0]
    assert host.id == "host_code_heavy"
    assert "train.py:36" in host.evidence and "f1_score" in host.evidence and "98%" in host.evidence
    # torch's share: 0.45 ms timed + 3 ops x 2 dispatches x 2 us; the rest of other's 3.85 ms is the script's
    host_ms = 3.85 - (0.45 + 3 * 2 * 2.0 / 1e3)
    assert f"{host_ms:.2f} ms" in host.evidence
    assert host.predicted_speedup == pytest.approx(4.82 / (4.82 - host_ms), abs=0.01)
    assert host.site == "train.py:36" and host.lever is None  # an edit of that line, not a setting


def test_a_function_the_loop_calls_is_named_by_the_loops_line_that_calls_it() -> None:
    # gen_data.py (scratch, 2026-11-23): a generator augmenting each batch in numpy over four lines; the
    # samples split 46/25/12/12% over them, and 98% ran under the loop's `for ... in enumerate(batches(400))`
    r = _metric_run(3, 0.45)
    sites = [OtherSite("gen.py:8", "out = np.stack([np.roll(o, 1, axis=0) for o in out])", 46, 0.46),
             OtherSite("gen.py:9", "noise = rng.normal(0, 0.1, out.shape)", 25, 0.25)]
    loop = [OtherSite("gen.py:13", "for step, (x, y) in enumerate(batches(400)):", 98, 0.98),
            OtherSite("gen.py:14", "loss = f(model(x), y)", 2, 0.02)]
    host = diagnose(dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=sites, loop=loop)), CTX)[0]
    assert host.id == "host_code_heavy" and "46% of the 100 stack samples there are at gen.py:8" in host.evidence
    assert "98% ran under the training loop's line gen.py:13: `for step, (x, y)" in host.evidence
    host_ms = 3.85 - (0.45 + 3 * 2 * 2.0 / 1e3)
    assert host.predicted_speedup == pytest.approx(4.82 / (4.82 - min(host_ms, 3.85 * 0.98)), abs=0.01)
    # a loop line no more than the top line's share plus LOOP_LINE_MORE: the innermost line stays the subject
    near = [dataclasses.replace(loop[0], share_of_other=0.55)]
    plain = diagnose(dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=sites, loop=near)), CTX)[0]
    assert "training loop's line" not in plain.evidence
    assert plain.predicted_speedup == pytest.approx(4.82 / (4.82 - 3.85 * 0.46), abs=0.01)
    # a top line under the bar (30%) with the loop's line above it: still a verdict
    spread = [dataclasses.replace(site, share_of_other=0.2) for site in sites]
    assert diagnose(dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=spread, loop=loop)),
                    CTX)[0].id == "host_code_heavy"


def test_the_library_under_a_line_is_named_and_torch_distributions_checks_are_a_known_lever() -> None:
    r = _metric_run(3, 0.45)
    metric = dataclasses.replace(r.sites.other[0], inside="sklearn")
    host = diagnose(dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=[metric, *r.sites.other[1:]])),
                    CTX)[0]
    assert "most of its samples inside sklearn" in host.evidence and "validate_args" not in host.action
    # REINFORCE's line building its action distribution (2026-11-23): torch.distributions' argument checks
    dist = OtherSite("rl.py:34", "logps.append(dist.log_prob(a))", 90, 0.9, inside="torch.distributions")
    host = diagnose(dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=[dist, *r.sites.other[1:]])),
                    CTX)[0]
    assert host.id == "host_code_heavy" and "inside torch.distributions" in host.evidence
    assert "set_default_validate_args(False)" in host.action
    assert host.lever is not None and host.lever.kind == "validate_args_off" and host.site == "rl.py:34"
    # the realistic REINFORCE script (2026-11-26): the distribution built on one line, sampled on the next, scored
    # on a third, each under the 30% bar alone; together inside torch.distributions, one verdict
    lines = [OtherSite(f"rl.py:{n}", code, k, k / 15, inside="torch.distributions")
             for n, code, k in ((83, "dist = Categorical(logits=policy(obs))", 4),
                                (84, "action = dist.sample()", 4), (85, "log_probs.append(dist.log_prob(action))", 4))]
    rest = OtherSite("rl.py:74", "obs = env.reset()", 3, 0.2)
    spread = diagnose(dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=[*lines, rest])), CTX)[0]
    assert spread.id == "host_code_heavy" and "set_default_validate_args(False)" in spread.action
    assert "27% of the 15 stack samples there are at rl.py:83" in spread.evidence
    assert "80% of them in all at lines inside torch.distributions (lines 83, 84, 85)" in spread.evidence
    host_ms = 3.85 - (0.45 + 3 * 2 * 2.0 / 1e3)  # the prediction stays the top line's part
    assert spread.predicted_speedup == pytest.approx(4.82 / (4.82 - min(host_ms, 3.85 * 4 / 15)), abs=0.01)
    # lines of two files are named whole
    moved = [dataclasses.replace(lines[2], where="agent.py:12"), *lines[:2]]
    assert "(agent.py:12, rl.py:83, rl.py:84)" in diagnose(dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=[*moved, rest])),
                                                          CTX)[0].evidence
    # the same lines in the script's own code (no library under them): no line holds enough to be named
    own = [dataclasses.replace(s, inside=None) for s in lines]
    assert "host_code_heavy" not in ids(dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=[*own, rest])))


def test_torch_ops_outside_the_model_are_not_the_scripts_host_code() -> None:
    # the same other time, all of it torch ops (a functional loss, indexing the batch): torch's, not the script's
    assert "host_code_heavy" not in ids(_metric_run(22, 3.8))
    # a run whose window did not count the ops outside the phases (too short, say) cannot tell them apart
    assert "host_code_heavy" not in ids(_metric_run(None, None))
    # a line that logs is logging_heavy's, not this rule's
    r = _metric_run(3, 0.45)
    log = OtherSite("train.py:40", "writer.add_scalar('f1', f1_score(y, p))", 98, 0.98)
    r = dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=[log, *r.sites.other[1:]]))
    assert ids(r)[0] == "logging_heavy" and "host_code_heavy" not in ids(r)


def test_a_line_that_builds_what_a_logging_line_writes_is_logging() -> None:
    # examples/log_every_step.py in a make test run (2026-11-24): 23% of the step outside every phase, the samples
    # split between the line building the record (with its five .item() reads) and the line writing it; with the
    # record's line taken for host code, host_code_heavy came first
    r = _metric_run(3, 0.45)
    record = OtherSite("log.py:30", 'record = {"step": step, "loss": loss.item(), "grad_norms": [p.grad.norm().item() '
                                    "for p in model.parameters()]}", 45, 0.45)
    write = OtherSite("log.py:31", 'log.write(json.dumps(record) + "\\n"); log.flush(); os.fsync(log.fileno())', 40, 0.40)
    read = SyncSite("log.py:30", "item", 5000, 12.0, record.code)
    logged = dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=[record, write]),
                                 reads=dataclasses.replace(r.reads, host_read_sites=[read]), steps=dataclasses.replace(r.steps, host_reads_per_step=50.0))
    found = ids(logged)
    assert found[0] == "logging_heavy" and "host_code_heavy" not in found
    # the same record line beside a line that does not log it is the script's host code
    other = dataclasses.replace(write, code="cache.append(record_id)")
    assert ids(dataclasses.replace(logged, sites=dataclasses.replace(logged.sites,
                                                                     other=[record, other])))[0] == "host_code_heavy"


def _anomaly_run(stacks_ms: float) -> WatchResult:
    """/tmp's unseen anomaly script as the doctor measured it (2026-11-23): an MLP trained with
    torch.autograd.set_detect_anomaly(True) left on, 148 ops per step of which 30 are its NaN checks."""
    from trainspeed.watch.result import OpTime

    r = recorded(4.7, {"forward": 2.49, "backward": 1.59, "optimizer": 0.45}, ops=148, flops=3.55e7, batch=256,
                 threads=2)
    rows = [OpTime("aten.mm", "float32", 5, 0.55, True, 2.2e7), OpTime("aten.addmm", "float32", 3, 0.46, True, 1.3e7),
            OpTime("aten._is_any_true", "bool", 15, 0.43, False, None),
            OpTime("aten.isnan", "float32", 15, 0.31, False, None)]
    return dataclasses.replace(r, window=dataclasses.replace(r.window, op_times=rows, op_ms_per_step=3.2),
                               steps=dataclasses.replace(r.steps, anomaly_ms_per_step=stacks_ms))


def test_anomaly_detection_left_on_is_named_with_its_stacks_and_nan_checks() -> None:
    ctx = Context(dispatch_us=2.0, matmul_gflops=105.0, physical_cores=2, logical_threads=2)
    verdicts = diagnose(_anomaly_run(2.26), ctx)
    assert verdicts[0].id == "anomaly_detection"  # the same run said nothing, or launch_bound 3.7x first
    assert "2.26 ms per step storing a formatted Python stack" in verdicts[0].evidence
    assert "0.74 ms checking every gradient for NaN" in verdicts[0].evidence
    assert "set_detect_anomaly(True)" in verdicts[0].action
    assert verdicts[0].predicted_speedup == pytest.approx(4.7 / (4.7 - 2.26 - 0.74), abs=0.01)
    launch = next((v for v in verdicts if v.id == "launch_bound"), None)
    assert launch is None or "118 ops per step" in launch.evidence  # its checks are not the ops' fixed cost
    # off, or costing little: no verdict
    assert "anomaly_detection" not in ids(_anomaly_run(0.0), ctx)
    quiet = _anomaly_run(0.1)
    quiet = dataclasses.replace(quiet, window=dataclasses.replace(quiet.window, op_times=None))
    assert "anomaly_detection" not in ids(quiet, ctx)


def _printing_run(dev: str = "cpu") -> WatchResult:
    """/tmp's unseen script (2026-11-23, CPU): `print("step", i, "loss", loss, "logits", out[:2])` every step,
    the two tensors' repr 41% of the step. On a CPU their reads are no syncs: their time is in "other", where the
    stack samples find it on the print's line; on a GPU they wait for the device (the sync phase)."""
    line = 'print("step", i, "loss", loss, "logits", out[:2])'
    host = {"forward": 0.38, "backward": 0.55, "optimizer": 0.27} | ({"sync": 0.98} if dev == "cuda" else {})
    r = recorded(2.35, host, ops=38, flops=2.1e7, batch=256, threads=2, dev=dev, busy=0.5 if dev == "cuda" else None)
    read = SyncSite("train.py:10", "__repr__", 200, 98.0, line)
    if dev == "cuda":
        r = dataclasses.replace(r, reads=dataclasses.replace(r.reads, sync_sites=[read]),
                                steps=dataclasses.replace(r.steps, syncs_per_step=2.0))
    else:
        r = dataclasses.replace(r, reads=dataclasses.replace(r.reads, host_read_sites=[read]),
                                steps=dataclasses.replace(r.steps, host_reads_per_step=2.0))
    return dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=[
        OtherSite("train.py:10", line, 90, 0.90), OtherSite("train.py:8", "loss = f(out, y)", 10, 0.10)]))


def test_tensors_formatted_by_a_logging_line_are_logging_time_on_a_cpu() -> None:
    ctx = Context(dispatch_us=2.0, matmul_gflops=110.0, physical_cores=2, logical_threads=2)
    verdicts = diagnose(_printing_run(), ctx)
    assert verdicts[0].id == "logging_heavy"
    assert "the tensors they format are read 2.0 times a step at train.py:10 (__repr__, 0.49 ms a read" \
        in verdicts[0].evidence and "not tensors" in verdicts[0].action
    other = 2.35 - 0.38 - 0.55 - 0.27  # the reads' time is in it, found on the print's line by the samples
    assert verdicts[0].predicted_speedup == pytest.approx(2.35 / (2.35 - other * 0.90), abs=0.01)
    # on a GPU the same read waits for the device: sync_bound's, not counted here
    cuda = next((v for v in diagnose(_printing_run("cuda"), ctx) if v.id == "logging_heavy"), None)
    assert cuda is None or "tensors they format" not in cuda.evidence


def _ema_run(sites: list[OtherSite]) -> WatchResult:
    """/tmp's unseen EMA script (2026-11-23, CPU): `copy.deepcopy(model)` every step and a weight average
    by hand, 30% of the run outside forward, backward and the optimizer, 27 torch ops there."""
    r = recorded(3.97, {"forward": 0.866, "backward": 1.641, "optimizer": 0.398}, ops=79, flops=2.22e8, batch=128,
                 threads=2, shares={"forward": 0.212, "backward": 0.397, "optimizer": 0.095})
    return dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=sites),
                               window=dataclasses.replace(r.window, other_ops_per_step=27, other_op_ms_per_step=0.66,
                                                          op_ms_per_step=3.7))


def test_torch_work_outside_the_phases_on_every_step_is_named_by_its_line_without_a_prediction() -> None:
    ctx = Context(dispatch_us=1.8, matmul_gflops=116.0, physical_cores=2, logical_threads=2)
    copy = OtherSite("ema.py:10", "prev = copy.deepcopy(model)  # a snapshot every step", 20, 0.77)
    avg = OtherSite("ema.py:13", "pe.mul_(0.99).add_(p, alpha=0.01)", 4, 0.15)
    loss = OtherSite("ema.py:8", "loss = nn.functional.cross_entropy(model(X), y)", 2, 0.08)
    verdicts = diagnose(_ema_run([copy, avg, loss]), ctx)
    outside = next(v for v in verdicts if v.id == "outside_work")  # was "none" or compute_bound alone
    assert "ema.py:10" in outside.evidence and "30% of the run's time" in outside.evidence
    assert "run it every N steps" in outside.action and outside.predicted_speedup is None
    assert "host_code_heavy" not in [v.id for v in verdicts]  # torch's ops there explain the time
    assert outside.fix.startswith("run it every N steps")
    # a hand-written update of the parameters: the optimizer's work, its fix an optimizer (a polynomial regression's
    # `param.add_(-lr * param.grad)`, 2026-12-04)
    for code in ("param.add_(-args.lr * param.grad)", "p.data.add_(p.grad, alpha=-lr)", "w -= lr * w.grad"):
        update = OtherSite("reg.py:72", code, 20, 0.77)
        by_hand = next(v for v in diagnose(_ema_run([update, loss]), ctx) if v.id == "outside_work")
        assert by_hand.title == "The parameters updated by hand, one tensor at a time"
        assert "torch.optim" in by_hand.fix and "reg.py:72" in by_hand.evidence
    # the line itself rests on SITE_SAMPLES samples: 3 of "other"'s 6 (a 0.2 s loop at 50 Hz) named it in one run of
    # the seeded regression in five, and not in the others
    few = OtherSite("reg.py:72", "param.add_(-args.lr * param.grad)", 3, 0.5)
    assert "outside_work" not in ids(_ema_run([few, OtherSite("reg.py:60", "x = make_features(x)", 3, 0.5)]), ctx)
    grads = OtherSite("reg.py:70", "norms = [p.grad.norm() for p in model.parameters()]", 20, 0.77)
    assert next(v for v in diagnose(_ema_run([grads, loss]), ctx) if v.id == "outside_work").fix == outside.fix
    # a loss computed outside the model is the step's own work, and a logging line logging_heavy's
    assert "outside_work" not in ids(_ema_run([dataclasses.replace(loss, share_of_other=0.9)]), ctx)
    assert "outside_work" not in ids(_ema_run([OtherSite("ema.py:20", "print(step, loss.item())", 20, 0.9)]), ctx)
    # too little of the run outside the phases
    small = dataclasses.replace(_ema_run([copy]), phases={**_ema_run([copy]).phases,
                                "other": PhaseStat(0.4, None, 0.1)})
    assert "outside_work" not in ids(small, ctx)


def test_a_line_named_from_too_few_stack_samples_is_no_verdict() -> None:
    """One sample at a progress bar's `stop` (the run's end) held "100%" of "other" and predicted 1.84x; removing
    it gained nothing. A verdict that names a line rests on SITE_SAMPLES samples or more, and says how many."""
    from trainspeed.diagnose.rules.host import SITE_SAMPLES

    r = _metric_run(3, 0.45)
    one = [OtherSite("bar.py:40", "self.live.stop()", 1, 1.0)]
    assert not {"host_code_heavy",
                "outside_work"} & set(ids(dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=one))))
    enough = [OtherSite("bar.py:40", "self.live.stop()", SITE_SAMPLES, 1.0)]
    host = diagnose(dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=enough)), CTX)[0]
    assert host.id == "host_code_heavy" and f"100% of the {SITE_SAMPLES} stack samples there" in host.evidence
    printing = [OtherSite("t.py:9", "print(f'step {step}')", 1, 1.0)]
    assert "logging_heavy" not in ids(dataclasses.replace(r, sites=dataclasses.replace(r.sites, other=printing)))
