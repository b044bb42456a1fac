"""Replay for deep agents: vectorised, episode-aware writer, observations stored once, n-step, device batches."""

from .buffer import Batch, ReplayBuffer, estimate_bytes, least_slots

__all__ = ["Batch", "ReplayBuffer", "estimate_bytes", "least_slots"]
