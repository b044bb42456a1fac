"""At what budget does DQN leave random play on Asterix, Seaquest and Freeway?  A measurement, one seed.

``deep/minatar_study.py`` runs its reduced grid on the games where DQN with uniform replay clearly left
random play within 250k frames (Breakout, SpaceInvaders).  On Asterix, Seaquest and Freeway it had not
(seed 0: 1.0, 0.5 and 0.25 against random play's 0.44, 0.08 and 0.36).  This specification measures how
much longer they take: DQN with uniform replay (the study's agent and settings, the MinAtar paper's DQN
baseline), seed 0, for 1M frames, 20 % of the MinAtar paper's 5M (Young & Tian, 2019), evaluated every
25k frames, so the learning curve says where each game leaves random play, and so what a five-sampler,
five-seed study on it would cost here.

The criterion, fixed before these runs: a game is learned by frame F when the mean of the 10 evaluations
up to F (the study's final-score window in evaluations: 250k frames at this specification's 25k spacing, 125k at
the study's 12.5k) is at least 3 times random play's score and at least 1 point above it.
The first frame it can name is the 10th evaluation's (250k frames here); ``scripts/learned_by.py`` applies it to
run folders.  It sorts the study's 250k-frame seed-0 runs as the study did (tested): Breakout (6.6 against 0.3) and
SpaceInvaders (24.0 against 4.1) pass; Asterix (1.0 against 0.4), Seaquest (0.5 against 0.1) and Freeway
(0.25 against 0.36) do not.

    prioritylab sweep deep/minatar_budget.py --budget reduced --seeds 1 --out runs/minatar_budget
    prioritylab report runs/minatar_budget --out docs/results/minatar_budget
    python scripts/learned_by.py runs/minatar_budget/*     # the criterion, frame by frame

3 runs of about 70-80 minutes each on one core (checkpoints every 50k frames; a stopped sweep resumes).
``paper`` is the same at the paper's 5M frames.
"""

from pathlib import Path

from prioritylab.harness.sweep import load_module

STUDY = load_module(Path(__file__).resolve().parent / "minatar_study.py")
GAMES = ("Asterix", "Seaquest", "Freeway")
"""The games the study's 250k-frame grid leaves out (``STUDY.LEARNED_BY_250K`` holds the other two)."""
LEARNED_WINDOW = 10
"""Evaluations averaged by the criterion (the study's final score: its last 10)."""
LEARNED_RATIO = 3.0
"""The criterion's first bound: the window's mean at least this many times random play's score."""
LEARNED_MARGIN = 1.0
"""Its second bound: the window's mean at least this many points above random play's score."""
REDUCED = {"steps": 1_000_000, "eval_every": 25_000, "checkpoint_every": 50_000, "threads": 1}


def runs(budget: str) -> list[dict]:
    """DQN with uniform replay on each game the study's reduced grid leaves out."""
    settings = STUDY.PAPER if budget == "paper" else REDUCED
    return [{"agent": "dqn", "env": f"MinAtar/{g}-v1", "sampler": "uniform", **settings} for g in GAMES]
