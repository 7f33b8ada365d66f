"""What the hooks tell, and who hears it: each event is the method of the part that owns it, called from the hook with
no frame between (the watcher's own where several parts hear the same event)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Events:
    """The listeners of each of the hooks' events (`Hooks`); the watcher builds them from its parts."""

    step_ended: Callable[..., None]
    """An optimizer's step returned (torch's global post hook: the optimizer, its args and kwargs)."""
    forward_pre: Callable[[torch.nn.Module, tuple[Any, ...], dict[str, Any]], None]
    """An outermost module call is starting (not inside autograd's recompute)."""
    backward_done: Callable[[], None]
    """A backward call returned."""
    h2d: Callable[[int, bool, bool], None]
    """A tensor was copied to an accelerator: (bytes, from pinned memory, non_blocking)."""
    saved: Callable[[], None]
    """A torch.save (or safetensors' save_file) returned."""
    loader_seen: Callable[[Any], bool]
    """A batch is asked of a DataLoader iterator; True the first time its loader is seen."""
    loader_batch: Callable[[Any, Any], None]
    """A loader's first batch: (iterator, batch)."""
    loader_ran_out: Callable[[Any], None]
    """An iterator's pass ran out."""
    loader_started: Callable[[float, bool], None]
    """An iterator started and gave its first batch in these seconds, or (True) one with workers stopped them."""
    host_read: Callable[[str, float, float, Any], None]
    """torch.cuda.synchronize ran from t0 to t1, called by that frame."""
    anomaly_stack: Callable[[float], None]
    """Autograd's anomaly detection formatted a stack in these seconds."""
    backward_running: Callable[[], bool]
    """Whether backward is the innermost phase open (a module called now is autograd's recompute)."""
    recomputed: Callable[[float], None]
    """A module call inside backward took these seconds."""
    optimizer_built: Callable[[float], None]
    """An optimizer was constructed in these seconds."""
    optimizer_faulted: Callable[[int], None]
    """An optimizer's step (a closure's calls aside) took this many minor page faults."""
    mode_set: Callable[[torch.nn.Module, bool], None]
    """`module.train(mode)` returned (the outermost call, on the watched thread)."""
    grad_off_entered: Callable[[], None]
    """The outermost torch.no_grad() or torch.inference_mode() was entered on the watched thread."""
    grad_off_left: Callable[[], None]
    """...and left."""
    evaluating: Callable[[], bool]
    """Whether an evaluation is under way (a DataLoader's batches then are the evaluation's)."""
    cell_called: Callable[[torch.nn.Module], None]
    """A recurrent cell was called with gradients on."""
    sequence_called: Callable[[torch.nn.Module, tuple[Any, ...]], None]
    """An nn.LSTM, nn.GRU or nn.RNN was called with gradients on, with these arguments."""
    opening_window: Callable[[], bool]
    """Whether the watcher's own profiler window opens or closes now (its syncs are not the script's)."""
