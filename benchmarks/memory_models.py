"""Memory estimate on models people load: Hugging Face configs and torchvision classifiers (random weights).

    python benchmarks/memory_models.py                # GPT-2, BERT, Llama, T5 (small), predicted vs measured peak
    python benchmarks/memory_models.py --torchvision  # ResNet-50 and ViT-B/16 on 128x128 images, the same table
    python benchmarks/memory_models.py --llama-7b     # a 7B Llama-shaped config: estimate only, its time and RSS growth
    python benchmarks/memory_models.py --attention --device cuda  # each way of calling attention, on the GPU's kernels

Needs `pip install 'trainspeed[transformers]'` (or `[torchvision]`). Each Hugging Face model is wrapped
so that its forward returns the loss the model computes from `labels` (the causal-LM, masked-LM or
seq2seq loss), as a `Trainer` step does; a torchvision model's loss is the mean of its logits. The
optimizer is AdamW.
"""

from __future__ import annotations

import argparse
import datetime
import time
from collections.abc import Callable
from typing import Any

import psutil
import torch
from torch import nn

from trainspeed.hardware import detect_hardware
from trainspeed.memory import estimate_memory, measure_memory
from trainspeed.workloads.hf_configs import SEQ, WithLoss, small_models, token_ids

Case = tuple[Callable[[], nn.Module], Callable[[int], torch.Tensor]]


def _attention_kernels(factory: Callable[[], nn.Module], inputs: Callable[[int], torch.Tensor], batch: int,
                       amp: str | None, device: str) -> str:
    """The attention kernels a real step runs (flash, efficient, cudnn, the CPU's flash; "math" for none)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from trainspeed.memory.measure import build_real
    from trainspeed.memory.step import StepSetup, default_loss, input_maker, training_step

    seen: set[str] = set()

    class Ops(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            name = str(func)
            if name.startswith("aten._scaled_dot_product_") and "backward" not in name:
                seen.add(name.removeprefix("aten._scaled_dot_product_").split("_attention")[0])
            return func(*args, **(kwargs or {}))

    model = build_real(factory, torch.device(device), False)
    optimizer = torch.optim.AdamW(model.parameters())
    with Ops():
        training_step(model, optimizer, StepSetup(input_maker(inputs), default_loss, amp, device), batch,
                      torch.device(device))
    return ", ".join(sorted(seen)) or "math"


def accuracy(cases: dict[str, Case], batches: tuple[int, ...], what: str, device: str = "cpu",
             kernels: bool = False) -> None:
    print("| model | amp | batch |" + (" attention kernel |" if kernels else "")
          + " predicted | measured | error | estimate time |")
    print("|---|---|---:|" + ("---|" if kernels else "") + "---:|---:|---:|---:|")
    errors = []
    for name, (factory, inputs) in cases.items():
        for amp in (None, "bf16"):
            for batch in batches:
                torch.manual_seed(0)
                t0 = time.perf_counter()
                est = estimate_memory(factory, inputs, batch, optimizer="adamw", amp=amp, device=device).total_bytes
                seconds = time.perf_counter() - t0
                real = measure_memory(factory, inputs, batch, optimizer="adamw", amp=amp, device=device).peak_bytes
                errors.append((est - real) / real * 100)
                kernel = f" {_attention_kernels(factory, inputs, batch, amp, device)} |" if kernels else ""
                print(f"| {name} | {amp or 'fp32'} | {batch} |{kernel} {est:,} | {real:,} | {errors[-1]:+.3f}% "
                      f"| {seconds:.1f} s |", flush=True)
    print(f"\nlargest error {max(errors, key=abs):+.3f}% over {len(errors)} cases ({what}, AdamW).")


def llama_7b() -> None:
    import transformers as hf

    hf.logging.set_verbosity_error()
    config = hf.LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                            num_key_value_heads=32, vocab_size=32000, max_position_embeddings=2048)
    proc = psutil.Process()
    print("| amp | predicted peak | params | grads | optimizer | activations | transient | estimate time | RSS growth |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for amp in (None, "bf16"):
        rss = proc.memory_info().rss
        t0 = time.perf_counter()
        est = estimate_memory(lambda: WithLoss(hf.LlamaForCausalLM(config)),
                              lambda b: torch.randint(0, 32000, (b, 2048)), 1, optimizer="adamw", amp=amp)
        seconds = time.perf_counter() - t0
        grown = (proc.memory_info().rss - rss) / 2**20
        gib = {k: v / 2**30 for k, v in est.breakdown.items()}
        print(f"| {amp or 'fp32'} | {est.total_bytes / 2**30:.2f} GiB | {gib['params']:.2f} | {gib['grads']:.2f} | "
              f"{gib['optimizer']:.2f} | {gib['activations']:.2f} | {gib['transient']:.2f} | {seconds:.1f} s | "
              f"{grown:+.0f} MiB |")
    print(f"\n{est.param_count / 1e9:.2f}B parameters, batch 1, sequence 2048, AdamW. Notes: {'; '.join(est.notes)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torchvision", action="store_true", help="ResNet-50 and ViT-B/16 instead")
    parser.add_argument("--llama-7b", action="store_true", help="estimate a 7B Llama config instead")
    parser.add_argument("--attention", action="store_true",
                        help="each way of calling attention (workloads.attention), with the kernel the real step ran")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    hw = detect_hardware()
    where = (f"{hw.gpu.gpus[0].name}, driver {hw.gpu.gpus[0].driver}" if args.device == "cuda" and hw.gpu.gpus
             else f"{hw.cpu.model} ({hw.cpu.microarchitecture})")
    print(f"Measured {datetime.date.today()} on {args.device}: {where}; torch {hw.torch_version}.\n")
    if args.attention:
        from trainspeed.workloads.attention import ATTENTION_CASES

        accuracy(dict(ATTENTION_CASES), (8,), "sequence 64, 4 heads of 16", args.device, kernels=True)
    elif args.llama_7b:
        llama_7b()
    elif args.torchvision:
        from trainspeed.workloads.vision_models import small_vision_models

        vision = {name: (m.build, m.images) for name, m in small_vision_models().items()}
        accuracy(vision, (1, 32), "128x128 images", args.device)
    else:
        accuracy({name: (factory, token_ids) for name, factory in small_models().items()}, (1, 8), f"sequence {SEQ}",
                 args.device)


if __name__ == "__main__":
    main()
