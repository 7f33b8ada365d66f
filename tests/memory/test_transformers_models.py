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


def test_a_vision_transformer_whose_initialisation_reads_a_value_is_estimated_exactly() -> None:
    # ViT's weight initialisation reads a tensor's value (aten._local_scalar_dense): once "building the model on
    # meta tensors failed"; now built on the meta device and copied to fake tensors
    import torch
    from transformers import ViTConfig, ViTForImageClassification

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.vit = ViTForImageClassification(ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                                           intermediate_size=128, image_size=32, patch_size=8))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.vit(pixel_values=x).logits

    est = estimate_memory(Logits, (3, 32, 32), 4)
    real = measure_memory(Logits, (3, 32, 32), 4)
    assert est.total_bytes == real.peak_bytes
    assert any("built on the meta device" in n for n in est.notes)
