"""The memory estimate on Hugging Face models built from configs (the `transformers` extra)."""

from __future__ import annotations

import pytest

from trainspeed.memory import estimate_memory, measure_memory

pytest.importorskip("transformers", reason="the transformers extra is not installed")

from trainspeed.workloads.hf_configs import small_models, token_ids  # noqa: E402


@pytest.mark.parametrize("name", ["gpt2", "bert", "llama", "t5"])
def test_a_config_built_model_is_estimated_to_its_measured_peak(name: str) -> None:
    factory = small_models()[name]

    est = estimate_memory(factory, token_ids, 4, optimizer="adamw", amp="bf16")
    real = measure_memory(factory, token_ids, 4, optimizer="adamw", amp="bf16")
    assert est.total_bytes == pytest.approx(real.peak_bytes, rel=0.002)
