"""Per-op overhead verdicts: `launch_bound`, `small_batch`, `cpu_faster`, and `sync_bound` (host reads that
wait for the GPU).
"""

from __future__ import annotations

from trainspeed.diagnose.rules.brief import LARGEST_BATCH, ms, of_step, pct
from trainspeed.diagnose.rules.context import Context
from trainspeed.diagnose.rules.step_model import (
    OP_WORK_DISPATCHES,
    anomaly_costs,
    arithmetic_ms,
    busy_source,
    compute_ms,
    compute_part_ms,
    gpu_busy_ms,
    op_work,
    phase_ms,
    rates_text,
    sized_arithmetic,
    step_speedup,
    window_scale,
)
from trainspeed.diagnose.verdict import Verdict
from trainspeed.load.view import others_busy
from trainspeed.probe.readings import PROBE_STEPS
from trainspeed.watch.result import WatchResult

SYNC_SHARE = 0.10
SYNC_GAIN = 0.05  # a sync whose removal is predicted to save less than this share of the step is not the cause
ARITHMETIC_LOW = 0.25  # arithmetic under a quarter of the compute phases: overhead dominates
LAUNCH_GAIN = 0.05  # per-op overhead beyond a bare dispatch per op must be this share of the step
DEVICE_BUSY_LOW = 0.5
SMALL_BATCH = 256
CLOSURE_OPTIMIZERS = frozenset({"LBFGS"})
"""torch.optim's optimizers whose step takes a closure that runs the model (LBFGS evaluates it several times a step):
trainspeed.fit steps an optimizer without one, so per-op overhead's fix there is a larger batch."""


def sync_bound(r: WatchResult, c: Context) -> Verdict | None:
    share = r.phases["sync"].share
    if r.model.device != "cuda" or share < SYNC_SHARE or r.steps.syncs_per_step < 1 or not r.steps.median_ms:
        return None
    step, sync = r.steps.median_ms, phase_ms(r, "sync")
    top = r.reads.sync_sites[0] if r.reads.sync_sites else None
    where = f"; most at {top.where} ({top.op}, {top.count} times)" if top else ""
    evidence = f"{r.steps.syncs_per_step:.1f} host reads of device data per step take {sync:.2f} ms of {step:.2f} ms ({share:.0%}){where}"
    action = ("keep per-step values on the device (e.g. write the loss into a preallocated tensor) and read "
              "them every N steps; avoid .item()/print(tensor)/float(tensor) inside the step")
    # without the sync the host runs ahead: step time becomes max(host work, device work) instead of their sum
    new = max(step - sync, gpu_busy_ms(r) or 0.0)
    if new >= step * (1 - SYNC_GAIN):
        return None  # the reads wait for the GPU's own work: without them the step would wait elsewhere
    return Verdict("sync_bound", evidence, action, step_speedup(r, step, new), site=top.where if top else None,
                   title="Reading GPU values on the host every step",
                   brief=f"{r.steps.syncs_per_step:.1f} reads of GPU values a step wait {of_step(sync, step)}",
                   fix="keep the value on the GPU and read it every N steps (.item() waits for the GPU)")


def launch_bound(r: WatchResult, c: Context) -> Verdict | None:
    """Per-op overhead fills the step: on a GPU, launching kernels costs the host more than the GPU's work on them
    (`_gpu_launches`); on a CPU, the ops' fixed cost outweighs their arithmetic (`_cpu_dispatches`). A recurrent cell
    stepped in Python, where its fused layer was measured, is predicted from that layer (`_fused_cells`)."""
    # anomaly detection's stacks and NaN checks are its own verdict's, not the ops' fixed cost
    stacks, checks, check_ops = anomaly_costs(r)
    compute = compute_ms(r) - stacks - checks
    ops = (r.window.ops_per_step or 0.0) - check_ops
    if r.model.device == "cpu":  # the ops that ran in forward, backward and the optimizer: a DataLoader's are not
        ops -= (r.window.edge_ops_per_step or 0.0) + (r.window.other_ops_per_step or 0.0)
    if ops <= 0 or compute <= 0 or not r.steps.median_ms:
        return None
    step = r.steps.median_ms
    found = _gpu_launches(r, ops, compute) if r.model.device == "cuda" else _cpu_dispatches(r, c, ops, compute)
    if found is None:
        return None
    evidence, action, overhead, words = found
    fused = _fused_cells(r, c, ops, compute)
    if fused is not None:  # a cell stepped in Python: the fused layer's measured saving is the fix's own
        saved, more, advice, shared = fused
        stepped, whole = c.cell_ms or (0.0, 0.0)
        evidence += more
        action = advice + "; " + action if advice else action
        # beside busy processes the per-op bound sets the judged phases against the dispatch probe's one thread, two
        # clocks the load sets apart; the loop's share of the ops (`shared`) is on the phases' own
        loop = r.model.cell_loop
        if advice and loop is not None:
            # the fix is the fused layer: its prediction is what the layer measured, where the per-op bound (what
            # every op at a bare dispatch would save) is more, that bound is evidence, not the fix's promise
            beyond = (f"; every op at a bare dispatch would save at most {overhead:.2f} ms a step (an upper bound: "
                      "a larger batch)" if overhead > saved and not shared else "")
            return Verdict("launch_bound", evidence + beyond + " (predicted speed-up: the cell loop's measured time "
                           "replaced by the fused layer's)", action, step_speedup(r, step, step - min(saved, compute)),
                           title=(f"An nn.{loop.kind}" if loop.layers == 1 else f"{loop.layers} stacked nn.{loop.kind}s")
                           + " stepped in a Python loop",
                           brief=f"the loop took {ms(stepped)}, one nn.{loop.fused} call {ms(whole)} (measured)",
                           fix=f"self.rnn = {loop.layer()}; out, state = self.rnn(x)")
    if overhead < LAUNCH_GAIN * step:
        return None  # ops already as cheap as a bare dispatch each: nothing per op left to save
    # upper bound: the step without its per-op overhead
    title, brief, fix = words
    kind = _closure_optimizer(r) if r.model.device == "cpu" else None
    if kind is not None:
        # no lever reaches the bound: trainspeed.fit takes no closure, and a larger batch changes the recipe
        return Verdict("launch_bound", evidence + f" (no prediction: every op at a bare dispatch would save at most "
                       f"{overhead:.2f} ms a step, and no setting gets there: {kind}'s closure is not "
                       "trainspeed.fit's shape)", action, None, title=title, brief=brief, fix=fix,
                       unpredicted=f"{kind}'s closure is not trainspeed.fit's shape; a larger batch changes the "
                       "recipe")
    return Verdict("launch_bound", evidence + " (predicted speed-up is an upper bound)", action,
                   step_speedup(r, step, step - overhead), title=title, brief=brief, fix=fix)


def _closure_optimizer(r: WatchResult) -> str | None:
    """The class of the run's optimizer where its step takes a closure that runs the model (`CLOSURE_OPTIMIZERS`)."""
    info = r.optimizers.info
    return info.kind if info is not None and info.kind in CLOSURE_OPTIMIZERS else None


Words = tuple[str, str, str]
"""A verdict's title, brief and fix."""


def _gpu_launches(r: WatchResult, ops: float, compute: float) -> tuple[str, str, float, Words] | None:
    """CUDA: the GPU's work against the host's time in forward, backward and the optimizer (waiting on data or on the
    disk leaves a GPU idle too, but that is not the launches' fault): (evidence, action, the overhead: the host's time
    beyond the kernels back to back) where the GPU works under DEVICE_BUSY_LOW of it."""
    busy_ms = gpu_busy_ms(r)
    if busy_ms is None or busy_ms / compute >= DEVICE_BUSY_LOW:
        return None
    per_op = compute * 1e3 / ops
    kernels = f"{r.window.kernels_per_step:.0f} kernels" if r.window.kernels_per_step else "kernels"
    evidence = (f"{ops:.0f} ops and {kernels} per step, {per_op:.1f} us of host time each; the GPU "
                f"works {busy_ms * 1e3:.0f} us of the {compute:.2f} ms the host spends in forward+backward+optimizer "
                f"({busy_ms / compute:.0%}, from {busy_source(r)}): launching work costs more than doing it")
    action = ("capture the step as a CUDA graph (trainspeed.fit does it, and measures whether it pays) or "
              "torch.compile it (mode='reduce-overhead'); raise the batch size")
    words = ("Launching GPU kernels costs more than running them",
             f"{ops:.0f} ops a step at {per_op:.1f} us each; the GPU works {busy_ms / compute:.0%} of that time",
             "torch.compile(model, mode=\"reduce-overhead\"), or a larger batch")
    return evidence, action, compute - busy_ms, words


def _cpu_dispatches(r: WatchResult, c: Context, ops: float, compute: float) -> tuple[str, str, float, Words] | None:
    """CPU: the ops' arithmetic (FLOPs at the measured rates, and the work the FLOP formulas do not see) under
    ARITHMETIC_LOW of forward, backward and the optimizer, and small per op: (evidence, action, the overhead: what
    is left of the compute if each op cost only its bare dispatch plus its work, the ops with real arithmetic at the
    time they took in the profiler window)."""
    arithmetic = arithmetic_ms(r, c)
    if arithmetic is None:
        return None
    # work the FLOP formulas do not see (an LSTM layer, an embedding bag) is work all the same
    work = arithmetic + op_work(r, c)[0]
    if work / compute >= ARITHMETIC_LOW:
        return None
    if work * 1e3 / ops >= OP_WORK_DISPATCHES * c.dispatch_us:
        return None  # big ops running slow: not their fixed cost (a loaded machine, memory-bound ops)
    per_op = compute * 1e3 / ops
    which = " in forward, backward and the optimizer" if r.window.edge_ops_per_step is not None else ""
    evidence = (f"{ops:.0f} ops per step{which} average {per_op:.1f} us each; their arithmetic "
                f"({(r.window.flops_per_step or 0.0) / 1e6:.2f} MFLOP) needs {arithmetic * 1e3:.1f} us at "
                f"{rates_text(r, c)}, {arithmetic / compute:.0%} of the {compute:.2f} ms of "
                f"forward+backward+optimizer: per-op overhead fills the step")
    action = ("do more work per op: a larger batch, or a captured or compiled step (trainspeed.fit replays "
              "the step's ops without Python and compiles long jobs); intra-op threads do not help ops this small")
    if r.window.compiled:
        action = ("the model is compiled already: what is left per op runs around its graph - the optimizer's "
                  "updates (fused=True, or the optimizer step compiled too), the loss, the graph's own guards and "
                  "calls; a larger batch, or trainspeed.fit, which captures the whole step with its optimizer; "
                  "intra-op threads do not help ops this small")
    fix = "a larger batch, or trainspeed.fit, which replays the step without Python"
    kind = _closure_optimizer(r)
    if kind is not None:
        action = (f"do more work per op: a larger batch (more samples in each of the closure's passes); "
                  f"trainspeed.fit does not take {kind}'s closure; intra-op threads do not help ops this small")
        fix = f"a larger batch ({kind}'s closure is not trainspeed.fit's shape)"
    big_ms, big_calls, big_at_peak = sized_arithmetic(r, c)
    kept = max(0.0, work - big_at_peak) + max(big_ms, big_at_peak)
    if big_calls:
        evidence += (f"; the {big_calls:.0f} with real arithmetic (matrix products, convolutions) took "
                     f"{big_ms * 1e3:.0f} us in the profiler window, their rate on these shapes")
    words = ("Too many small ops: each costs more than its arithmetic",
             f"{ops:.0f} ops a step at {per_op:.1f} us each; their arithmetic is {pct(arithmetic / compute)} of it",
             fix)
    return evidence, action, compute - (kept + (ops - big_calls) * c.dispatch_us / 1e3), words


def _fused_cells(r: WatchResult, c: Context, ops: float,
                 compute: float) -> tuple[float, str, str, bool] | None:
    """A recurrent cell stepped over the sequence in Python, where its fused layer was measured on the run's shapes
    (`Context.cell_ms`): (ms a step saved, the evidence's words, the advice (empty where the saving is under
    LAUNCH_GAIN of the step), whether the loop's time in the run is its share of the ops, beside busy processes). The
    per-op model's bound does not see it: a fused layer does the sequence's arithmetic in one op (an LSTMCell loop ran 3.61x slower than nn.LSTM
    on training time where the per-op bound said 1.88x). `ops`, `compute`: forward, backward and the optimizer's
    ops and milliseconds in the median step."""
    loop = r.model.cell_loop
    if loop is None or c.cell_ms is None:
        return None
    stepped, whole = c.cell_ms
    calls = max(loop.passes_per_step, 1.0)
    # the probe gives the ratio, the run the time: the loop took at most the run's forward and backward (a probe
    # on a machine busier than during the run read the loop slower, and a prediction of 3.70x where 2.26x was had)
    in_run = min(stepped * calls, phase_ms(r, "forward") + phase_ms(r, "backward"))
    judged = ""
    shared = bool(others_busy(r) and c.cell_ops and ops > 0)
    if shared:
        # beside busy processes the probe reads one thread's CPU time and the phases are judged less their waits, two
        # clocks a heavy load sets apart (the phases can stay several times alone's): the loop's part of the run is
        # its share of the ops there, which a load that stretches every op alike leaves as it is
        loop_ops = min((c.cell_ops or 0) * loop.calls_per_step, ops)
        in_run = compute * loop_ops / ops
        judged = (f"; beside busy processes its time in the run is its share of the ops: {loop_ops:.0f} of the "
                  f"{ops:.0f} in forward, backward and the optimizer, {in_run:.2f} ms of their {compute:.2f} ms")
    saved = max(0.0, in_run * (1 - whole / stepped)) if stepped > 0 else 0.0
    words = (f"; {loop.cells()} run{'s' if loop.layers == 1 else ''} {loop.calls_per_step:.0f} times a step "
             f"in a Python loop: over {loop.length()} time steps on a batch of {r.model.batch_size}, forward and backward"
             f"{f' (the loop timed over {PROBE_STEPS} of them, scaled)' if loop.length() > PROBE_STEPS else ''}, that "
             f"loop took {stepped:.2f} ms and {loop.layer()} over the same sequence {whole:.2f} ms (measured after "
             f"the run{', in ' + loop.dtype if loop.dtype != 'float32' else ''})" + judged)
    if saved < LAUNCH_GAIN * (r.steps.median_ms or 0.0):
        # in float64 a CPU's nn.LSTM runs each time step's ops as the cells do (no oneDNN kernel): two stacked cells
        # took 135 ms and the layer 146 ms (an LBFGS sine-wave model; 123 against 52 ms in float32)
        return saved, words + f": the fused layer would save under {LAUNCH_GAIN:.0%} of the step here", "", shared
    advice = (f"run the sequence through {loop.layer()} in one call instead of the nn.{loop.kind} loop (one fused "
              "op; cuDNN's on a GPU): out, state = layer(x) with x of shape (batch, time, features)")
    return saved, words, advice, shared


def small_batch(r: WatchResult, c: Context, launch: Verdict | None) -> Verdict | None:
    if launch is None or r.model.batch_size is None or r.model.batch_size > SMALL_BATCH:
        return None
    micro = round(r.steps.micro_batches_per_step or 1)
    if micro >= 2:
        return _micro_batches(r, c, micro)
    calls = round(r.steps.model_calls_per_step or 1)
    evidence = (f"batch of {r.model.batch_size} on a step dominated by per-op overhead: a step costs about the same "
                "whatever the batch, so samples per second grow with it")
    action = (f"raise the batch size (try {r.model.batch_size * 4}) and scale the learning rate; " + LARGEST_BATCH)
    if calls >= 2 and r.model.batch_size == 1:
        if (r.steps.model_calls_after_read or 0) >= (calls - 1) / 2:
            after = min(r.steps.model_calls_after_read or 0, calls - 1)
            evidence = (f"the model is called {calls} times per step on a batch of 1, and before most calls the host "
                        f"read a tensor's value ({after:.0f} of them): each input waits for the last "
                        "output (an agent acting on the action it sampled, a decoder fed the token it picked), so "
                        "these calls cannot be stacked after the fact, and every one pays the model's per-op overhead "
                        "for one sample")
            action = ("act for several environments (or sequences) at once: step N of them together and call the "
                      "model once per step on all N (a vectorised environment); choose actions under torch.no_grad() "
                      "and keep the observations, then recompute the rollout's log-probabilities in one batched "
                      "forward when updating")
            return Verdict("small_batch", evidence, action, None, title="One sample per model call, each waiting on the last",
                           brief=f"{calls} model calls a step on a batch of 1, {after:.0f} of them after a host read",
                           fix="step N environments (or sequences) together; one model call on all N",
                           unpredicted="each call waits on the last: batching them changes the loop")
        if (r.steps.model_calls_chained or 0) < (calls - 1) / 2:
            return _one_at_a_time(r, c, calls)
        evidence = (f"the model is called {calls} times per step on a batch of 1, each call given an earlier one's "
                    "output (a recurrent cell stepped by hand over a sequence): every call pays the per-op overhead "
                    "of the whole cell for one sample")
        action = ("step several sequences at once (a batch of them, padded or packed with "
                  "torch.nn.utils.rnn.pack_sequence), or run the whole sequence through nn.RNN, nn.GRU or nn.LSTM "
                  "in one call")
        return Verdict("small_batch", evidence, action, None, title="A recurrent model stepped one sample at a time",
                       brief=f"{calls} chained model calls a step, each on a batch of 1",
                       fix="a batch of sequences, or the whole sequence through nn.LSTM / nn.GRU in one call",
                       unpredicted="not measured with a batch of sequences")
    return Verdict("small_batch", evidence, action, None, title="A small batch on a step of per-op overhead",
                   brief=f"batch of {r.model.batch_size}: a step costs about the same at any batch size",
                   fix=f"batch_size={r.model.batch_size * 4} (and scale the learning rate)",
                   unpredicted="a larger batch changes the training recipe")


def _one_at_a_time(r: WatchResult, c: Context, k: int) -> Verdict | None:
    """small_batch where the model is called k times per step on one sample each, the calls independent of
    each other (a list comprehension over the batch's rows): the same model as `_micro_batches`, one
    forward over the k samples in place of k."""
    words = ("Samples fed to the model one at a time", f"{k} model calls a step, one sample each: "
             "{passes} of forward and backward", f"model(x) on the batch of {k}, not model(x[i:i+1]) per row")
    return _merged_passes(r, c, k, words, (
        f"the model is called {k} times per step on a batch of 1 (samples fed one at a time, each call "
        "independent of the others): {passes:.2f} ms of forward+backward per step, most of it per-op overhead "
        f"that each call pays again (predicted speed-up: forward, backward and the {{around:.2f}} ms of torch ops "
        f"around them, the slicing and concatenating, run once per step instead of {k} times, the arithmetic as "
        "before)"),
        f"stack the {k} samples into one tensor and call the model once (model(x) on the batch of {k}, not "
        f"model(x[i:i+1]) per row); its output rows are the per-sample outputs, in the same order")


def _micro_batches(r: WatchResult, c: Context, k: int) -> Verdict | None:
    """small_batch where a step accumulates gradients over k small micro-batches: each forward and backward
    pays the per-op overhead of the whole model for a few samples. One pass over all k of them runs the
    same ops once."""
    batch = k * (r.model.batch_size or 0)
    words = ("Gradients accumulated over tiny micro-batches", f"{k} passes of a batch of {r.model.batch_size} a "
             "step: {passes} of forward and backward", f"one batch of {batch} a step (its mean loss)")
    return _merged_passes(r, c, k, words, (
        f"{k} forward and backward passes of a batch of {r.model.batch_size} per optimizer step (gradients "
        "accumulated over micro-batches): {passes:.2f} ms of forward+backward per step, most of it per-op "
        "overhead that each pass pays again (predicted speed-up: forward, backward and the {around:.2f} ms of "
        f"torch ops around them run once per step instead of {k} times, the arithmetic as before)"),
        f"feed the step's {batch} samples as one batch of {batch}: its mean loss has the gradient that "
        f"accumulating `loss / {k}` over the micro-batches gives; accumulate only micro-batches too big for "
        "memory (" + LARGEST_BATCH + ")")


def _merged_passes(r: WatchResult, c: Context, k: int, words: Words, evidence: str, action: str) -> Verdict | None:
    """small_batch's prediction where a step runs k small passes that could be one. Model: forward and
    backward, less their work (arithmetic and heavy ops on a CPU, the GPU's busy time on CUDA), and the ops
    outside every phase (the loss scaled by 1/k, a slice of the batch) each run once a step instead of k
    times; the optimizer and the script's own Python stay. `evidence` is formatted with `passes` and
    `around`, the milliseconds of forward+backward and of those ops; the brief of `words` with `passes`."""
    step = r.steps.median_ms
    if not step or compute_ms(r) <= 0:
        return None
    passes = compute_part_ms(r, "forward", "backward")
    if r.model.device == "cuda":
        work = gpu_busy_ms(r) or 0.0
    else:
        work = (arithmetic_ms(r, c) or 0.0) + op_work(r, c)[0]
    around = min(phase_ms(r, "other"), (r.window.other_op_ms_per_step or 0.0) * window_scale(r))
    saved = (max(0.0, passes - work) + around) * (1 - 1 / k)
    title, brief, fix = words
    return Verdict("small_batch", evidence.format(passes=passes, around=around), action,
                   step_speedup(r, step, step - saved), title=title, brief=brief.format(passes=ms(passes)), fix=fix)


def cpu_faster(r: WatchResult, c: Context, launch: Verdict | None) -> Verdict | None:
    if r.model.device != "cuda" or launch is None or not r.window.kernels_per_step or not r.steps.median_ms or c.cuda_op_us is None:
        return None
    # the same step on the CPU: the host work stays (Python, autograd, dispatch), each kernel launch
    # becomes a CPU op's dispatch, the waits for the GPU (reads) and the copies to it go, and the
    # arithmetic runs at the CPU's measured rate
    step = r.steps.median_ms
    per_launch = max(0.0, c.cuda_op_us - c.dispatch_us)
    launches_ms = r.window.kernels_per_step * per_launch / 1e3
    cpu_step = step - phase_ms(r, "sync") - phase_ms(r, "h2d") - launches_ms + (arithmetic_ms(r, c) or 0.0)
    if cpu_step >= step:
        return None
    evidence = (f"predicted CPU step {cpu_step:.2f} ms against {step:.2f} ms measured on the GPU: the GPU step "
                f"less its reads and copies ({phase_ms(r, 'sync') + phase_ms(r, 'h2d'):.2f} ms) and {r.window.kernels_per_step:.0f} "
                f"launches at {per_launch:.1f} us each (a tiny CUDA op measured {c.cuda_op_us:.1f} us "
                f"here, a CPU op {c.dispatch_us:.1f} us), plus the arithmetic at this CPU's measured "
                f"{c.matmul_gflops:.0f} GFLOP/s")
    action = "for a model this small, train on the CPU (or make the GPU step bigger: batch, CUDA graphs)"
    return Verdict("cpu_faster", evidence, action, step_speedup(r, step, cpu_step),
                   title="This model would train faster on the CPU",
                   brief=f"predicted CPU step {ms(cpu_step)} against {ms(step)} measured on the GPU",
                   fix='device = "cpu"  # for a model this small; or a larger step on the GPU')
