"""prioritylab's samplers inside stable-baselines3 (the ``sb3`` extra; docs/sb3.md).

``PrioritizedReplayBuffer`` is a replay buffer SB3 accepts as ``replay_buffer_class``;
``DQN``, ``TD3`` and ``SAC`` are SB3's algorithms whose ``train()`` applies the IS weights
and hands the TD errors back to the sampler.
"""

from .algorithms import DQN, SAC, TD3
from .buffer import METHODS, PrioritizedReplayBuffer, PrioritizedSamples

__all__ = ["DQN", "METHODS", "SAC", "TD3", "PrioritizedReplayBuffer", "PrioritizedSamples"]
