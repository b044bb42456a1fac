"""Why LAP and PAL trail on MinAtar Breakout, from the loss's side: kappa = 1 at the study's RMSProp eps.

``deep/minatar_lap_eps.py`` lowered RMSProp's eps from 0.01 to 1e-5, and LAP and PAL came level with
uniform replay: at eps 0.01, their Huber(kappa) gradients (at most kappa = 0.01, LAP App. D.2) sat below
eps, so their steps shrank.  This specification tests the same explanation from the other side: it keeps
the study's eps 0.01 and raises kappa to 1, the value of LAP's main text (eq. 9, and its TD3 runs; App. D.2
lowers it to 0.01 for Atari "due to the magnitude of training errors being lower"), so that LAP's and PAL's
losses have the gradient scale of uniform's Huber loss (DQN's, kappa 1).  If the explanation
holds, LAP and PAL come level with the study's uniform runs here too.

Uniform replay does not read kappa, so its runs would be the study's own (same seeds, same settings):
they are not run again; compare with ``docs/results/minatar_study/runs``.

    prioritylab sweep deep/minatar_lap_kappa.py --budget reduced --seeds 5 --out runs/minatar_lap_kappa
    prioritylab report runs/minatar_lap_kappa --out docs/results/minatar_lap_kappa

10 runs of 15-20 minutes each on one core.  ``paper`` is the same grid at the MinAtar paper's 5M frames.
"""

from pathlib import Path

from prioritylab.harness.sweep import load_module

STUDY = load_module(Path(__file__).resolve().parent / "minatar_study.py")
SAMPLERS = ("lap", "pal")
SEED_MAJOR = True
KAPPA = 1.0
"""LAP eq. 9 (the main text's LAP, and its TD3 runs): the Huber threshold kappa = 1; App. D.2 uses 0.01 on Atari."""


def runs(budget: str) -> list[dict]:
    """The study's Breakout runs of LAP and PAL, with kappa at LAP eq. 9's value."""
    return [{**run, "replay.kappa": KAPPA} for run in STUDY.runs(budget)
            if run["env"] == "MinAtar/Breakout-v1" and run["sampler"] in SAMPLERS]  # fmt: skip
