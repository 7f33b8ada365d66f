"""Hugging Face's Trainer fine-tuning a small GPT-2 (built from its config: random weights, nothing downloaded)
on text it tokenizes as it goes. The flags are TrainingArguments' own; the defaults are a healthy run, and each
planted bottleneck is one flag away:

    python examples/frameworks/hf_trainer.py --logging-steps 1      # logging every step
    python examples/frameworks/hf_trainer.py --eval-steps 2         # evaluating too often
    python examples/frameworks/hf_trainer.py --save-steps 1         # saving too often
    python examples/frameworks/hf_trainer.py --tokenize-in-loader   # a starved loader: tokenizing in __getitem__
    python examples/frameworks/hf_trainer.py --activation-checkpointing  # recomputing each block in backward

`--device cuda` trains on the GPU; `--no-nan-inf-filter` turns off the Trainer's check of each step's loss for
NaN or inf, which reads the loss from the device on every step whatever `--logging-steps` is.

Needs `pip install 'trainspeed[transformers]'` (transformers with accelerate). Checkpoints go to a temporary folder.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch
import transformers as hf
from torch.utils.data import Dataset

VOCAB, SEQ = 2048, 64
CHECKPOINTING = ("activation_checkpointing" if "activation_checkpointing" in hf.TrainingArguments.__dataclass_fields__
                 else "gradient_checkpointing")


def tokenize(text: str) -> list[int]:
    """A byte-pair-style tokenizer's cost in pure Python: each pair of characters looked up in a table."""
    return [(ord(a) * 31 + ord(b)) % VOCAB for a, b in zip(text, text[1:])][:SEQ]


class Corpus(Dataset):
    """Lines of text; tokenized once up front, or per item in __getitem__ (--tokenize-in-loader)."""

    def __init__(self, n: int, in_loader: bool, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        letters = "abcdefghijklmnopqrstuvwxyz      "
        codes = torch.randint(0, len(letters), (n, 200 * SEQ), generator=g).tolist()
        self.lines = ["".join(letters[c] for c in row) for row in codes]
        self.in_loader = in_loader
        self.ids = None if in_loader else [torch.tensor(self._ids(line)) for line in self.lines]

    def _ids(self, line: str) -> list[int]:
        ids: list[int] = []
        for word in line.split():  # a tokenizer's pre-split and merges, repeated over the line
            ids.extend(tokenize(word + " "))
        return (ids + [0] * SEQ)[:SEQ]

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = torch.tensor(self._ids(self.lines[i])) if self.ids is None else self.ids[i]
        return {"input_ids": ids, "labels": ids}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-steps", type=int, default=60)
    p.add_argument("--per-device-train-batch-size", type=int, default=16)
    p.add_argument("--logging-steps", type=int, default=50)
    p.add_argument("--eval-steps", type=int, default=0, help="0: no evaluation during training")
    p.add_argument("--save-steps", type=int, default=0, help="0: no checkpoints")
    p.add_argument("--dataloader-num-workers", type=int, default=0)
    p.add_argument("--tokenize-in-loader", action="store_true")
    p.add_argument("--activation-checkpointing", action="store_true",
                   help="activation_checkpointing=True (gradient_checkpointing before transformers 5)")
    p.add_argument("--trainspeed-json", metavar="PATH", help="watch with trainspeed's callback; its report to PATH")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="cuda: the Trainer's own choice of GPU")
    p.add_argument("--no-nan-inf-filter", action="store_true",
                   help="logging_nan_inf_filter=False: the Trainer then reads no loss back from the device each step")
    args = p.parse_args()

    hf.logging.set_verbosity_error()
    torch.manual_seed(0)
    model = hf.GPT2LMHeadModel(hf.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=VOCAB, n_positions=SEQ))
    with tempfile.TemporaryDirectory() as out:
        targs = hf.TrainingArguments(
            output_dir=out, max_steps=args.max_steps, per_device_train_batch_size=args.per_device_train_batch_size,
            per_device_eval_batch_size=args.per_device_train_batch_size, logging_steps=args.logging_steps,
            eval_strategy="steps" if args.eval_steps else "no", eval_steps=args.eval_steps or None,
            save_strategy="steps" if args.save_steps else "no", save_steps=args.save_steps or 500,
            dataloader_num_workers=args.dataloader_num_workers, report_to=[], disable_tqdm=True, use_cpu=args.device == "cpu",
            seed=0, logging_nan_inf_filter=not args.no_nan_inf_filter,
            **{CHECKPOINTING: args.activation_checkpointing})
        callbacks = []
        if args.trainspeed_json:
            from trainspeed.integrations.transformers import TrainspeedCallback

            callbacks.append(TrainspeedCallback(json=args.trainspeed_json))
        trainer = hf.Trainer(model=model, args=targs, train_dataset=Corpus(1024, args.tokenize_in_loader, 0),
                             eval_dataset=Corpus(64, args.tokenize_in_loader, 1), callbacks=callbacks)
        start = time.perf_counter()
        trainer.train()
        print(f"training time: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
