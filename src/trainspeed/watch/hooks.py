"""Where the watcher listens: PyTorch's own hooks first, a few wrapped functions where none exist.

Every patch keeps a reference to the original and calls it unchanged, so what the user's code
computes is untouched; `uninstall()` puts every original back, in reverse order.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.utils.data.dataloader as dataloader_module

from trainspeed.probe.page_faults import faults_since, minor_faults
from trainspeed.watch import frameworks
from trainspeed.watch.cells import CELL_TYPES, RECURRENT_TYPES
from trainspeed.watch.edges import PhaseEdges
from trainspeed.watch.events import Events
from trainspeed.watch.patching import Patches


def _safetensors() -> Any:
    """safetensors.torch where it is installed (None otherwise)."""
    try:
        import safetensors.torch
    except ImportError:
        return None
    return safetensors.torch


class Hooks(Patches):
    """Installs and removes the listening points, all of them or none; one method per site patched."""

    def __init__(self, events: Events, edges: PhaseEdges) -> None:
        super().__init__()
        self.events = events
        """Who hears each event (`events.py`)."""
        self.edges = edges
        """Where the phase edges go: its `enter` and `exit` are looked up at each edge (they change with the
        detail mode on CUDA)."""
        self.depth = 0  # nesting of module calls: only the outermost one is the forward phase
        self.in_data = 0
        """DataLoader calls in progress (starting an iterator, fetching a batch, stopping workers): a module
        called inside one is the data's (a transform: torchvision's are nn.Modules), not the forward phase."""
        self._data_timed: list[bool] = []
        """For each DataLoader call in progress, whether it is the data phase's: not during an evaluation, whose
        validation batches are its own time (evaluation_heavy's), not the training steps' wait on data."""
        self.optimizer_classes: set[type] = set()
        self.home = threading.get_ident()

    def _data_entered(self) -> None:  # a DataLoader call starts: the data phase, and `in_data` for module calls
        timed = not self.events.evaluating()
        self._data_timed.append(timed)
        if timed:
            self.edges.enter("data")
        self.in_data += 1

    def _data_left(self) -> bool:
        """The DataLoader call ends; whether it was the data phase's."""
        self.in_data -= 1
        timed = self._data_timed.pop() if self._data_timed else True
        if timed:
            self.edges.exit("data")
        return timed

    def framework_checkpoints(self, framework: str) -> None:
        """Time a framework's whole checkpoint as the checkpoint phase: its files written (Lightning writes the
        bytes torch.save made, outside torch.save), old ones rotated, its state saved beside them. The saves inside
        count the checkpoint; the method is patched on the framework's class, once the run shows the framework."""
        for module_name, owner_name, method in frameworks.FRAMEWORK_SAVES.get(framework, ()):
            owner = getattr(sys.modules.get(module_name), owner_name, None)
            if owner is not None and callable(getattr(owner, method, None)):
                self._patch(owner, method, lambda orig: self._phase("checkpoint", orig))

    def _phase(self, phase: str, original: Callable[..., Any],
               done: Callable[[], None] | None = None) -> Callable[..., Any]:
        """`original` timed as `phase`; `done`, if given, told after each call (a save counted)."""
        listener = self.edges

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            listener.enter(phase)
            try:
                return original(*args, **kwargs)
            finally:
                listener.exit(phase)
                if done is not None:
                    done()

        return wrapper

    def watch_optimizer(self, cls: type) -> None:
        """Time the whole of `cls.step` as the optimizer phase, on the steps the per-call hooks are in.
        torch wraps every optimizer class's step in its own Python (a profiler range and the loops
        over the step hooks): about 45 us of the seed's 0.4 ms CPU step, measured, that runs before
        the step pre hooks and after the post hooks, and would otherwise fall into "other". Called
        once per optimizer class, as the first step of one ends (the watcher learns of optimizers
        from their steps); the hooks' own optimizer phase stays inside it, for the CUDA events. The
        step edge comes inside this phase: what torch runs after the post hooks is the next step's
        optimizer time, as in every step of the run."""
        if cls in self.optimizer_classes:
            return
        self.optimizer_classes.add(cls)
        if not callable(getattr(cls, "step", None)):
            return
        E = self.edges
        L = self.events
        clock = E.clock  # the step's optimizer phase on the host clock alone (its CUDA span is the hooks')
        in_closures = [0]
        """Minor page faults the closures of the step running now took: not the optimizer's."""

        def closure_wrap(closure: Callable[[], Any]) -> Callable[[], Any]:
            # a closure the step runs (LBFGS's; Lightning's automatic optimisation runs training_step, backward and
            # its own hooks in one): its forward and backward calls time themselves, the rest of it is the script's
            # or its framework's work, not the optimizer's; on a detailed CUDA step the optimizer's device span
            # stops while it runs (its kernels are forward's and backward's)
            def run() -> Any:
                held = E.hold("optimizer")
                depth = E.open_host("other")
                faults = minor_faults()
                try:
                    return closure()
                finally:
                    if faults is not None:
                        in_closures[0] += faults_since(faults)
                    E.close_host(depth)
                    if held:
                        E.release("optimizer")
            return run

        def step_wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(orig)  # keeps torch's `hooked` mark: torch does not wrap it again
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                if self.paused or not self.live:
                    return orig(*args, **kwargs)
                if callable(kwargs.get("closure")):
                    kwargs["closure"] = closure_wrap(kwargs["closure"])
                elif len(args) > 1 and callable(args[1]):
                    args = (args[0], closure_wrap(args[1]), *args[2:])
                depth = len(clock.stack)
                clock.enter("optimizer")
                in_closures[0] = 0
                faults = minor_faults()  # a page the step's temporaries take afresh (`page_faults`)
                try:
                    return orig(*args, **kwargs)
                finally:
                    if faults is not None:
                        L.optimizer_faulted(max(0, faults_since(faults) - in_closures[0]))
                    clock.leave(depth)  # also closes phases an exception left open inside
            return wrapper

        self._patch(cls, "step", step_wrap, per_call=True)

    def install(self) -> None:
        """Put in every listening point; the per-call ones stay out while paused (they go in at `resume()`)."""
        self.live = True
        self.home = threading.get_ident()  # the watched thread: the wrappers that must not listen to others check it
        self._optimizer_steps()
        self._modes()
        self._grad_off()
        self._optimizer_builds()
        self._module_calls()
        self._backward()
        self._loaders()
        self._anomaly()
        self._copies()
        self._saves()
        self._syncs()

    def _optimizer_steps(self) -> None:
        """optimizer.step and zero_grad: the step edge, and the optimizer phase on detailed steps."""
        L = self.events
        E = self.edges
        from torch.optim import optimizer as optim_module

        # optimizer.step: PyTorch's global step hooks. The step edge (its listener's own method, no
        # frame between) is always in; the optimizer phase around it only with the per-call hooks.
        def pre(opt: torch.optim.Optimizer, a: Any, k: Any) -> None:
            E.enter("optimizer")

        def post(opt: torch.optim.Optimizer, a: Any, k: Any) -> None:
            E.exit("optimizer")
            L.step_ended(opt)

        handles: list[Any] = []

        def remove() -> None:
            while handles:
                handles.pop().remove()

        def edge_only() -> None:
            remove()
            handles.append(optim_module.register_optimizer_step_post_hook(L.step_ended))

        def with_phase() -> None:
            remove()
            handles.append(optim_module.register_optimizer_step_pre_hook(pre))
            handles.append(optim_module.register_optimizer_step_post_hook(post))

        with_phase()
        self._per_call.append((with_phase, edge_only))
        self._undo.append(remove)
        self._patch(torch.optim.Optimizer, "zero_grad", lambda orig: self._phase("optimizer", orig), per_call=True)

    def _modes(self) -> None:
        """model.eval() / model.train() on the watched thread."""
        L = self.events
        home = self.home
        # model.eval() / model.train(): a module put in evaluation mode and back, on the watched thread (the
        # span between is evaluation). Module.train sets each child's mode through child.train(): only the
        # outermost call is told
        setting = [False]

        def train_wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(orig)
            def wrapper(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
                if setting[0] or threading.get_ident() != home:
                    return orig(module, *args, **kwargs)
                setting[0] = True
                try:
                    return orig(module, *args, **kwargs)
                finally:
                    setting[0] = False
                    L.mode_set(module, bool(module.training))
            return wrapper

        self._patch(torch.nn.Module, "train", train_wrap)

    def _grad_off(self) -> None:
        """torch.no_grad() / torch.inference_mode() entered and left on the watched thread."""
        L = self.events
        home = self.home
        # torch.no_grad() / torch.inference_mode(): the outermost one entered on the watched thread, and left (a
        # validation pass without model.eval() runs under one)
        grad_off = [0]

        def enter_wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(orig)
            def wrapper(cm: Any, *args: Any, **kwargs: Any) -> Any:
                out = orig(cm, *args, **kwargs)
                if threading.get_ident() == home:
                    grad_off[0] += 1
                    if grad_off[0] == 1:
                        L.grad_off_entered()
                return out
            return wrapper

        def exit_wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(orig)
            def wrapper(cm: Any, *args: Any, **kwargs: Any) -> Any:
                try:
                    return orig(cm, *args, **kwargs)
                finally:
                    if threading.get_ident() == home and grad_off[0]:
                        grad_off[0] -= 1
                        if not grad_off[0]:
                            L.grad_off_left()
            return wrapper

        for cls in (torch.no_grad, torch.inference_mode):
            self._patch(cls, "__enter__", enter_wrap)
            self._patch(cls, "__exit__", exit_wrap)

    def _optimizer_builds(self) -> None:
        """torch.optim.Optimizer.__init__, timed."""
        L = self.events
        # an optimizer built: one built inside the loop starts with no state at every step
        self._patch(torch.optim.Optimizer, "__init__", lambda orig: self._timed(orig, L.optimizer_built))

    def _module_calls(self) -> None:
        """The outermost nn.Module call: the forward phase (a per-call hook)."""
        L = self.events
        E = self.edges
        # forward: the outermost nn.Module call. PyTorch's global module hooks would send every
        # module call down its slow path (measured: +12% on the seed's step), so Module.__call__
        # gets one thin wrapper instead; nested calls, and calls inside a DataLoader's fetch (a transform that
        # is a module, as torchvision's are), only count their depth.
        # Under torch.compile the wrapper is traced too (an OptimizedModule calls the wrapped module's
        # __call__ inside dynamo's frame): there is_compiling() is True at trace time, the branch is folded
        # away, and the compiled code calls the module alone, as unwatched
        compiling = getattr(torch.compiler, "is_compiling", lambda: False)

        def call_wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(orig)
            def wrapper(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
                if compiling():
                    return orig(module, *args, **kwargs)
                kind = type(module)
                if kind in RECURRENT_TYPES and torch.is_grad_enabled():
                    if kind in CELL_TYPES:  # a recurrent cell stepped in Python
                        L.cell_called(module)
                    else:  # a sequence layer: where it is time-first, the batch is its input's second dimension
                        L.sequence_called(module, args)
                if self.depth or self.in_data:
                    self.depth += 1
                    try:
                        return orig(module, *args, **kwargs)
                    finally:
                        self.depth -= 1
                self.depth = 1
                again = L.backward_running()  # autograd recomputing a checkpointed segment: backward's work, timed
                t0 = time.perf_counter() if again else 0.0
                E.enter("backward" if again else "forward")
                try:
                    if not again:
                        L.forward_pre(module, args, kwargs)
                    return orig(module, *args, **kwargs)
                finally:
                    self.depth = 0
                    E.exit("backward" if again else "forward")
                    if again:
                        L.recomputed(time.perf_counter() - t0)
            return wrapper

        self._patch(torch.nn.Module, "__call__", call_wrap, per_call=True)

    def _backward(self) -> None:
        """torch.autograd.backward and grad: the backward phase (per-call hooks)."""
        L = self.events
        E = self.edges
        # backward: no global hook exists for "backward started/finished", so wrap the entry points.
        # torch.autograd.grad is a backward pass too (a loop that updates its parameters from its results has no
        # backward call and may have no optimizer), but with create_graph=True (its 5th argument) it
        # differentiates a term of the loss (a gradient penalty, a PINN's derivatives): no pass of its own
        def backward_wrap(orig: Callable[..., Any], create_graph_at: int | None = None) -> Callable[..., Any]:
            @functools.wraps(orig)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                E.enter("backward")
                try:
                    return orig(*args, **kwargs)
                finally:
                    E.exit("backward")
                    if create_graph_at is None or not kwargs.get(
                            "create_graph", len(args) > create_graph_at and args[create_graph_at]):
                        L.backward_done()
            return wrapper

        # Tensor.backward calls torch.autograd.backward, so one wrapper sees both
        self._patch(torch.autograd, "backward", backward_wrap, per_call=True)
        self._patch(torch.autograd, "grad", lambda orig: backward_wrap(orig, create_graph_at=4), per_call=True)

    def _loaders(self) -> None:
        """A DataLoader's iterators: started, asked for batches, their workers stopped."""
        L = self.events
        home = self.home
        # data: waiting on a DataLoader iterator, and starting one (`for x in loader` starts the
        # workers of a loader without persistent_workers anew each epoch); a start is timed with
        # its first batch, the wait for workers that have just started
        fresh: dict[int, float] = {}
        """id(iterator) -> seconds its start took, until its first batch."""

        def iter_wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(orig)
            def wrapper(loader: Any) -> Any:
                self._data_entered()
                t0 = time.perf_counter()
                try:
                    it = orig(loader)
                finally:
                    took = time.perf_counter() - t0
                    self._data_left()
                if len(fresh) > 64:  # iterators started and never read
                    fresh.clear()
                fresh[id(it)] = took
                return it
            return wrapper

        def next_wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(orig)
            def wrapper(it: Any) -> Any:
                new = L.loader_seen(it)
                self._data_entered()
                started = fresh.pop(id(it), None) if fresh else None  # this iterator's first batch
                t0 = time.perf_counter() if started is not None else 0.0
                try:
                    batch = orig(it)
                except StopIteration:  # a pass ran out: no batch handed out
                    L.loader_ran_out(it)
                    raise
                finally:
                    timed = self._data_left()
                    if started is not None and timed:
                        L.loader_started(started + time.perf_counter() - t0, False)
                if new:
                    L.loader_batch(it, batch)
                return batch
            return wrapper

        self._patch(dataloader_module.DataLoader, "__iter__", iter_wrap)
        self._patch(dataloader_module._BaseDataLoaderIter, "__next__", next_wrap)
        # an iterator with workers stops them (joins each process) when it runs out, or when it is dropped:
        # `next(iter(loader))` on every step drops one, outside every other phase. Data, and timed with the starts;
        # only on the watched thread (a garbage collection on another thread may drop one too)
        def stop_wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(orig)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                if threading.get_ident() != home:
                    return orig(*args, **kwargs)
                self._data_entered()
                t0 = time.perf_counter()
                try:
                    return orig(*args, **kwargs)
                finally:
                    if self._data_left():
                        L.loader_started(time.perf_counter() - t0, True)
            return wrapper

        self._patch(dataloader_module._MultiProcessingDataLoaderIter, "_shutdown_workers", stop_wrap)

    def _anomaly(self) -> None:
        """Autograd's anomaly detection formatting stacks, timed (a per-call hook)."""
        L = self.events
        # autograd's anomaly detection (torch.autograd.set_detect_anomaly(True), detect_anomaly()): every op
        # that records a gradient formats the Python stack through torch.fx.traceback.format_stack, looked
        # up by name on each call; timed apart, inside its phase
        import torch.fx.traceback as fx_traceback

        # (only in anomaly mode: torch.fx's tracing asks for stacks too)
        self._patch(fx_traceback, "format_stack", lambda orig: self._timed(orig, L.anomaly_stack, torch.is_anomaly_enabled),
                    per_call=True)

    def _copies(self) -> None:
        """Tensor.to and Tensor.cuda to a device: the h2d phase."""
        L = self.events
        E = self.edges
        # h2d: tensors moved from the host to a device
        def to_wrap(orig: Callable[..., Any], method: str) -> Callable[..., Any]:
            @functools.wraps(orig)
            def wrapper(t: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
                if t.device.type != "cpu":
                    return orig(t, *args, **kwargs)
                if method == "cuda":
                    dest = "cuda"
                    non_blocking = bool(kwargs.get("non_blocking", len(args) > 1 and args[1]))
                else:
                    try:
                        device, _, non_blocking, _ = torch._C._nn._parse_to(*args, **kwargs)
                    except Exception:
                        return orig(t, *args, **kwargs)
                    dest = device.type if device is not None else "cpu"
                if dest == "cpu" or dest == "meta":
                    return orig(t, *args, **kwargs)
                E.enter("h2d")
                try:
                    return orig(t, *args, **kwargs)
                finally:
                    E.exit("h2d")
                    L.h2d(t.numel() * t.element_size(), bool(t.is_pinned()), bool(non_blocking))
            return wrapper

        self._patch(torch.Tensor, "to", lambda orig: to_wrap(orig, "to"))
        self._patch(torch.Tensor, "cuda", lambda orig: to_wrap(orig, "cuda"))

    def _saves(self) -> None:
        """torch.save and safetensors.torch.save_file: the checkpoint phase."""
        L = self.events
        # checkpoint: torch.save, each call counted; and safetensors' save_file, which Hugging Face's Trainer writes
        # the model's weights with (seen by a library imported after this: `from safetensors.torch import save_file`)
        self._patch(torch, "save", lambda orig: self._phase("checkpoint", orig, L.saved))
        safetensors = _safetensors()
        if safetensors is not None:
            self._patch(safetensors, "save_file", lambda orig: self._phase("checkpoint", orig, L.saved))

    def _syncs(self) -> None:
        """torch.cuda.synchronize: a host read."""
        L = self.events
        # sync: an explicit device synchronisation, a host read like any other
        def sync_wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(orig)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return orig(*args, **kwargs)
                finally:
                    if not L.opening_window():
                        L.host_read("torch.cuda.synchronize", t0, time.perf_counter(), sys._getframe(1))
            return wrapper

        self._patch(torch.cuda, "synchronize", sync_wrap)

    def pause(self) -> None:
        super().pause()
        self.depth = 0
