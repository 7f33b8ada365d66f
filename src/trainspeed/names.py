"""What the command line offers before anything heavy is imported: the names of the built-in models, workloads,
sweep knobs (with their one-line summaries), optimizers and autocast dtypes, and the commands' defaults.

Parsing a command line, `--help` and `--version` import nothing beyond this module (no torch). The registries
that build these things take their defaults and summaries from here (`trainspeed.amp`, `sweep/knobs/`,
`sweep/sweep.py`, `memory/maxbatch.py`, `demo/runner.py`, `diagnose/compare.py`); the ones keyed by builders
(`workloads/zoo.py`, `workloads/catalog.py`, `memory/optimizers.py`) are checked against these lists in
tests/test_names.py.
"""

from __future__ import annotations

AMP_NAMES = {"bf16": "bfloat16", "fp16": "float16"}
"""`--amp` values, by the torch dtype each autocasts to."""

INPUT_DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32")
"""`memory --input-dtype` values (torch dtype names)."""

ZOO_NAMES = ("iris-mlp", "digits-cnn", "resnet-cnn", "gpt", "rnn", "inplace-mlp", "shared-layer", "encoder-gpt",
             "decoder-stack")
"""`trainspeed memory`'s built-in models (`workloads.zoo.ZOO`), in its order."""

WORKLOAD_NAMES = ("iris", "digits-cnn", "digits-aug", "mlp", "cnn", "transformer")
"""`trainspeed sweep`'s built-in workloads (`workloads.catalog.BUILTINS`), in its order."""

OPTIMIZER_NAMES = ("sgd", "sgd-momentum", "adam", "adamw", "rmsprop", "adagrad")
"""`memory --optimizer` values (`memory.optimizers`), in its order."""

HF_SHAPES = ("llama-7b", "llama-13b", "llama-70b")
"""`trainspeed memory`'s Hugging Face configs by name (`workloads.hf_config.CATALOGUE`), beside a config.json path."""

GPU_MEMORY_GIB = {
    "v100-16gb": 16, "v100-32gb": 32, "t4": 16, "a10": 24, "a30": 24, "a100-40gb": 40, "a100-80gb": 80, "l4": 24,
    "l40": 48, "l40s": 48, "h100-80gb": 80, "h100-nvl": 94, "h200": 141, "b200": 180,
    "rtx-3080": 10, "rtx-3090": 24, "rtx-4080": 16, "rtx-4090": 24,
}
"""`memory --gpu` values: each GPU's memory as its data sheet gives it (the sheets of `hardware/specs.py`), GiB."""

SHARD_MODES = ("ddp", "zero1", "fsdp", "fsdp-no-reshard")
"""`memory --shard` values (`memory.sharded`): how a data-parallel world shares the step."""

KNOB_SUMMARIES = {
    "record-every": "read the loss to the host (loss.item()) every N steps, or never",
    "batch-size": "samples per optimizer step",
    "num-workers": "DataLoader worker processes (+pin: pin_memory, +persistent: persistent_workers)",
    "threads": "torch intra-op threads (torch.set_num_threads)",
    "device": "cpu vs cuda (without CUDA the cuda side is predicted)",
    "crossover": "model width x batch size grid: where the GPU starts to beat the CPU (--values are widths)",
    "amp": "autocast dtype: fp32 (off), bf16, fp16",
    "compile": "torch.compile(model) vs eager; compile time reported apart, with the break-even step count",
    "cuda-graphs": "the whole step captured as one CUDA graph and replayed (CUDA only)",
    "accumulate": "gradient accumulation: the batch split into K micro-batches per optimizer step",
    "activation-checkpointing": "recompute each block's activations in backward instead of keeping them",
    "checkpoint-save": "none, sync (torch.save in the loop) or thread (state copied, saved in the background)",
    "world-size": "data-parallel ranks under torchrun + DDP, each 1/K of every batch (larger K predicted)",
}
"""`trainspeed sweep`'s knobs, in the order `--help` lists them: each knob class's `summary`."""

SEED_EPOCHS = 20_000
"""The seed's num_epochs: `trainspeed demo --epochs`'s default."""

SWEEP_STEPS = 50
SWEEP_REPEATS = 5
SWEEP_WARMUP = 3
"""`trainspeed sweep`'s defaults: optimizer steps per timed trial, timed trials per value, untimed steps."""

MEMORY_MARGIN = 0.10
"""`trainspeed memory --margin`'s default: the share of the budget kept free."""

COMPARE_NOISE = 0.05
"""`trainspeed compare --noise`'s default: the run-to-run band a change must clear to be called real."""
