"""Hugging Face models built from their configs, with random weights: nothing is downloaded.

Small sizes of the four families people fine-tune most (GPT-2, BERT, Llama, T5), each wrapped so its
forward takes token ids and returns the loss the model computes from `labels`, as a `Trainer` step
does. Needs the `transformers` extra; imported only when a model is built.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

VOCAB, SEQ = 1000, 64


def token_ids(batch: int) -> torch.Tensor:
    """A batch of random token ids, the input every model here takes."""
    return torch.randint(0, VOCAB, (batch, SEQ))


class WithLoss(nn.Module):
    """A Hugging Face model whose forward takes token ids and returns its own training loss."""

    def __init__(self, model: nn.Module, seq2seq: bool = False) -> None:
        super().__init__()
        self.model, self.seq2seq = model, seq2seq

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.seq2seq:
            return self.model(input_ids=ids, decoder_input_ids=ids, labels=ids).loss
        return self.model(input_ids=ids, labels=ids).loss


def small_models() -> dict[str, Callable[[], nn.Module]]:
    import transformers as hf

    hf.logging.set_verbosity_error()
    return {
        "gpt2": lambda: WithLoss(hf.GPT2LMHeadModel(hf.GPT2Config(
            n_layer=2, n_embd=128, n_head=4, vocab_size=VOCAB, n_positions=128))),
        "bert": lambda: WithLoss(hf.BertForMaskedLM(hf.BertConfig(
            num_hidden_layers=2, hidden_size=128, num_attention_heads=4, intermediate_size=512,
            vocab_size=VOCAB, max_position_embeddings=128))),
        "llama": lambda: WithLoss(hf.LlamaForCausalLM(hf.LlamaConfig(
            num_hidden_layers=2, hidden_size=128, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=344, vocab_size=VOCAB, max_position_embeddings=128))),
        "t5": lambda: WithLoss(hf.T5ForConditionalGeneration(hf.T5Config(
            num_layers=2, num_decoder_layers=2, d_model=128, d_ff=512, num_heads=4, d_kv=32, vocab_size=VOCAB)),
            seq2seq=True),
    }


