"""Atari environments for the DQN family: ALE v5 through ale-py, preprocessing, scores, exact resume.

The environment (LAP/PAL App. D.2, Machado et al. 2018):

* ALE v5 at ``frameskip=1`` with sticky actions (``repeat_action_probability=0.25``), the
  minimal action set, and episodes truncated at 108k emulator frames (27k agent steps);
* gymnasium's ``AtariPreprocessing(frame_skip=4, noop_max=30, screen_size=84,
  grayscale_obs=True)`` on top: one agent step is 4 frames, max-pooled over the last two,
  grey, 84x84, up to 30 no-ops after each reset (PSER's setting; the LAP authors' code starts
  without no-ops and pads the first stack with zeros, so ``ddqn``'s starts depart from LAP's, with
  sticky actions randomising them already);
* ``FrameStackObservation(4)``, padding with the episode's first frame: observations are
  ``(4, 84, 84)`` uint8 (the replay stores only the newest frame of each).

Frame skipping is done by the wrapper, not by ALE: ALE's own
``frameskip=4`` did not continue bit-identically after a restore with sticky actions when
measured here, while this combination does.  Rewards are the game's own (unclipped); the agents clip them to
[-1, 1] in their TD target only.

Resume: at an episode end the loop saves :func:`atari_state` (ALE's ``cloneState(include_rng=True)``,
which holds the sticky-action RNG, and the env's ``np_random``, which draws the no-ops);
:func:`set_atari_state` restores both.  The wrappers carry nothing across episodes
(``AtariPreprocessing`` and ``FrameStackObservation`` refill their buffers at reset).
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np

from ..scores import ATARI_SCORE_SETTINGS, human_normalised, settings_differ
from ..scores import atari_game as game_of
from .run import SettingsError, env_rng_state, set_env_rng_state

FRAME_SKIP = 4  # emulator frames per agent step
FRAME_STACK = 4
SCREEN = 84

def score_columns(cfg, returns: np.ndarray) -> dict:
    """The evaluation's human-normalised mean score, next to its raw mean; NaN for a run at another episode cap than
    the reference scores stand at (:data:`prioritylab.scores.ATARI_SCORE_SETTINGS`), whose scores are not on
    their scale."""
    if settings_differ(cfg, ATARI_SCORE_SETTINGS):
        return {"human_normalised": math.nan}
    return {"human_normalised": human_normalised(game_of(cfg.env), float(np.mean(returns)))}


def unknown_game(env_id: str) -> str:
    """The refusal of an id that names no installed game."""
    return (f"unknown Atari game {env_id!r}; give an ALE v5 id such as ALE/Pong-v5 (or a MinAtar id such as "
            "MinAtar/Breakout-v1)")


def make_atari_env(env_id: str, max_episode_frames: int = 108_000, sticky: float = 0.25) -> gym.Env:
    """The preprocessed ALE environment above; a :class:`SettingsError` for an unknown game or a
    non-Atari or continuous-action environment."""
    import ale_py

    gym.register_envs(ale_py)
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Warning)  # no banner on stderr; warnings still shown
    game = game_of(env_id)
    if game is None or env_id not in gym.registry:
        if env_id in gym.registry:
            env = gym.make(env_id)
            actions = env.action_space
            env.close()
            if not isinstance(actions, gym.spaces.Discrete):
                raise SettingsError(f"{env_id} has continuous ({type(actions).__name__}) actions; this agent "
                                    "needs an Atari or MinAtar game, e.g. ALE/Pong-v5 or MinAtar/Breakout-v1")
            raise SettingsError(f"{env_id} is not an Atari game; this agent runs ALE v5 and MinAtar games, e.g. "
                                "ALE/Pong-v5 or MinAtar/Breakout-v1")
        raise SettingsError(unknown_game(env_id))
    env = gym.make(env_id, frameskip=1, repeat_action_probability=sticky, full_action_space=False,
                   max_num_frames_per_episode=max_episode_frames)  # fmt: skip
    env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=FRAME_SKIP, screen_size=SCREEN,
                                          terminal_on_life_loss=False, grayscale_obs=True, scale_obs=False)  # fmt: skip
    return gym.wrappers.FrameStackObservation(env, FRAME_STACK, padding_type="reset")


def atari_state(env: gym.Env) -> dict:
    """What continues an Atari episode sequence exactly from an episode end (module docstring)."""
    ale = env.unwrapped.ale
    return {"ale": ale.cloneState(include_rng=True), "np_random": env_rng_state(env)}


def set_atari_state(env: gym.Env, state: dict) -> None:
    env.unwrapped.ale.restoreState(state["ale"])
    set_env_rng_state(env, state["np_random"])
