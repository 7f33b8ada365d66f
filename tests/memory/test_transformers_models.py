"""The memory estimate on Hugging Face models built from configs (the `transformers` extra)."""

from __future__ import annotations

import pytest
import torch

from trainspeed.memory import estimate_memory, measure_memory

pytest.importorskip("transformers", reason="the transformers extra is not installed")

from trainspeed.workloads.hf_configs import SEQ, VOCAB, small_models  # noqa: E402


@pytest.mark.parametrize("name", ["gpt2", "bert", "llama", "t5"])
def test_a_config_built_model_is_estimated_to_its_measured_peak(name: str) -> None:
    factory = small_models()[name]

    def ids(b: int) -> torch.Tensor:
        return torch.randint(0, VOCAB, (b, SEQ))

    est = estimate_memory(factory, ids, 4, optimizer="adamw", amp="bf16")
    real = measure_memory(factory, ids, 4, optimizer="adamw", amp="bf16")
    assert est.total_bytes == pytest.approx(real.peak_bytes, rel=0.002)
