"""A sampler study on MinAtar: DQN with uniform, PER, LAP, PAL and PSER on the five MinAtar games.

The agent is the MinAtar paper's DQN baseline (Young & Tian, 2019; ``prioritylab train dqn --env
MinAtar/<Game>-v1``, settings in :class:`prioritylab.deep.dqn.MinAtarSettings`): one 3x3 conv of 16,
a hidden layer of 128, RMSProp 2.5e-4, batch 32, a replay of 100k, a target copy every 1,000 frames,
epsilon 1 -> 0.1 over 100k frames after a 5k-frame random start, one update per frame, sticky
actions 0.1.  The samplers take DQN's defaults (PSER appendix Table 4: PER/PSER alpha 0.5, beta 0.5
fixed; LAP/PAL alpha 0.6, kappa 0.01, LAP Table 7).  Run it with 5 seeds:

    prioritylab sweep deep/minatar_study.py --budget reduced --seeds 5 --jobs 2 --out runs/minatar_study

``paper``: the paper's 5M frames a run, evaluated every 100k frames (10 episodes, epsilon 0.001,
env seeded with seed + 100; the paper itself reports training returns).

``reduced``: 250k frames a run, 5 % of the paper's 5M, with the paper's schedule unchanged (the
exploration decay ends at 105k frames, so the last 145k frames learn at epsilon 0.1), evaluated every
12.5k frames (20 evaluations), one torch thread, checkpoints every 50k frames.  Measured here (2 cores
shared with other work, one torch thread): 310-330 frames/s between evaluations with uniform or PER
on a quiet core, 250 frames/s over a whole 100k-frame DQN + uniform Breakout run (evaluations
included, under load), so a reduced run takes 13-17 minutes and the 125 runs of 5 seeds about 30
core-hours.  The budget trades length for seeds: five seeds per cell are what lets a study separate
samplers at all, and 250k frames is where that Breakout run (seed 0: 0.0 at 10k frames, 2.8 at 30k,
5.5 at 100k, means of 10 evaluation episodes; the untrained policy scores 0) has clearly left the
floor.  Whether every game has is read off the seed-0 curves (docs/results/minatar_study).

``deep/minatar_study_ddqn.py`` is the same grid with Double DQN (LAP Table 7's sampler settings), an
optional second queue.

The queue is seed-major (``SEED_MAJOR``): every game x sampler with seed 0, then with seed 1, and so
on, so that a sweep stopped part-way has the same seeds for every cell.
"""

GAMES = ("Breakout", "Asterix", "Freeway", "Seaquest", "SpaceInvaders")
SAMPLERS = ("uniform", "per", "lap", "pal", "pser")
SEED_MAJOR = True
PAPER = {"steps": 5_000_000, "eval_every": 100_000, "checkpoint_every": 250_000}
REDUCED = {"steps": 250_000, "eval_every": 12_500, "checkpoint_every": 50_000, "threads": 1}


def runs(budget: str) -> list[dict]:
    budget_settings = PAPER if budget == "paper" else REDUCED
    return [{"agent": a, "env": f"MinAtar/{g}-v1", "sampler": s, **budget_settings}
            for a in ("dqn",) for g in GAMES for s in SAMPLERS]  # fmt: skip
