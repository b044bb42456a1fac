"""MinAtar environments for the DQN family: the ``minatar`` package's gymnasium ids, compact states, exact resume.

MinAtar (Young & Tian, 2019) reduces five Atari games (Asterix, Breakout, Freeway, Seaquest,
Space Invaders) to 10x10 grids of boolean object channels (4 to 10 of them).  The environment:

* ``gym.make("MinAtar/<Game>-v1")`` from the ``minatar`` package (``v1``: the game's minimal action
  set; ``v0``: all 6 actions), sticky actions with probability 0.1 and difficulty ramping on, both
  MinAtar's defaults (the paper's Section 2);
* observations transposed to ``(channels, 10, 10)`` and kept boolean (one byte per cell; the replay
  stores them as they are), with **no frame stacking**: the paper's agents see one state, whose
  trail channels carry the motion;
* rewards are the game's own; MinAtar imposes no episode limit, and ``max_episode_steps`` (ours) adds
  one only as a guard.  Freeway's game ends itself when its timer runs out (on its 2,501st frame), and the
  package reports that as terminated: the agents then stop bootstrapping there, as the MinAtar reference
  DQN does, though to the agent the end is a time limit it cannot see coming.

A seeded ``reset(seed=...)`` starts from a fresh game: MinAtar keeps the previous action (for sticky
actions) across episodes, and an evaluation must not depend on the one before it.

Resume: at an episode end the loop saves :func:`minatar_state`, the whole game object pickled (its
``RandomState``, which draws the sticky actions and the game's spawns, the previous action, and the
game's own fields); :func:`set_minatar_state` puts it back.
"""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np

from .run import SettingsError

GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
PREFIX = "MinAtar/"


def is_minatar(env_id: str) -> bool:
    return str(env_id).startswith(PREFIX)


def register() -> None:
    """Register the ``MinAtar/*`` ids (gymnasium does not load the package's entry point by itself); a
    :class:`SettingsError` when the package is missing."""
    if f"{PREFIX}Breakout-v1" in gym.registry:
        return
    try:
        from minatar.gym import register_envs
    except ImportError:
        raise SettingsError("MinAtar games need the minatar package: pip install 'prioritylab[minatar]'") from None
    register_envs()


class MinAtarObservation(gym.ObservationWrapper):
    """``(channels, 10, 10)`` boolean states; a seeded reset starts from a fresh game (module docstring)."""

    def __init__(self, env: gym.Env, sticky: float, ramping: bool):
        super().__init__(env)
        h, w, c = env.observation_space.shape
        self.observation_space = gym.spaces.Box(0, 1, shape=(c, h, w), dtype=bool)
        self._game_args = {"sticky_action_prob": sticky, "difficulty_ramping": ramping}

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            from minatar import Environment

            base = self.env.unwrapped
            base.game = Environment(base.game.env_name, **self._game_args)
        return super().reset(seed=seed, options=options)

    def observation(self, obs: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.asarray(obs, dtype=bool).transpose(2, 0, 1))


def unknown_game(env_id: str) -> str:
    """The refusal of an id that is no MinAtar game, naming the games."""
    ids = ", ".join(f"{PREFIX}{g}-v1" for g in GAMES)
    return f"unknown MinAtar game {env_id!r}; choose one of {ids} (or their -v0)"


def make_minatar_env(env_id: str, sticky: float = 0.1, max_episode_steps: int = 10_000,
                     ramping: bool = True) -> gym.Env:  # fmt: skip
    """The environment above; a :class:`SettingsError` naming an unknown MinAtar game."""
    register()
    if not is_minatar(env_id) or env_id not in gym.registry:
        raise SettingsError(unknown_game(env_id))
    env = gym.make(env_id, sticky_action_prob=sticky, difficulty_ramping=ramping, disable_env_checker=True)
    env = MinAtarObservation(env, sticky, ramping)
    return gym.wrappers.TimeLimit(env, max_episode_steps)


def minatar_state(env: gym.Env) -> dict:
    """What continues a MinAtar episode sequence exactly from an episode end (module docstring)."""
    return {"game": pickle.dumps(env.unwrapped.game)}


def set_minatar_state(env: gym.Env, state: dict) -> None:
    env.unwrapped.game = pickle.loads(state["game"])  # noqa: S301 - our own checkpoint
