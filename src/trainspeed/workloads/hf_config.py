"""Hugging Face models by their config, for `trainspeed memory`: a local `config.json` (a model's, as the Hub keeps
it beside the weights) or a shape of the catalogue below. The model is built from the config with random weights
(under the estimate's fake tensors: nothing downloaded, nothing allocated) and trained on its own loss from
`labels`, as a `Trainer` step does; its input is a batch of token ids of `seq` tokens. Needs `transformers`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainspeed.errors import UsageError
from trainspeed.names import HF_SHAPES
from trainspeed.workloads.hf_configs import WithLoss
from trainspeed.workloads.zoo import ZooEntry

CATALOGUE: dict[str, dict[str, Any]] = {
    # Llama 1 and 2's published shapes (the 70B's grouped-query attention: 8 key/value heads)
    "llama-7b": {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                 "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
                 "max_position_embeddings": 4096},
    "llama-13b": {"model_type": "llama", "hidden_size": 5120, "intermediate_size": 13824, "num_hidden_layers": 40,
                  "num_attention_heads": 40, "num_key_value_heads": 40, "vocab_size": 32000,
                  "max_position_embeddings": 4096},
    "llama-70b": {"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
                  "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 32000,
                  "max_position_embeddings": 4096},
}
assert tuple(CATALOGUE) == HF_SHAPES

SEQ_DEFAULT = 2048
"""Tokens per sample where `--input-shape` does not say (or the model's context, if shorter)."""


def _read(text: str) -> dict[str, Any]:
    if text in CATALOGUE:
        return dict(CATALOGUE[text])
    path = Path(text)
    if not path.is_file():
        raise UsageError(f"{text}: no such file")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"{text}: not a JSON model config ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
        raise UsageError(f"{text}: not a Hugging Face model config (it has no \"model_type\")")
    return data


def config_spec(text: str) -> tuple[Any, ZooEntry]:
    """(the transformers config, the model's factory and its token-id input) for a catalogue name or a config
    file; a file that is no model config, or `transformers` missing, is a one-line UsageError."""
    data = _read(text)
    try:
        import transformers as hf
    except ImportError:
        raise UsageError(f"{text}: a Hugging Face config needs transformers (pip install transformers)") from None
    hf.logging.set_verbosity_error()
    model_type = data.pop("model_type")
    architectures = data.pop("architectures", None) or []
    try:
        config = hf.AutoConfig.for_model(model_type, **data)
    except ValueError as e:
        raise UsageError(f"{text}: transformers does not know the model type {model_type!r} ({e})") from None
    arch = next((getattr(hf, a) for a in architectures if hasattr(hf, a)), None)

    def factory() -> nn.Module:
        model = arch(config) if arch is not None else hf.AutoModelForCausalLM.from_config(config)
        return WithLoss(model, seq2seq=bool(getattr(config, "is_encoder_decoder", False)))

    context = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None) or SEQ_DEFAULT
    vocab = int(config.vocab_size)
    return config, ZooEntry(factory, (min(int(context), SEQ_DEFAULT),), torch.int64, vocab,
                            description=f"{model_type} from {text}")
