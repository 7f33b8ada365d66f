"""Track the life of every tensor storage through a training step, and the peak of live bytes.

A storage is born when an op returns a tensor whose storage none of the op's inputs had (views
and in-place results alias an input, so they cost nothing new); it dies when its Python object
is finalised, which PyTorch delays until no tensor - Python or C++ (autograd's saved tensors) -
holds it. Storages are shared by views, so each is counted once. Works on fake (meta-backed)
tensors, so a step of a 7-billion-parameter model is replayed without allocating it.

One choice of the autograd engine is made differently for fake tensors and is put back here: where
two gradients meet at one input of a node, the engine adds the second into the first in place when
it holds the only reference to the first (InputBuffer's `accumulate`, torch/csrc/autograd/
input_buffer.cpp), but never into a tensor subclass, which a fake tensor is. So a backward
`aten.add.Tensor` whose first operand (not a view) dies before the next op is counted as that
in-place add: no new bytes at its peak.

Sharded training (FSDP2) is followed too: a DTensor's bytes are its local shard's, and a storage resized in place
(`UntypedStorage.resize_`, which no dispatch mode sees: FSDP2 frees and re-allocates its unsharded parameters that
way) ends its block and starts a new one of the new size (its op RESIZED).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


@dataclass
class Block:
    """One storage's life: bytes, when it was born and died (event numbers), and where."""

    key: int
    nbytes: int
    born: int
    phase: str
    died: int | None = None
    op: str | None = None
    """The op whose output it is (None: adopted, reserved or resized)."""

    def ended(self, at: int) -> None:
        """The storage died at event `at`."""
        self.died = at

    def grow(self, nbytes: int) -> None:
        """The storage turned out `nbytes` larger (a resize)."""
        self.nbytes += nbytes


def round_up(n: int, quantum: int) -> int:
    """`n` rounded up to a multiple of `quantum` (an allocator's granularity)."""
    return -(-n // quantum) * quantum if quantum > 1 else n


def local(t: torch.Tensor) -> torch.Tensor:
    """The tensor whose storage holds `t`'s bytes here: a DTensor's local shard, else `t`."""
    return getattr(t, "_local_tensor", t)


_NAMES: dict[Any, str] = {}
"""An op's name (`str(OpOverload)` formats it anew on each call: a replay asks it for every op)."""


def tensors_in(obj: Any) -> list[torch.Tensor]:
    """The tensors of an op's arguments or outputs: a tensor, a tuple or list of tensors and other values (one level
    deep, what aten ops take and return), or else whatever pytree finds inside."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        found = []
        for item in obj:
            if isinstance(item, torch.Tensor):
                found.append(item)
            elif isinstance(item, (tuple, list, dict)):
                found += [t for t in tree_flatten(item)[0] if isinstance(t, torch.Tensor)]
        return found
    return [t for t in tree_flatten(obj)[0] if isinstance(t, torch.Tensor)]


def storage_key(t: torch.Tensor) -> int:
    """Identity of a tensor's storage (one Python object per storage, shared by its views)."""
    return id(local(t).untyped_storage())


RESIZED = "UntypedStorage.resize_"
"""The `op` of a block born by resizing a storage in place (FSDP2's unsharded parameters)."""


class LiveBytes(TorchDispatchMode):
    """Dispatch mode that keeps a live-bytes timeline of storages and remembers its peak."""

    def __init__(self, quantum: int = 1,
                 workspace: Callable[[str, tuple[Any, ...], Any, dict[str, Any]], int | None] | None = None,
                 hidden: Callable[[str, tuple[Any, ...], Any], list[tuple[torch.Tensor, int]] | None] | None = None
                 ) -> None:
        super().__init__()
        self.quantum = quantum
        """Allocation granularity: 512 models the CUDA caching allocator's rounding."""
        self.phase = "setup"
        self.clock = 0
        self.live = 0
        self.peak = 0
        self.peak_at = 0
        self.blocks: dict[int, Block] = {}
        self.history: list[Block] = []
        self.last_op: str | None = None
        self.ops: set[str] = set()
        self.ops_by_phase: dict[str, set[str]] = {}
        """The ops of each phase of the step (forward, backward, ...), by name."""
        self.workspace = workspace
        """op name, args, output, kwargs -> bytes the real kernel holds only during the op (None: some, unsized;
        the op lands in `unmodelled`)."""
        self.hidden = hidden
        """op name, args, output -> (output, real bytes) for outputs bigger than their fake storage;
        None where the op has one but its size is unknown (the op lands in `unmodelled`)."""
        self.unmodelled: set[str] = set()
        self._sum: tuple[int, int, int] | None = None
        """An engine's gradient sum awaiting its first operand's death: (its key, the peak and its moment
        had the sum been out of place)."""

    def _born(self, storage: torch.UntypedStorage, phase: str, op: str | None = None) -> None:
        key = id(storage)
        block = Block(key, round_up(storage.nbytes(), self.quantum), self.clock, phase, op=op)
        self.blocks[key] = block
        self.history.append(block)
        self.live += block.nbytes
        if self.live > self.peak:
            self.peak, self.peak_at = self.live, self.clock
        weakref.finalize(storage, self._died, key)

    def _died(self, key: int) -> None:
        if self._sum is not None and self._sum[0] == key:
            self._sum = None  # the engine's add was in place: its output took the first operand's bytes
        block = self.blocks.pop(key, None)
        if block is not None:
            self.clock += 1
            block.ended(self.clock)
            self.live -= block.nbytes

    def _settle(self) -> None:
        """An engine's gradient sum whose first operand outlived it was out of place: its peak counts."""
        if self._sum is not None:
            _, peak, at = self._sum
            self._sum = None
            if peak > self.peak:
                self.peak, self.peak_at = peak, at

    def __exit__(self, *exc: Any) -> Any:
        self._settle()
        torch.UntypedStorage.resize_ = self._resize  # type: ignore[method-assign]
        return super().__exit__(*exc)

    def _engine_sum(self, args: Any, kwargs: Any, out: Any) -> bool:
        """Whether this call may be the autograd engine adding two gradients of one input in place: in
        backward with grad mode off, a dense first operand of the output's layout (a tensor that fills its
        storage exactly is dense in any order of its strides) and not a view: a view keeps its base, and
        with it a second reference to the storage (a linear's weight gradient is `t()` of a product, a
        broadcast bias's is `sum_to`'s view), so the engine adds out of place."""
        if self.phase != "backward" or torch.is_grad_enabled() or kwargs or self.last_op != "aten.add.Tensor":
            return False
        a = args[0] if args else None
        return (isinstance(a, torch.Tensor) and isinstance(out, torch.Tensor) and len(args) == 2
                and isinstance(args[1], torch.Tensor) and a.shape == out.shape and a.dtype == out.dtype
                and not a._is_view() and (a.is_contiguous() or a.untyped_storage().nbytes() == a.numel() * a.element_size()))

    def reserve(self, nbytes: int, phase: str) -> None:
        """Count bytes held for the whole step that no tensor owns (a library's workspace)."""
        self._settle()
        block = Block(-2, nbytes, self.clock, phase)
        self.history.append(block)
        self.live += nbytes
        if self.live > self.peak:
            self.peak, self.peak_at = self.live, self.clock

    def adopt(self, tensors: Iterable[torch.Tensor], phase: str) -> None:
        """Count storages that exist before the step (parameters, optimizer state) as live."""
        for t in tensors:
            storage = local(t).untyped_storage()
            if id(storage) not in self.blocks and storage.nbytes():
                self._born(storage, phase)

    def _resized(self, storage: torch.UntypedStorage) -> None:
        """`storage` was resized in place: its block (if any) ends, and one of its new size starts."""
        key = id(storage)
        block = self.blocks.get(key)
        if block is not None:
            if round_up(storage.nbytes(), self.quantum) == block.nbytes:
                return
            self.blocks.pop(key)
            self.clock += 1
            block.ended(self.clock)
            self.live -= block.nbytes
        if storage.nbytes():
            self.clock += 1
            self._born(storage, self.phase, RESIZED)

    def __enter__(self) -> Any:
        resize = self._resize = torch.UntypedStorage.resize_

        def resized(storage: torch.UntypedStorage, size: int) -> Any:
            out = resize(storage, size)
            self._resized(storage)
            return out

        torch.UntypedStorage.resize_ = resized  # type: ignore[method-assign, assignment]
        return super().__enter__()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self._settle()
        name = _NAMES.get(func)
        if name is None:
            name = _NAMES[func] = str(func)
        self.last_op = name
        self.ops.add(name)
        self.ops_by_phase.setdefault(self.phase, set()).add(name)
        self.clock += 1
        out = func(*args, **(kwargs or {}))
        before = (self.peak, self.peak_at)
        inputs = {storage_key(a) for a in tensors_in(args)}
        if kwargs:
            inputs.update(storage_key(a) for a in tensors_in(tuple(kwargs.values())))
        for t in tensors_in(out):
            storage = local(t).untyped_storage()
            key = id(storage)
            block = self.blocks.get(key)
            if block is not None:  # an existing storage grown in place (resize_, out= with a new size)
                self._grow(block, storage.nbytes())
            elif key not in inputs:
                self._born(storage, self.phase, self.last_op)
        if self._engine_sum(args, kwargs, out):  # its peak counts only if its first operand outlives it
            self._sum = (storage_key(args[0]), self.peak, self.peak_at)
            self.peak, self.peak_at = before
        if self.hidden is not None:
            self._grow_hidden(self.hidden(self.last_op, tuple(args), out))
        if self.workspace is not None:
            scratch = self.workspace(self.last_op, tuple(args), out, kwargs or {})
            if scratch is None:
                self.unmodelled.add(self.last_op)
            elif scratch:
                self._scratch(round_up(scratch, self.quantum))
        return out

    def _grow_hidden(self, found: list[tuple[torch.Tensor, int]] | None) -> None:
        if found is None:
            self.unmodelled.add(self.last_op or "")
            return
        for t, real in found:
            block = self.blocks.get(storage_key(t))
            if block is not None:
                self._grow(block, real)

    def _grow(self, block: Block, nbytes: int) -> None:
        """A tracked storage is really `nbytes` (rounded): count what it has beyond its block."""
        grown = round_up(nbytes, self.quantum) - block.nbytes
        if grown > 0:
            block.grow(grown)
            self.live += grown
            if self.live > self.peak:
                self.peak, self.peak_at = self.live, self.clock

    def _scratch(self, nbytes: int) -> None:
        """A buffer live only while the op runs, beside its outputs."""
        block = Block(-1, nbytes, self.clock, self.phase + " scratch")
        self.history.append(block)
        if self.live + nbytes > self.peak:
            self.peak, self.peak_at = self.live + nbytes, self.clock
        self.clock += 1
        block.ended(self.clock)

    def alive_at(self, moment: int) -> list[Block]:
        """The blocks live at event `moment` (born at or before it, not yet dead)."""
        return [b for b in self.history if b.born <= moment and (b.died is None or b.died > moment)]
