"""REINFORCE on a cart-pole, the shape of many first reinforcement-learning scripts (a realistic example, written for
trainspeed, not copied from one): the environment (cart-pole dynamics in plain Python, nothing to install) stepped
one observation at a time, the policy called on each observation, an action sampled from a `Categorical` and read
with `.item()` to step the environment; at the episode's end the discounted returns, normalised, weight the log
probabilities, and one optimizer step follows.

What it really does, per run of E episodes (the counts tests/test_realistic_examples.py checks): E optimizer
steps; per step, one policy call and one `.item()` read (of a CPU tensor: no synchronisation) per environment
step of that episode; the episode lengths are printed at the end.

    python examples/realistic/policy_gradient.py [--episodes 30] [--no-validate] [--batched-update]

`--no-validate` applies the setting the doctor's host_code_heavy action names for torch.distributions' checks;
`--batched-update` applies small_batch's action for an agent: actions chosen under `torch.no_grad()`, the
episode's log probabilities recomputed in one batched forward for the update (the same actions, so the same
episodes, and the same gradient up to rounding).
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
parser.add_argument("--batched-update", action="store_true",
                    help="act under torch.no_grad() keeping the observations, and recompute the episode's log "
                         "probabilities in one batched forward for the update (the same actions and gradient)")
parser.add_argument("--no-validate", action="store_true",
                    help="torch.distributions.Distribution.set_default_validate_args(False): no argument checks")
args = parser.parse_args()
if args.no_validate:
    torch.distributions.Distribution.set_default_validate_args(False)


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
    seen, actions = [], []
    for _ in range(args.max_steps):
        if args.batched_update:
            with torch.no_grad():
                action = torch.distributions.Categorical(logits=policy(torch.tensor(obs))).sample()
            seen.append(obs)
            actions.append(action)
        else:
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
    if args.batched_update:  # the episode's observations in one forward: the same log probabilities, batched
        log_prob = torch.distributions.Categorical(logits=policy(torch.tensor(seen))).log_prob(torch.stack(actions))
    else:
        log_prob = torch.stack(log_probs)
    loss = -(log_prob * ret).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    lengths.append(len(rewards))
print("episode lengths:", lengths)
print(f"training time: {time.perf_counter() - start:.3f} s")
