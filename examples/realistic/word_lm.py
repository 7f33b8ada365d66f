"""A word-level language model trained the way the classic LSTM language-model examples do it (a realistic example,
written for trainspeed, not copied from one): a token stream cut into `--batch-size` columns, windows of `--bptt`
tokens, an embedding, a two-layer `nn.LSTM` and a linear decoder over the whole `--vocab`, the hidden state carried
from window to window and detached (`repackage_hidden`), gradient clipping and a hand-written SGD update
(`p.data.add_(p.grad, alpha=-lr)`, no optimizer object), the loss printed every `--log-interval` windows, and an
`evaluate()` over the validation stream at each epoch's end (`model.eval()`, `torch.no_grad()`, each window's loss
read with `.item()`); the model saved with `torch.save` when the validation loss improves, the learning rate
divided by 4 when it does not.

The token streams are made up from a fixed seed (nothing to download): Zipf draws over the vocabulary.

What it really does (the counts tests/test_realistic_examples.py checks): `--epochs` epochs of
`ceil((train tokens / batch size - 1) / bptt)` windows, each one forward, one backward and the update;
`evaluate()` after each epoch over `ceil((validation tokens / 10 - 1) / bptt)` windows of 10 columns; one loss read
per training window and per evaluation window.

    python examples/realistic/word_lm.py [--epochs 2] [--tokens 24000] [--vocab 10000] [--bptt 35] [--batch-size 20]
        [--bf16]

`--bf16` applies only bf16 autocast (a recipe change: the products' inputs rounded to bfloat16): the training forward
pass under `torch.autocast("cpu", dtype=torch.bfloat16)`, the loss in float32.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

EVAL_BATCH = 10


class RNNModel(nn.Module):
    def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int, dropout: float = 0.2) -> None:
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nlayers, self.nhid = nlayers, nhid

    def forward(self, input: torch.Tensor, hidden: tuple[torch.Tensor, torch.Tensor]
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.decoder.out_features)
        return nn.functional.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz: int) -> tuple[torch.Tensor, torch.Tensor]:
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """Wraps hidden states in new Tensors, to detach them from their history."""
    return tuple(v.detach() for v in h)


def batchify(data: torch.Tensor, bsz: int) -> torch.Tensor:
    nbatch = data.size(0) // bsz
    return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous()


def get_batch(source: torch.Tensor, i: int, bptt: int) -> tuple[torch.Tensor, torch.Tensor]:
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


def corpus(tokens: int, vocab: int, seed: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    return torch.from_numpy((rng.zipf(1.2, tokens) - 1) % vocab)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=24000)
    parser.add_argument("--vocab", type=int, default=10000)
    parser.add_argument("--emsize", type=int, default=200)
    parser.add_argument("--nhid", type=int, default=200)
    parser.add_argument("--bptt", type=int, default=35)
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--lr", type=float, default=20.0)
    parser.add_argument("--clip", type=float, default=0.25)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--save", type=Path, default=Path("model.pt"))
    parser.add_argument("--bf16", action="store_true", help="the training forward pass under bf16 autocast")
    args = parser.parse_args()
    torch.manual_seed(1111)
    train_data = batchify(corpus(args.tokens, args.vocab, 1), args.batch_size)
    val_data = batchify(corpus(args.tokens // 4, args.vocab, 2), EVAL_BATCH)
    model = RNNModel(args.vocab, args.emsize, args.nhid, 2)
    criterion = nn.NLLLoss()
    lr, best_val_loss = args.lr, math.inf

    def evaluate(data_source: torch.Tensor) -> float:
        model.eval()
        total_loss = 0.0
        hidden = model.init_hidden(EVAL_BATCH)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, args.bptt):
                data, targets = get_batch(data_source, i, args.bptt)
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        return total_loss / (len(data_source) - 1)

    def train(epoch: int) -> None:
        model.train()
        total_loss = 0.0
        start_time = time.time()
        hidden = model.init_hidden(args.batch_size)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
            data, targets = get_batch(train_data, i, args.bptt)
            model.zero_grad()
            hidden = repackage_hidden(hidden)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
                output, hidden = model(data, hidden)
            loss = criterion(output.float() if args.bf16 else output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-lr)
            total_loss += loss.item()
            if batch % args.log_interval == 0 and batch > 0:
                cur_loss = total_loss / args.log_interval
                elapsed = time.time() - start_time
                print(f"| epoch {epoch:3d} | {batch:5d} batches | lr {lr:02.2f} | ms/batch "
                      f"{elapsed * 1000 / args.log_interval:5.2f} | loss {cur_loss:5.2f}")
                total_loss = 0.0
                start_time = time.time()

    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        epoch_start_time = time.time()
        train(epoch)
        val_loss = evaluate(val_data)
        print(f"| end of epoch {epoch:3d} | time: {time.time() - epoch_start_time:5.2f}s | valid loss {val_loss:5.2f}")
        if val_loss < best_val_loss:
            with open(args.save, "wb") as f:
                torch.save(model, f)
            best_val_loss = val_loss
        else:
            lr /= 4.0
    print(f"training time: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
