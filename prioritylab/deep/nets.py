"""Networks of the continuous-control agents (LAP/PAL App. D: two hidden layers of 256, ReLU)."""

from __future__ import annotations

import math

import torch
from torch import nn


class EnsembleLinear(nn.Module):
    """``members`` independent linear layers applied in one batched matmul.

    Weights have shape ``(members, in, out)``; each member is initialised as
    ``nn.Linear`` is (uniform in ``±1/sqrt(in)``).  The twin critics run as one
    ensemble of two: one ``baddbmm`` instead of two small matmuls.
    """

    def __init__(self, members: int, in_features: int, out_features: int):
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(members, in_features, out_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(members, 1, out_features).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


class TwinQ(nn.Module):
    """Two Q-networks ``Q_k(s, a)`` (TD3's clipped double Q, SAC's twin critics), evaluated together."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 256, members: int = 2):
        super().__init__()
        self.members = members
        self.l1 = EnsembleLinear(members, obs_dim + act_dim, hidden)
        self.l2 = EnsembleLinear(members, hidden, hidden)
        self.l3 = EnsembleLinear(members, hidden, 1)

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        """Values of shape ``(members, batch)``."""
        x = torch.cat([obs, act], dim=-1).unsqueeze(0).expand(self.members, -1, -1)
        x = torch.relu(self.l1(x))
        x = torch.relu(self.l2(x))
        return self.l3(x).squeeze(-1)

    def frozen(self, obs: torch.Tensor, act: torch.Tensor, members: int | None = None) -> torch.Tensor:
        """Values of the first ``members`` (all by default) with the weights held constant, ``(members, batch)``.

        Gradients reach ``obs`` and ``act`` but not the critic's weights: the actor's loss needs no weight
        gradients (they would be discarded), and TD3's needs ``Q_1`` alone.  Same values as :meth:`forward`.
        """
        m = self.members if members is None else members
        x = torch.cat([obs, act], dim=-1).unsqueeze(0).expand(m, -1, -1)
        for layer in (self.l1, self.l2):
            x = torch.relu(torch.baddbmm(layer.bias[:m].detach(), x, layer.weight[:m].detach()))
        return torch.baddbmm(self.l3.bias[:m].detach(), x, self.l3.weight[:m].detach()).squeeze(-1)


def mlp(in_dim: int, out_dim: int, hidden: int = 256) -> nn.Sequential:
    return nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, out_dim))  # fmt: skip


class DeterministicActor(nn.Module):
    """TD3's policy: ``max_action * tanh(mlp(s))`` around the action range's centre."""

    def __init__(self, obs_dim: int, act_dim: int, low, high, hidden: int = 256):
        super().__init__()
        self.net = mlp(obs_dim, act_dim, hidden)
        self.register_buffer("scale", torch.as_tensor((high - low) / 2.0, dtype=torch.float32))
        self.register_buffer("centre", torch.as_tensor((high + low) / 2.0, dtype=torch.float32))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.centre + self.scale * torch.tanh(self.net(obs))


class GaussianActor(nn.Module):
    """SAC's squashed Gaussian policy; log-std clipped to ``(log_std_min, log_std_max)`` (LAP Table 6: (-20, 2)).

    ``log_prob_of="unit"``: the log-likelihood of the squashed action in (-1, 1), LAP eq. 28 ("assumes the
    action is scaled within (-1, 1)"), whatever the environment's range; ``"scaled"``: of the action in the
    environment's range, the log of its half-width per dimension subtracted as well.
    """

    def __init__(self, obs_dim: int, act_dim: int, low, high, hidden: int = 256, log_std_min: float = -20.0,
                 log_std_max: float = 2.0, eps: float = 1e-6, log_prob_of: str = "unit"):  # fmt: skip
        super().__init__()
        self.net = mlp(obs_dim, 2 * act_dim, hidden)
        self.log_std_min, self.log_std_max, self.eps = log_std_min, log_std_max, eps
        self.scaled_log_prob = log_prob_of == "scaled"
        self.register_buffer("scale", torch.as_tensor((high - low) / 2.0, dtype=torch.float32))
        self.register_buffer("centre", torch.as_tensor((high + low) / 2.0, dtype=torch.float32))

    def forward(self, obs: torch.Tensor, generator: torch.Generator | None = None, deterministic: bool = False):
        """``(action, log_prob)``; the deterministic action is the squashed mean (log_prob then None)."""
        mean, log_std = self.net(obs).chunk(2, dim=-1)
        if deterministic:
            return self.centre + self.scale * torch.tanh(mean), None
        log_std = log_std.clamp(self.log_std_min, self.log_std_max)
        std = log_std.exp()
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        u = mean + std * noise
        y = torch.tanh(u)
        # log N(u; mean, std) minus the log-Jacobian of the squashing, eps = 1e-6 (LAP eq. 28 and Table 6)
        log_prob = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        jacobian = self.scale * (1 - y.pow(2)) if self.scaled_log_prob else 1 - y.pow(2)
        log_prob = log_prob - torch.log(jacobian + self.eps).sum(-1)
        return self.centre + self.scale * y, log_prob
