"""watch/frameworks.py: the framework that runs the loop, read off a stack."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from trainspeed.watch.frameworks import Framework, framework_label, outermost


def _stack(*modules: str) -> Any:
    """Frames from the outermost module to the innermost; the innermost returned."""
    frame = None
    for name in modules:
        frame = SimpleNamespace(f_globals={"__name__": name}, f_back=frame)
    return frame


def test_the_outermost_framework_on_the_stack_is_the_one_the_user_set_up() -> None:
    # Hugging Face's Trainer calls accelerate's backward: the Trainer's settings are the user's
    hf = outermost(_stack("__main__", "transformers.trainer", "accelerate.accelerator", "torch._tensor"))
    assert hf is not None and hf.name == "transformers" and hf.version  # the installed release
    assert outermost(_stack("__main__", "accelerate.accelerator", "torch._tensor")) == \
        Framework("accelerate", outermost(_stack("accelerate.x")).version)  # type: ignore[union-attr]
    pl = outermost(_stack("__main__", "lightning.pytorch.trainer.trainer", "lightning.pytorch.loops.fit_loop",
                          "lightning.pytorch.core.optimizer", "torch.optim.optimizer"))
    assert pl is not None and pl.name == "lightning"
    assert outermost(_stack("__main__", "mylib.train", "torch.autograd")) is None  # a loop of the script's own
    assert outermost(_stack("__main__", "transformersplus.loop")) is None  # a name that only starts alike


def test_a_framework_is_labelled_with_its_release() -> None:
    assert framework_label(Framework("transformers", "5.24.0")) == "Hugging Face's Trainer (transformers 5.24.0)"
    assert framework_label(Framework("ignite", None)) == "PyTorch-Ignite's Engine (ignite)"
