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


def test_a_config_file_is_a_model_spec(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """`trainspeed memory path/to/config.json`: the model its `architectures` names, built from the config, trained
    on token ids of its context (at most 2048); the estimate is the one its factory gets; a JSON file that is no
    model config, one line."""
    import json

    from trainspeed.cli import main
    from trainspeed.workloads.hf_config import config_spec

    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
              "intermediate_size": 172, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "vocab_size": 500, "max_position_embeddings": 64}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["memory", str(path), "--batch-size", "2", "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["input_shape"], data["input_dtype"]) == ([64], "int64")
    _, entry = config_spec(str(path))
    assert (entry.input_shape, entry.input_high) == ((64,), 500)
    assert data["bytes"]["total"] == estimate_memory(entry.factory, lambda b: token_ids(b) % 500, 2).total_bytes
    assert type(entry.factory().model).__name__ == "LlamaForCausalLM"
    (tmp_path / "other.json").write_text('{"lr": 0.1}')
    assert main(["memory", str(tmp_path / "other.json")]) == 2
    assert "not a Hugging Face model config" in capsys.readouterr().err


def test_the_catalogues_shapes_are_llamas_of_their_size() -> None:
    from trainspeed.workloads.hf_config import CATALOGUE, config_spec

    sizes = {"llama-7b": 6.74e9, "llama-13b": 13.0e9, "llama-70b": 69.0e9}
    for name in CATALOGUE:
        config, entry = config_spec(name)
        h, i, n, v = config.hidden_size, config.intermediate_size, config.num_hidden_layers, config.vocab_size
        kv = h // config.num_attention_heads * config.num_key_value_heads
        params = n * (2 * h * h + 2 * h * kv + 3 * h * i + 2 * h) + 2 * v * h + h  # untied embedding and head
        assert params == pytest.approx(sizes[name], rel=0.01) and entry.input_shape == (2048,)
