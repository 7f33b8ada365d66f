"""The model of a watched run and what it is fed: which module is the model, its input, its device, the batch
size, autocast, and the bytes copied to the device.

`ModelTracker` learns them from the outermost module calls of the first steps and from the copies to a device.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

from trainspeed.watch.autocast import autocast_dtype
from trainspeed.watch.cells import CellLoop, cell_of, time_first
from trainspeed.watch.result import ModelFacts


def first_tensor(args: tuple[Any, ...]) -> torch.Tensor | None:
    """The first tensor of a call's arguments, or of a dict among them (a batch of named tensors passed whole). A
    list of tensors is left alone: a detection model's list of images is a batch of one tensor per sample."""
    for a in args:
        if isinstance(a, torch.Tensor):
            return a
        if isinstance(a, dict):
            found = next((t for t in a.values() if isinstance(t, torch.Tensor)), None)
            if found is not None:
                return found
    return None


def has_parameters(module: torch.nn.Module) -> bool:
    return any(True for _ in module.parameters())


class ModelTracker:
    def __init__(self) -> None:
        self.model: weakref.ref[torch.nn.Module] | None = None
        self.model_id = 0
        """id() of the model (0 until it is known)."""
        self.input_spec: tuple[list[int], torch.dtype] | None = None
        """The shape of one sample of the model's first input (without its batch dimension) and its dtype."""
        self.batch_dim = 0
        """The dimension of the model's first input that holds the batch (1: a time-first sequence model's)."""
        self._input_shape: list[int] = []
        """The model's first input's whole shape, as its first training call had it."""
        self.device = "cpu"
        self.device_index = 0
        self.batch_size: int | None = None
        self.autocast: str | None = None
        """The dtype of torch.autocast around a training call of the warm-up (None: none seen)."""
        self.h2d_kinds: dict[str, int] = {}
        """Bytes copied to a device over the whole run, by source memory and mode."""
        self.cell: CellLoop | None = None
        """The first recurrent cell called with gradients on (`watch.cells`), its calls not counted here."""
        self.cell_id = 0
        """id() of that cell's module."""
        self.cell_shapes: dict[int, CellLoop] = {}
        """Each recurrent cell called with gradients on, by id() of its module, in the order of their first calls."""
        self.cell_calls: dict[int, int] = {}
        """Their calls over the run, by the same key (what `stacked` reads)."""
        self.sequence_seen = False
        """Whether a sequence layer's first training call was looked at (`sequence_called`)."""

    def learn(self, module: torch.nn.Module, args: tuple[Any, ...]) -> bool:
        """The model, its input, its device and the batch size, from an outermost module call of the first steps.
        True where this call shows, for the first time, that the run is on a CUDA device."""
        first = first_tensor(args)
        if first is None:
            return False
        if self.model is None and has_parameters(module) and torch.is_grad_enabled():
            # the first outermost module with parameters called with gradients on is the model (a loss module has
            # none; a distillation's teacher, a target network, a validation pass run under no_grad)
            self.model = weakref.ref(module)
            self.model_id = id(module)
            self._input_shape = list(first.shape)
            self.input_spec = (self._input_shape[1:], first.dtype)
        cuda = first.device.type == "cuda" and self.device != "cuda"
        if cuda:
            self.device, self.device_index = "cuda", first.device.index or 0
        if self.batch_size is None and first.dim() > 0 and torch.is_grad_enabled():
            # a training call's: a validation pass run before training (Lightning's sanity check, under no_grad)
            # has its own batch size. A vector of floats is one sample's features (a policy called on one
            # observation), where a vector of integers is a batch of ids (an embedding's)
            one = first.dim() == 1 and first.is_floating_point()
            self.batch_size = 1 if one else int(first.shape[self._batch_at(1 if time_first(module, first) else 0)])
        if self.autocast is None and torch.is_grad_enabled():
            self.autocast = autocast_dtype(first.device.type)
        return cuda

    def cell_called(self, module: torch.nn.Module) -> bool:
        """A recurrent cell was called with gradients on; True where it is the run's first cell (whose calls count:
        a second cell stacked on it runs as often, and counted too would double the loop's length)."""
        key = id(module)
        calls = self.cell_calls.get(key)
        if calls is None:  # its first call: its shape, once
            self.cell_shapes[key] = cell_of(module)
            if self.cell is None:
                self.cell, self.cell_id = self.cell_shapes[key], key
        self.cell_calls[key] = (calls or 0) + 1
        return key == self.cell_id

    def stacked(self) -> int:
        """How many cells form the first one's stack (`CellLoop.layers`): it, then each next cell in the order of their
        first calls that takes the last one's output (the same kind, bias and nonlinearity, the first's hidden size in
        and out) and was called as often."""
        cells = [(shape, self.cell_calls[key]) for key, shape in self.cell_shapes.items()]
        if not cells:
            return 1
        (first, calls), layers = cells[0], 1
        for cell, count in cells[1:]:
            if (count != calls or cell.kind != first.kind or cell.bias != first.bias
                    or cell.nonlinearity != first.nonlinearity
                    or cell.input_size != first.hidden_size or cell.hidden_size != first.hidden_size):
                break
            layers += 1
        return layers

    def sequence_called(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        """The first training call of an nn.LSTM, nn.GRU or nn.RNN inside the model: where it is time-first and its
        input's first dimension is the one the batch size was read from (a language model fed (time, batch) token
        windows), the batch is the input's second dimension (35 read where the batch was 20, on such a model)."""
        if self.sequence_seen or self.batch_size is None:
            return
        self.sequence_seen = True
        x = args[0] if args else None
        if time_first(module, x) and x.shape[0] == self.batch_size != x.shape[1]:  # type: ignore[union-attr]
            self.batch_size = int(x.shape[1])  # type: ignore[union-attr]
            if self._input_shape[1:2] == [self.batch_size]:  # the model's input is time-first too (token windows)
                self._batch_at(1)

    def _batch_at(self, dim: int) -> int:
        """The model's input holds its batch at `dim` (0, or 1 for a time-first one): one sample's shape without
        it (what the memory estimate builds batches of)."""
        if dim and len(self._input_shape) > dim and self.input_spec is not None:
            self.batch_dim = dim
            self.input_spec = (self._input_shape[:dim] + self._input_shape[dim + 1:], self.input_spec[1])
        return dim

    def copied(self, nbytes: int, pinned: bool, non_blocking: bool) -> None:
        """A tensor was copied to an accelerator."""
        kind = ("pinned" if pinned else "pageable") + (", non_blocking" if non_blocking else "")
        self.h2d_kinds[kind] = self.h2d_kinds.get(kind, 0) + nbytes

    def part(self) -> ModelFacts:
        return ModelFacts(self.device, self.batch_size, self.autocast, dict(self.h2d_kinds))
