"""The MinAtar sampler study on the three games DQN learns late: Asterix, Freeway and Seaquest.

``minatar_study.py`` runs DQN with uniform, PER, LAP, PAL and PSER at 250k frames, where DQN with uniform replay
leaves random play on Breakout and SpaceInvaders only.  ``minatar_budget.py`` measured (one seed, 1M frames;
``docs/results/minatar_budget``) when it leaves random play on the other three: Asterix at 300k frames and
14.5-16.7 from 675k on, Freeway at 550k and climbing steeply after it, Seaquest only at 850k with scores of 1-3
at 1M.  This specification gives each game the budget that measurement names, with everything else the study's
(agent, samplers and their defaults, evaluation every 12.5k frames with 10 episodes, so a run's final score
is again the mean of its last 10 evaluations, the last 125k frames):

- **Asterix**: 600k frames (12 % of the MinAtar paper's 5M; Young & Tian, 2019);
- **Freeway**: 700k frames (14 %);
- **Seaquest**: 1M frames (20 %), where the probe's curve had not levelled off.

LAP and PAL run at the Huber threshold kappa = 1 (LAP eq. 9), not LAP App. D.2's Atari value 0.01 that the
250k-frame study gives them.  At MinAtar's RMSProp eps 0.01, kappa 0.01 keeps LAP's and PAL's gradients
below eps, so their steps shrink and they stay near random play: measured on Breakout and SpaceInvaders
(``minatar_study.py``), traced on Breakout (``minatar_lap_eps.py``, ``minatar_lap_kappa.py``: kappa 1 brings
them level with uniform), and seen again in this study's first three LAP and PAL runs on Asterix, which ran at
kappa 0.01 and never left random play (best evaluations 1.1-1.4, where uniform replay reached 19-25; kept in
``docs/results/minatar_study_long/kappa_0.01/``).  A setting that cannot learn cannot test LAP's claims, and
kappa is read by LAP and PAL alone, so every other sampler's runs are unchanged.

Each is one seed's measurement, so a seed that learns later than the probe's may still be near random play at
the end; the report's per-run table shows it.  At the probe's 62-77 minutes per 1M frames on one core of this
2-core machine, 5 samplers x 5 seeds take about 19 hours (Asterix), 19 (Freeway) and 26 (Seaquest).  Run them
a game at a time, each queue seed by seed; Asterix first, the game whose probe learned earliest:

    prioritylab sweep deep/minatar_study_long.py --budget reduced --seeds 5 --only env=MinAtar/Asterix-v1 \
        --out runs/minatar_study_long
    prioritylab report runs/minatar_study_long --out docs/results/minatar_study_long

``paper`` is ``minatar_study.py``'s grid (the paper's 5M frames on all five games) with LAP's and PAL's kappa as here.
"""

from pathlib import Path

from prioritylab.harness.sweep import load_module, load_spec

HERE = Path(__file__).resolve().parent
STUDY = load_module(HERE / "minatar_study.py")
KAPPA = {s: load_module(HERE / "minatar_lap_kappa.py").KAPPA for s in ("lap", "pal")}
"""LAP's and PAL's Huber threshold here: LAP eq. 9's 1 (see above); the other samplers do not read kappa."""
FRAMES = {"Asterix": 600_000, "Freeway": 700_000, "Seaquest": 1_000_000}
"""Frames per run, from ``docs/results/minatar_budget`` (seed 0 of DQN with uniform replay)."""
SEED_MAJOR = True


def runs(budget: str) -> list[dict]:
    if budget == "paper":
        grid = load_spec(HERE / "minatar_study.py", "paper")
    else:
        grid = [{"agent": "dqn", "env": f"MinAtar/{game}-v1", "sampler": s, **STUDY.REDUCED, "steps": steps,
                 **(STUDY.PSER_EACH if s == "pser" else {})}
                for game, steps in FRAMES.items() for s in STUDY.SAMPLERS]  # fmt: skip
    return [{**run, "replay.kappa": KAPPA[run["sampler"]]} if run["sampler"] in KAPPA else run for run in grid]
