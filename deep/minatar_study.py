"""A sampler study on MinAtar: DQN with uniform, PER, LAP, PAL and PSER on the five MinAtar games.

The agent is the MinAtar paper's DQN baseline (Young & Tian, 2019; ``prioritylab train dqn --env
MinAtar/<Game>-v1``, settings in :class:`prioritylab.deep.dqn.MinAtarSettings`): one 3x3 conv of 16,
a hidden layer of 128, RMSProp 2.5e-4, batch 32, a replay of 100k, a target copy every 1,000 frames,
epsilon 1 -> 0.1 over 100k frames after a 5k-frame random start, one update per frame, sticky
actions 0.1.  The samplers take DQN's defaults (PSER appendix Table 4: PER/PSER alpha 0.5, beta 0.5
fixed; LAP/PAL alpha 0.6, LAP Table 7, kappa 0.01, LAP App. D.2).  Run it with 5 seeds:

    prioritylab sweep deep/minatar_study.py --budget reduced --seeds 5 --jobs 1 --out runs/minatar_study

``paper``: the paper's 5M frames a run, evaluated every 100k frames (10 episodes, epsilon 0.001,
env seeded with seed + 100; the paper itself reports training returns).

``reduced``: 250k frames a run, 5 % of the paper's 5M, with the paper's schedule unchanged (the
exploration decay ends at 105k frames, so the last 145k frames learn at epsilon 0.1), evaluated every
12.5k frames (20 evaluations), one torch thread, checkpoints every 50k frames.  A run takes 11-27
minutes on one core of this 2-core machine shared with other work (median 14; about 300 frames/s with an update
per frame).

The reduced grid holds the games on which DQN with uniform replay clearly leaves random play within
250k frames, measured with seed 0 (mean of the last 10 evaluations against random play,
``prioritylab.scores.MINATAR_RANDOM``): **Breakout** 6.6 against 0.3 and **SpaceInvaders** 24.0
against 4.1.  On the other three it has not: Asterix 1.0 against 0.4, Seaquest 0.5 against 0.1,
Freeway 0.25 against 0.36 (the per-run files are in docs/results/minatar_study/runs).  A sampler
study on a game the agent has not begun to learn compares noise, so those three games stay in the
``paper`` grid only; 2 games x 5 samplers x 5 seeds = 50 reduced runs, 12.5 core-hours here.

``deep/minatar_study_ddqn.py`` is the same grid with Double DQN (LAP Table 7's and App. D.2's sampler settings), an
optional second queue; its uniform and PER cells are in ``docs/results/minatar_study_ddqn/``.

The queue is seed-major (``SEED_MAJOR``): every game x sampler with seed 0, then with seed 1, and so
on, so that a sweep stopped part-way has the same seeds for every cell.
"""

from prioritylab.provenance import as_before

GAMES = ("Breakout", "Asterix", "Freeway", "Seaquest", "SpaceInvaders")
LEARNED_BY_250K = ("Breakout", "SpaceInvaders")
"""The games on which DQN with uniform replay clearly left random play within 250k frames (seed 0, above)."""
SAMPLERS = ("uniform", "per", "lap", "pal", "pser")
SEED_MAJOR = True
PAPER = {"steps": 5_000_000, "eval_every": 100_000, "checkpoint_every": 250_000}
REDUCED = {"steps": 250_000, "eval_every": 12_500, "checkpoint_every": 50_000, "threads": 1}
PSER_EACH = as_before("replay.duplicates")
"""PSER's reduced runs predate the setting and applied eq. 10 once per drawn copy of a slot (a slot drawn twice in
a minibatch went to eta^2 p_old); pinned so that this specification reproduces them, and so that the long study
(``minatar_study_long.py``), whose first PSER run ran so, keeps one rule for all its seeds.  The ``paper`` budget
takes the default, one update per slot."""


def runs(budget: str) -> list[dict]:
    budget_settings, games = (PAPER, GAMES) if budget == "paper" else (REDUCED, LEARNED_BY_250K)
    pinned = {"pser": PSER_EACH} if budget != "paper" else {}
    return [{"agent": a, "env": f"MinAtar/{g}-v1", "sampler": s, **budget_settings, **pinned.get(s, {})}
            for a in ("dqn",) for g in games for s in SAMPLERS]  # fmt: skip
