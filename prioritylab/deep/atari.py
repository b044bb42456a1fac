"""Atari environments for the DQN family: ALE v5 through ale-py, preprocessing, scores, exact resume.

The environment (LAP/PAL App. D.2, Machado et al. 2018):

* ALE v5 at ``frameskip=1`` with sticky actions (``repeat_action_probability=0.25``), the
  minimal action set, and episodes truncated at 108k emulator frames (27k agent steps);
* gymnasium's ``AtariPreprocessing(frame_skip=4, noop_max=30, screen_size=84,
  grayscale_obs=True)`` on top: one agent step is 4 frames, max-pooled over the last two,
  grey, 84x84, up to 30 no-ops after each reset;
* ``FrameStackObservation(4)``, padding with the episode's first frame: observations are
  ``(4, 84, 84)`` uint8 (the replay stores only the newest frame of each).

Frame skipping is done by the wrapper, not by ALE: NOTES-deep measured that ALE's own
``frameskip=4`` does not continue bit-identically after a restore with sticky actions, while
this combination does.  Rewards are the game's own (unclipped); the agents clip them to
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

from .run import SettingsError, env_rng_state, set_env_rng_state

FRAME_SKIP = 4  # emulator frames per agent step
FRAME_STACK = 4
SCREEN = 84

# Random and human scores of PSER (Brittain et al., 2019) appendix, Table 5, for the 55 games listed there
# with both; keyed by the ALE v5 name (ALE/<name>-v5).
SCORES: dict[str, tuple[float, float]] = {
    "Alien": (227.8, 7127.7),
    "Amidar": (5.8, 1719.5),
    "Assault": (222.4, 742.0),
    "Asterix": (210.0, 8503.3),
    "Asteroids": (-719.1, 47388.7),
    "Atlantis": (12850.0, 29028.1),
    "BankHeist": (14.2, 753.1),
    "BattleZone": (2360.0, 37187.5),
    "BeamRider": (363.9, 16926.5),
    "Berzerk": (123.7, 2630.4),
    "Bowling": (23.1, 160.7),
    "Boxing": (0.1, 12.1),
    "Breakout": (1.7, 30.5),
    "Centipede": (2090.9, 12017.0),
    "ChopperCommand": (811.0, 7387.8),
    "CrazyClimber": (10780.5, 35829.4),
    "DemonAttack": (152.1, 1971.0),
    "DoubleDunk": (-18.6, -16.4),
    "Enduro": (0.0, 860.5),
    "FishingDerby": (-91.7, -38.7),
    "Freeway": (0.0, 29.6),
    "Frostbite": (65.2, 4334.7),
    "Gopher": (257.6, 2412.5),
    "Gravitar": (173.0, 3351.4),
    "Hero": (1027.0, 30826.4),
    "IceHockey": (-11.2, 0.9),
    "Jamesbond": (29.0, 302.8),
    "Kangaroo": (52.0, 3035.0),
    "Krull": (1598.0, 2665.5),
    "KungFuMaster": (258.5, 22736.3),
    "MontezumaRevenge": (0.0, 4753.3),
    "MsPacman": (307.3, 6951.6),
    "NameThisGame": (2292.3, 8049.0),
    "Phoenix": (761.4, 7242.6),
    "Pitfall": (-229.4, 6463.7),
    "Pong": (-20.7, 14.6),
    "PrivateEye": (24.9, 69571.3),
    "Qbert": (163.9, 13455.0),
    "Riverraid": (1338.5, 17118.0),
    "RoadRunner": (11.5, 7845.0),
    "Robotank": (2.2, 11.9),
    "Seaquest": (68.4, 42054.7),
    "Skiing": (-17098.1, -4336.9),
    "Solaris": (1236.3, 12326.7),
    "SpaceInvaders": (148.0, 1668.7),
    "StarGunner": (664.0, 10250.0),
    "Tennis": (-23.8, -8.3),
    "TimePilot": (3568.0, 5229.2),
    "Tutankham": (11.4, 167.6),
    "UpNDown": (533.4, 11693.2),
    "Venture": (0.0, 1187.5),
    "VideoPinball": (16256.9, 17667.9),
    "WizardOfWor": (563.5, 4756.5),
    "YarsRevenge": (3092.9, 54576.9),
    "Zaxxon": (32.5, 9173.3),
}


def game_of(env_id: str) -> str | None:
    """``"Pong"`` for ``"ALE/Pong-v5"``; None for an id outside ALE v5."""
    if env_id.startswith("ALE/") and env_id.endswith("-v5"):
        return env_id[4:-3]
    return None


def human_normalised(game: str | None, score: float) -> float:
    """``(score - random) / |human - random|`` (PER appendix, after van Hasselt et al.); NaN for a game
    without published scores."""
    if game not in SCORES:
        return math.nan
    random, human = SCORES[game]
    return (score - random) / abs(human - random)


def score_columns(env_id: str, returns: np.ndarray) -> dict:
    """The evaluation's human-normalised mean score, next to its raw mean."""
    return {"human_normalised": human_normalised(game_of(env_id), float(np.mean(returns)))}


def make_atari_env(env_id: str, max_episode_frames: int = 108_000, sticky: float = 0.25) -> gym.Env:
    """The preprocessed ALE environment above; a :class:`SettingsError` for an unknown game or a
    non-Atari or continuous-action environment."""
    import ale_py

    gym.register_envs(ale_py)
    game = game_of(env_id)
    if game is None or env_id not in gym.registry:
        if env_id in gym.registry:
            env = gym.make(env_id)
            actions = env.action_space
            env.close()
            if not isinstance(actions, gym.spaces.Discrete):
                raise SettingsError(f"{env_id} has continuous ({type(actions).__name__}) actions; this agent "
                                    "needs an Atari game with discrete actions, e.g. ALE/Pong-v5")  # fmt: skip
            raise SettingsError(f"{env_id} is not an Atari game; this agent runs ALE v5 games, e.g. ALE/Pong-v5")
        raise SettingsError(f"unknown Atari game {env_id!r}; give an ALE v5 id such as ALE/Pong-v5")
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
