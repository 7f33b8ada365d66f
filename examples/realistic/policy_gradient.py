"""REINFORCE on a cart-pole, the shape of many first reinforcement-learning scripts (a realistic example, written for
trainspeed, not copied from one): the environment (cart-pole dynamics in plain Python, nothing to install) stepped
one observation at a time, the policy called on each observation, an action sampled from a `Categorical` and read
with `.item()` to step the environment; at the episode's end the discounted returns, normalised, weight the log
probabilities, and one optimizer step follows.

What it really does, per run of E episodes (the counts tests/examples/test_realistic.py checks): E optimizer
steps; per step, one policy call and one `.item()` read (of a CPU tensor: no synchronisation) per environment
step of that episode; the episode lengths are printed at the end.

    python examples/realistic/policy_gradient.py [--episodes 30]
"""

from __future__ import annotations

import argparse
import math
import random
import time

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--episodes", type=int, default=30)
parser.add_argument("--max-steps", type=int, default=200)
args = parser.parse_args()


class CartPole:
    """The classic cart-pole dynamics (Barto, Sutton and Anderson, 1983), Euler-integrated at 50 Hz."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.state = [0.0] * 4

    def reset(self) -> list[float]:
        self.state = [self.rng.uniform(-0.05, 0.05) for _ in range(4)]
        return list(self.state)

    def step(self, action: int) -> tuple[list[float], float, bool]:
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * x_acc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc
        self.state = [x, x_dot, theta, theta_dot]
        done = abs(x) > 2.4 or abs(theta) > 12 * math.pi / 180
        return list(self.state), 1.0, done


torch.manual_seed(0)
policy = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 2))
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)
env = CartPole(seed=0)
lengths = []
start = time.perf_counter()
for episode in range(args.episodes):
    obs, log_probs, rewards = env.reset(), [], []
    for _ in range(args.max_steps):
        dist = torch.distributions.Categorical(logits=policy(torch.tensor(obs)))
        action = dist.sample()
        log_probs.append(dist.log_prob(action))
        obs, reward, done = env.step(action.item())
        rewards.append(reward)
        if done:
            break
    returns, g = [], 0.0
    for r in reversed(rewards):
        g = r + 0.99 * g
        returns.insert(0, g)
    ret = torch.tensor(returns)
    ret = (ret - ret.mean()) / (ret.std() + 1e-8) if len(returns) > 1 else ret
    loss = -(torch.stack(log_probs) * ret).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    lengths.append(len(rewards))
print("episode lengths:", lengths)
print(f"training time: {time.perf_counter() - start:.3f} s")
