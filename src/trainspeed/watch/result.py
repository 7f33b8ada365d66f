"""Result objects of a watched run (what `trainspeed doctor` reports). A run under torchrun's parts are in
`dist_result`."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainspeed.load.result import Load, StepWaits
from trainspeed.watch.dist_result import DistRun
from trainspeed.watch.frameworks import Framework
from trainspeed.watch.sites import Reads, Sites
from trainspeed.watch.trace import Trace

FUSED = {"LSTMCell": "LSTM", "GRUCell": "GRU", "RNNCell": "RNN"}
"""Each cell's layer over a whole sequence, in torch.nn."""


@dataclass(frozen=True)
class CellLoop:
    """A recurrent cell called in a Python loop, and how often."""

    kind: str
    """The cell's class: "LSTMCell", "GRUCell" or "RNNCell"."""
    input_size: int
    hidden_size: int
    bias: bool
    nonlinearity: str | None
    """RNNCell's ("tanh" or "relu"); None for the others."""
    calls_per_step: float = 0.0
    """Its calls per training step (with gradients on), the median over the detailed steps: the calls of the first
    such cell only (a second cell stacked on it runs as often)."""
    passes_per_step: float = 1.0
    """The model's calls with gradients on per training step, those an optimizer's closure makes included (LBFGS
    evaluates the model several times a step): the passes the loop runs in."""
    dtype: str = "float32"
    """The cell's parameters' dtype (a model made `.double()`: "float64"): the probe's modules and inputs are made in it."""
    layers: int = 1
    """The cells stacked on the first, it included: each next cell of the same kind takes the last one's output (its
    input size the first's hidden size, its own the same) and runs as often, as a fused layer's `num_layers` do (the
    classic sine-wave predictor's lstm1 and lstm2)."""

    @property
    def fused(self) -> str:
        return FUSED[self.kind]

    def cells(self) -> str:
        """The loop's cells as a user would name them: "an nn.LSTMCell(16, 64)", "2 stacked nn.LSTMCells (1, 51), then
        (51, 51)"."""
        if self.layers == 1:
            return f"an nn.{self.kind}({self.input_size}, {self.hidden_size})"
        return (f"{self.layers} stacked nn.{self.kind}s ({self.input_size}, {self.hidden_size}), then "
                f"({self.hidden_size}, {self.hidden_size})" + (" each" if self.layers > 2 else ""))

    def length(self) -> int:
        """Time steps the loop runs per call of the model: its calls per step over the model's passes."""
        return max(1, round(self.calls_per_step / max(self.passes_per_step, 1.0)))

    def layer(self) -> str:
        """The fused layer's constructor as a user would write it."""
        extra = "" if self.bias else ", bias=False"
        if self.nonlinearity not in (None, "tanh"):
            extra += f", nonlinearity={self.nonlinearity!r}"
        stacked = f", num_layers={self.layers}" if self.layers > 1 else ""
        return f"nn.{self.fused}({self.input_size}, {self.hidden_size}{stacked}, batch_first=True{extra})"


@dataclass(frozen=True)
class PhaseStat:
    """One phase of the step: median host and device milliseconds per step, and its share (its wait for a core, where
    one was read, is the load's: `WatchResult.load`)."""

    host_ms: float
    device_ms: float | None
    share: float
    """Share of the measured steps' wall time spent in this phase (shares sum to 1)."""


STEP_PHASES = ("forward", "backward", "optimizer")
"""The phases of the step's own work: the op list ranks their ops, a DataLoader's apart."""


@dataclass(frozen=True)
class OpTime:
    """One aten op in one dtype, per step of the profiler window: how often it ran and its host time."""

    op: str
    """The op's name without its overload, as torch prints it ("aten.mm")."""
    dtype: str | None
    """Its first tensor argument's dtype ("bfloat16"); None when it took no tensor."""
    calls: float
    ms: float
    """Host milliseconds per step (on the CPU, the op's own time: a CPU op runs as it is called): its calls per
    step at the least time per call any of the window's steps gave, so that a stall is not counted."""
    arithmetic: bool
    """Whether torch has a FLOP formula for the op (matmul, convolution, attention): its time is arithmetic."""
    flops: float | None
    """Its FLOPs per step, where it ran in this one dtype in the window; None otherwise."""
    phase: str | None = None
    """The phase most of its work ran in, its FLOPs or else elements (`op_counter.main_phases`): "forward",
    "backward", "optimizer", "data" (a DataLoader's collate), ..., "other" outside every phase; None where the window
    did not say."""

    @property
    def in_step(self) -> bool:
        """Whether it is the step's own work (forward, backward, the optimizer), not a loader's or a save's."""
        return self.phase is None or self.phase in STEP_PHASES


@dataclass(frozen=True)
class GpuUtil:
    available: bool
    mean: float | None
    samples: int
    sawtooth: bool
    why: str | None = None
    timeline: list[tuple[float, float]] = field(default_factory=list, repr=False)
    """(seconds since start, utilisation %) - bounded, for plots."""


@dataclass(frozen=True)
class LoaderInfo:
    num_workers: int
    pin_memory: bool
    batch_size: int | None
    persistent_workers: bool
    dataset: str | None = None
    """The class name of its dataset ("TensorDataset")."""
    item_by_item: bool = False
    """It fetches a batch one `dataset[i]` at a time and collates the items (a map-style dataset, batched by the
    loader, without `__getitems__`)."""
    batchable: bool = False
    """Item by item from a TensorDataset with torch's default collate and a plain sampler, in host memory: the same
    batches could be taken whole, one index op per tensor."""
    batches: int = 0
    """Batches it handed out while watched."""
    evaluation_batches: int = 0
    """Of them, those asked during an evaluation (all of a validation loader's)."""
    length: int | None = None
    """Batches in one pass over it, an epoch (`len(loader)`); None for an iterable dataset without a length."""
    collate: str | None = None
    """The name of its collate_fn where it is the script's own (None: torch's default_collate)."""


@dataclass(frozen=True)
class WorkerCpu:
    """What the DataLoaders' worker processes ran while the steps were measured (psutil: this process's children's
    CPU time, `machine_load`)."""

    batches: int
    """Batches the loaders with worker processes handed out meanwhile."""
    cpu_ms_per_batch: float
    """CPU milliseconds the worker processes ran per batch: making it, their side of its handover, and their starts
    (any other child process of the script's is in it too)."""


@dataclass(frozen=True)
class Compiles:
    """torch.compile's compilations while the steps were measured (dynamo's table; `watch/compiles.py`)."""

    count: int
    """Graphs compiled: after the first steps, recompiles."""
    seconds: float
    """Seconds spent compiling them and their backward."""


@dataclass(frozen=True)
class Evaluation:
    """The run's evaluations: spans from `model.eval()` to the next `model.train()` with no step between, and spans of
    `torch.no_grad()` (or inference_mode) outside every phase that called the model."""

    count: int
    """Evaluations during the measured steps (those `mean_ms` and `share` time)."""
    mean_ms: float
    share: float
    """Of the measured run's time."""
    every_steps: float | None
    """Steps from one to the next, on average over the whole run's (None: one evaluation)."""
    by: str = "model.eval()"
    """How they were told: "model.eval()" (spans to the next model.train()), "no_grad" (spans of torch.no_grad() or
    torch.inference_mode() that called the model, at most every other step), or both ("model.eval() and no_grad")."""
    in_run: int = 0
    """Evaluations in the whole run: those of the warm-up, and one before the first step, too (a script's count)."""
    step_ms: float = 0.0
    """Their time inside the measured steps, per measured step (ms): what they add to the mean step (an evaluation
    after the run's last step adds nothing to it)."""

    @property
    def seen(self) -> int:
        """The run's evaluations, as the script counts them (`count` where `in_run` was not recorded)."""
        return max(self.in_run, self.count)


@dataclass(frozen=True)
class OptimizerInfo:
    """The optimizer whose steps delimit the run's steps, as it was made."""

    kind: str
    """Its class name ("AdamW")."""
    tensors: int
    """Parameter tensors it updates."""
    elements: int
    foreach: bool | None
    fused: bool | None
    """As passed (None: torch's default: foreach on CUDA where it can, one tensor at a time on the CPU)."""


@dataclass(slots=True)
class StepRecord:
    """One measured step (kept in bounded samples)."""

    index: int
    wall_s: float
    phases: dict[str, float]
    syncs: int
    h2d_bytes: int
    device_ms: dict[str, float] | None = None
    detailed: bool = True
    """Whether forward, backward and optimizer were timed apart on this step (else they are in other)."""
    micro_batches: float | None = None
    """Forward-and-backward passes per optimizer step (`steps._micro_batches`); detailed steps only."""
    model_calls: tuple[int, int, int, int, int] | None = None
    """(calls of the model, those given a tensor autograd recorded, those after a host read since the model's
    last call, calls of the first recurrent cell, calls of the model with gradients on, an optimizer closure's
    included) in this step; detailed steps only."""
    anomaly_s: float = 0.0
    """Seconds spent formatting Python stacks for autograd's anomaly detection (detailed steps only)."""
    recompute_s: float = 0.0
    """Seconds of module calls made inside backward: activation checkpointing recomputing the forward of the segments
    it kept no activations of (`torch.utils.checkpoint`; detailed steps only). Part of the backward phase."""
    optimizer_steps: int | None = None
    """Optimizer steps taken in this step: the primary optimizer's and every other's (a GAN's two); detailed
    steps only."""
    host_reads: int = 0
    """Reads of CPU tensors' values (no synchronisation; `syncs` counts the reads of device tensors)."""
    device_span_s: float | None = None
    """On the device's clock, from the step's first phase edge to its last (CUDA events; detailed CUDA steps)."""
    waits: StepWaits | None = None
    """What the training thread and torch's intra-op threads waited for a core in each phase (`load.waits`; detailed
    steps, Linux)."""

    def timed_on_device(self, device_ms: dict[str, float], span_s: float) -> None:
        """The step's CUDA events have completed: each phase's device milliseconds, and the step's device span."""
        self.device_ms = device_ms
        self.device_span_s = span_s


@dataclass(frozen=True)
class Steps:
    """The steps tracker's part: the steps seen and measured, their times, and what the detailed steps counted."""

    seen: int
    measured: int
    median_ms: float | None
    p90_ms: float | None
    mean_ms: float | None = None
    """The measured steps' mean, from the clock's sums over all of them: the run's time per step, its slow
    steps included (None: the statistics came from warm-up steps)."""
    host_median_ms: float | None = None
    """Where the GPU set the pace (`figures.gpu_paced`): the host's own median step, shorter than `median_ms`."""
    loop_s: float | None = None
    """The training loop's wall seconds, its evaluations and saves in it (`StepSamples.loop_seconds`)."""
    syncs_per_step: float = 0.0
    host_reads_per_step: float = 0.0
    """Reads of CPU tensors' values per step (`item()`, `__index__` of an index tensor slicing a numpy array, a
    whole run's `loss.item()` on the CPU): no device waits for them, so they are no syncs; their time stays in the
    phase they ran in."""
    h2d_bytes_per_step: float = 0.0
    micro_batches_per_step: float | None = None
    """Forward-and-backward passes per optimizer step, the median over the detailed steps: above 1,
    gradients accumulated over micro-batches of `batch_size` (None: no detailed step counted)."""
    model_calls_per_step: float | None = None
    """Calls of the model (the first module with parameters called outermost) per step, the median over
    the detailed steps: above 1 with a batch of 1, samples fed one at a time (None: none counted)."""
    model_calls_chained: float | None = None
    """Of those, the calls given a tensor autograd had recorded (an earlier call's output: a recurrent
    cell stepped by hand over a sequence), the median over the detailed steps."""
    model_calls_after_read: float | None = None
    """Of those, the calls made after the host read a tensor's value since the model's last call (an agent
    acting on the action it sampled, a decoder fed the token it picked), the median over the detailed steps."""
    optimizer_steps_per_step: float | None = None
    """Optimizer steps per step, the median over the detailed steps: 2 where a second optimizer steps beside
    the primary one (a GAN's generator and discriminator); None: none counted."""
    anomaly_ms_per_step: float | None = None
    """Milliseconds per step (mean over the detailed steps) that autograd's anomaly detection spent
    storing a formatted Python stack for every op that records a gradient; 0.0 when it was off."""
    recompute_ms_per_step: float | None = None
    """Milliseconds per step (mean over the detailed steps) of module calls inside backward: activation checkpointing's
    recompute, part of the backward phase (None: no detailed step)."""
    samples: list[StepRecord] = field(default_factory=list, repr=False)
    """A bounded sample of measured steps, in order, for plots."""
    times_ms: list[float] = field(default_factory=list, repr=False)
    """A bounded uniform sample of measured step times, for the histogram."""
    phase_samples_ms: dict[str, list[float]] = field(default_factory=dict, repr=False)
    """Per phase, its milliseconds in each step of a uniform sample (at most RESERVOIR_SIZE steps): the edge
    phases from the step sample, forward, backward, optimizer and other from the detailed steps' sample. What
    `trainspeed compare` takes its intervals from."""


@dataclass(frozen=True)
class Window:
    """The profiler window's part: what torch.profiler counted per step over the steps after the warm-up."""

    ops_per_step: float | None = None
    kernels_per_step: float | None = None
    flops_per_step: float | None = None
    """FLOPs of the ops torch.profiler has formulas for (matmul, convolution), per step."""
    gpu_busy_ms_per_step: float | None = None
    """CUDA: milliseconds per step during which the GPU ran a kernel, copy or memset (the profiler
    window's CUPTI timestamps). Unlike the phases' device_ms, which span the stream between two
    edges, this leaves out the GPU's idle gaps."""
    other_ops_per_step: float | None = None
    """Aten ops per step dispatched outside every named phase: torch's own part of `other` (a functional loss, a
    metric, indexing a batch out of a tensor). None: not counted."""
    other_op_ms_per_step: float | None = None
    """Their host milliseconds per step (on CUDA their launches, not the kernels), at the least time per op of a
    window step (a stall is no time of theirs)."""
    edge_ops_per_step: float | None = None
    """CPU: aten ops per step dispatched in the edge phases (data, h2d, sync, checkpoint, comm: a DataLoader's
    row-by-row indexing and collation, a read's); with `other_ops_per_step`, what of `ops_per_step` is not
    forward, backward or the optimizer. None: not counted."""
    op_ms_per_step: float | None = None
    """CPU: every op's host milliseconds per step in the window, all together (on the window's clock:
    its steps come soon after the warm-up, and may run slower than the median step)."""
    op_calls_by_phase: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    """CPU: every op's (calls, host milliseconds) per step in the window, by the phase it ran in (`OpTime.phase`):
    what the phase's own time bounds the listed ops' by (`diagnose.op_clock`)."""
    op_times: list[OpTime] | None = None
    """CPU: the window's ops by op and dtype, most host time first (at most OP_TIMES_KEPT).
    None on CUDA, where an op's host time is its launch, not its work."""
    compiled: bool = False
    """torch.compile had compiled a graph in this process by the end of the warm-up (the run's model, most likely)."""


@dataclass(frozen=True)
class ModelFacts:
    """The model tracker's part: where the model ran, on what batch, under which autocast, fed how."""

    device: str
    """Where the model ran: "cpu" or "cuda"."""
    batch_size: int | None
    autocast: str | None = None
    """The dtype torch.autocast cast a training call of the warm-up to ("bfloat16", "float16"); None: no autocast."""
    h2d_bytes_by_kind: dict[str, int] = field(default_factory=dict)
    """Host-to-device bytes of the whole run by source memory and mode ("pinned, non_blocking", "pageable")."""
    cell_loop: CellLoop | None = None
    """A recurrent cell called in a Python loop, twice a step or more (None: none)."""


@dataclass(frozen=True)
class Process:
    """The training process as the sampler saw it: its threads, its CPU and the device memory it held."""

    torch_threads: int
    cpu_percent: float | None = None
    threads: int | None = None
    """Most threads the process had at once (psutil, sampled each second)."""
    peak_memory_bytes: int | None = None
    memory_capacity_bytes: int | None = None


@dataclass(frozen=True)
class Optimizers:
    """The optimizer tracker's part: the primary optimizer and those built while watched."""

    info: OptimizerInfo | None = None
    """The optimizer that delimits the steps (None: steps were backward calls)."""
    changes: int = 0
    """Times another optimizer took over delimiting the steps (the one before gone, or no longer stepping)."""
    built: int = 0
    """Optimizers constructed after the first optimizer step (one built inside the loop: every step)."""
    build_ms: float | None = None
    """Their mean construction time (torch.optim.Optimizer.__init__), milliseconds."""
    page_faults: float | None = None
    """Minor page faults of one optimizer step, the median over the steps the hooks timed (a closure's calls aside;
    every optimizer's steps alike); None where none was timed or the system does not count them. Each is a page of its
    temporaries handed to the process afresh: what fused=True, which updates in place, does not take."""


@dataclass(frozen=True)
class Checkpoints:
    """The checkpoint tracker's part: checkpoints (saves with no step between them) and torch.save calls."""

    saves: int = 0
    """Checkpoints saved in the whole run (warm-up included): torch.save calls with no training step between them
    are one."""
    calls: int = 0
    """torch.save calls in the whole run."""
    every_steps: float | None = None
    """Steps from one checkpoint to the next, on average (None: fewer than two)."""


@dataclass(frozen=True)
class Loaders:
    """The loader tracker's part: each DataLoader, and the iterators started during the measured steps."""

    each: list[LoaderInfo] = field(default_factory=list)
    starts: int = 0
    """DataLoader iterators started during the measured steps (one per epoch of a `for x in loader`)."""
    start_share: float | None = None
    """Share of the measured run's time those starts took, each with its first batch, and the stops of
    their worker processes (part of `data`: a loader without persistent_workers starts its worker
    processes anew at every start, and stops them at the end of every pass)."""
    start_ms: float | None = None
    """Their mean milliseconds per start (its stop included)."""


@dataclass(frozen=True)
class Machine:
    """The machine tracker's part: the workers' CPU, page faults and compiles (other processes' load is
    `WatchResult.load`)."""

    loader_workers: WorkerCpu | None = None
    """The worker processes' CPU per batch (None: no loader with workers, or fewer than 8 batches from them)."""
    page_faults_per_step: float | None = None
    """This process's minor page faults per measured step: pages of memory the system handed it afresh (None: not
    readable here)."""
    page_faults_early_per_step: float | None = None
    """The same over the warm-up's steps after the first, before the profiler window opened: the run as it faults
    unwatched, where the doctor's own memory later changed where glibc's heap ends (None: too few such steps)."""
    compiles: Compiles | None = None
    """torch.compile's compilations during the measured steps (None: none)."""


@dataclass(frozen=True)
class RunWindow:
    """The window a report covers (`WatchResult.run_window`, JSON `window`)."""

    asked: str
    """As asked: "50:150", "120s"."""
    opened_at: int | None
    """The run's step the window opened at (None: the run ended first)."""
    closed_at: int | None
    """The run's step the window closed before (None: the run ended inside the window, or before it)."""
    ended_at: int | None = None
    """The run's steps when it ended, where it ended before the window closed (None: it went on)."""
    held_s: float | None = None
    """Seconds the training stood still while the window closed: the hooks out, the probes, the report made (None:
    the report came after the script's end)."""


@dataclass(frozen=True)
class WatchResult:
    """Everything measured about a watched training run, one part per subject (each tracker's, `watch/session.py`
    joins them)."""

    steps: Steps
    phases: dict[str, PhaseStat]
    """Each phase of the step (`watch/phases.py`): its median times and its share of the measured run."""
    model: ModelFacts
    process: Process
    gpu_util: GpuUtil
    window: Window = field(default_factory=Window)
    reads: Reads = field(default_factory=Reads)
    sites: Sites = field(default_factory=Sites)
    optimizers: Optimizers = field(default_factory=Optimizers)
    checkpoints: Checkpoints = field(default_factory=Checkpoints)
    loaders: Loaders = field(default_factory=Loaders)
    machine: Machine = field(default_factory=Machine)
    load: Load | None = None
    """The machine's load: other processes' CPU, the threads' waits for a core by phase (None: nothing of it read)."""
    evaluation: Evaluation | None = None
    """Evaluations during the measured steps (None: none seen)."""
    framework: Framework | None = None
    """The training framework that ran the loop (Lightning's Trainer, Hugging Face's Trainer, accelerate, ...);
    None for a loop of the script's own."""
    distributed: DistRun | None = None
    """Under torchrun: communication, every rank (on rank 0) and the scaling prediction."""
    notes: list[str] = field(default_factory=list)
    trace: Trace | None = field(default=None, repr=False)
    """With `trace=True`: the kept detailed steps' timelines, for `trainspeed doctor --trace` (watch/trace.py)."""
    run_window: RunWindow | None = None
    """`--window`: the steps of a run that went on which these measurements cover (watch/window.py); None: the run."""
