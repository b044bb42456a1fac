"""Reference scores and normalisation, one home for every part that reports a score.

* Atari: the random and human scores of the PSER appendix (Table 5), ``human_normalised``
  ``(score - random) / (human - random)`` (the PER/PSER convention, after van Hasselt et al.).
* MinAtar: the score of a uniformly random policy per game, measured here (below); a study
  normalises each game as ``(score - random) / (reference - random)`` with the uniform-replay
  agent's mean as the reference (1 = the uniform sampler, 0 = random play), since the MinAtar
  paper gives its agents' scores as curves, not a table.
"""

from __future__ import annotations

import math

# Random and human scores of PSER (Brittain et al., 2019) appendix, Table 5, for the 55 games listed there
# with both; keyed by the ALE v5 name (ALE/<name>-v5).  One entry departs from the table: Asteroids' random score,
# whose sign the table lost (Asteroids awards points only; the random score of the DQN papers is +719.1).
SCORES: dict[str, tuple[float, float]] = {
    "Alien": (227.8, 7127.7),
    "Amidar": (5.8, 1719.5),
    "Assault": (222.4, 742.0),
    "Asterix": (210.0, 8503.3),
    "Asteroids": (719.1, 47388.7),  # Table 5 prints -719.1: a sign lost in print, as a score here is never negative
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

MINATAR_RANDOM: dict[str, float] = {
    "Asterix": 0.435,
    "Breakout": 0.315,
    "Freeway": 0.355,
    "Seaquest": 0.075,
    "SpaceInvaders": 4.08,
}
"""Mean return of a uniformly random policy on ``MinAtar/<Game>-v1`` (sticky actions 0.1, difficulty ramping,
the project's 10k-step cap), 200 episodes each, env seeds 0-199, actions from ``default_rng(0)``; standard
errors 0.02-0.23.  Measured by ``scripts/minatar_random.py``."""


MINATAR_RANDOM_SETTINGS: dict[str, object] = {"sticky": 0.1, "ramping": True, "max_episode_steps": 10_000}
"""The environment settings :data:`MINATAR_RANDOM` was measured at (``prioritylab train dqn``'s ``--sticky``,
``--ramping`` and ``--max-episode-steps``): random play scores otherwise at other settings (Freeway at a
1,000-step cap: about 0.16 against 0.355), so a run at other settings is not normalised by it."""


ATARI_SCORE_SETTINGS: dict[str, object] = {"max_episode_frames": 108_000}
"""The episode cap at which :data:`SCORES`' random and human scores stand (``prioritylab train dqn``'s
``--max-episode-frames`` default, 30 minutes of play): a shorter episode scores far from them (random play on Pong
loses about 2 points in 400 frames, not 20.7), so a run at another cap is not human-normalised."""


def settings_differ(config: dict, measured: dict) -> str:
    """The settings of a run's ``config`` (flat, or a settings object) that differ from ``measured``, the settings a
    reference score was measured at, as "max_episode_steps 1000 (measured at 10000)"; "" if none (a setting the
    config lacks ran at its default, the measured value)."""
    get = config.get if isinstance(config, dict) else lambda key, default: getattr(config, key, default)
    missing = object()
    return "; ".join(f"{key} {got!r} (measured at {value!r})" for key, value in measured.items()
                     if (got := get(key, missing)) is not missing and got != value)  # fmt: skip


def minatar_random_differs(config: dict) -> str:
    """The settings of a run's flat ``config`` at which :data:`MINATAR_RANDOM` was not measured
    (:func:`settings_differ` with :data:`MINATAR_RANDOM_SETTINGS`)."""
    return settings_differ(config, MINATAR_RANDOM_SETTINGS)


def minatar_random(env_id: str) -> float | None:
    """Random play's mean return on ``env_id`` (:data:`MINATAR_RANDOM`): only for the ``-v1`` ids it was measured
    on, as random play over ``-v0``'s 6 actions scores otherwise (``scripts/minatar_random.py --version v0``, the
    same 200 episodes: Breakout 0.545, Freeway 0.110, SpaceInvaders 2.58 against -v1's 0.315, 0.355 and 4.08);
    None for any other id."""
    game = minatar_game(env_id)
    return MINATAR_RANDOM.get(game) if game is not None and env_id.endswith("-v1") else None


def atari_game(env_id: str) -> str | None:
    """``"Pong"`` for ``"ALE/Pong-v5"``; None for an id outside ALE v5."""
    if env_id.startswith("ALE/") and env_id.endswith("-v5"):
        return env_id[4:-3]
    return None


def minatar_game(env_id: str) -> str | None:
    """``"Breakout"`` for ``"MinAtar/Breakout-v1"`` (or ``-v0``); None for any other id."""
    if env_id.startswith("MinAtar/") and env_id[-3:] in ("-v0", "-v1"):
        return env_id[8:-3]
    return None


def human_normalised(game: str | None, score):
    """``(score - random) / (human - random)`` with the PSER appendix's scores (every human score there is
    above the random one); NaN for a game without published scores."""
    if game not in SCORES:
        return math.nan
    random, human = SCORES[game]
    return (score - random) / (human - random)
