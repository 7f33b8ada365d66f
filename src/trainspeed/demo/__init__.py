"""The seed lesson, reproduced: a tiny Iris MLP, four ways of recording its loss, on each device."""

from trainspeed.demo.result import DemoResult, DemoRun
from trainspeed.demo.runner import SEED_EPOCHS, run_demo
from trainspeed.demo.variants import VARIANTS

__all__ = ["DemoResult", "DemoRun", "SEED_EPOCHS", "VARIANTS", "run_demo"]
