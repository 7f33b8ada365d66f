"""A healthy loop: a wide MLP on a large batch, whose step is dominated by real matrix arithmetic.

`trainspeed doctor` should say compute_bound. On a GPU, a size that keeps it busy, with the step's achieved
TFLOP/s against the GPU's peak (model-FLOP utilisation):

    trainspeed doctor examples/wide_mlp.py --device cuda --batch 8192 --width 8192 --bf16 --steps 200
"""

import argparse

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--bf16", action="store_true", help="forward under torch.autocast(dtype=torch.bfloat16)")
    args = parser.parse_args()
    torch.manual_seed(0)
    width = args.width
    model = nn.Sequential(nn.Linear(1024, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                          nn.Linear(width, 10)).to(args.device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    criterion = nn.CrossEntropyLoss()
    x = torch.randn(args.batch, 1024, device=args.device)
    y = torch.randint(0, 10, (args.batch,), device=args.device)
    for step in range(args.steps):
        with torch.autocast(torch.device(args.device).type, dtype=torch.bfloat16, enabled=args.bf16):
            loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
