"""Why LAP and PAL trail on MinAtar Breakout: the same DQN runs with RMSProp's eps at LAP's Atari value.

In ``deep/minatar_study.py`` LAP and PAL end far below uniform replay on Breakout.  They take LAP App. D.2's
kappa = 0.01, so their Huber(kappa) loss has gradients of at most 0.01; MinAtar's DQN trains with centered
RMSProp and eps 0.01 (the MinAtar reference DQN), which divides each step by the running gradient scale
plus 0.01.  Read from the study's checkpoints (``scripts/optimizer_scale.py``), LAP's and PAL's gradient
scales end 20-270 times below uniform's (seed 1) and far below that eps, so their steps shrink with their
gradients.  The LAP/PAL authors' own Double DQN (LAP/PAL App. D.2) trained with centered RMSProp at
eps 1e-5, a thousand times smaller, where such gradients are still normalised.

This specification changes that one setting: uniform, LAP and PAL on Breakout with ``rms_eps`` 1e-5 (LAP/PAL
App. D.2), everything else as the study's reduced budget (250k frames, evaluated every 12.5k, 5 seeds).
Uniform replay runs again as the control, since eps changes its steps too.  If the optimiser's eps
explains the gap, LAP and PAL come level with (or above) uniform here.  PER (the study's settings) runs
at the same eps too (added after the other 15 runs), so that LAP's claim over PER is tested under the LAP
authors' optimiser.

    prioritylab sweep deep/minatar_lap_eps.py --budget reduced --seeds 5 --out runs/minatar_lap_eps
    prioritylab report runs/minatar_lap_eps --out docs/results/minatar_lap_eps

20 runs of 12-20 minutes each on one core.  ``paper`` is the same grid at the MinAtar paper's 5M frames.
"""

from pathlib import Path

from prioritylab.harness.sweep import load_module

STUDY = load_module(Path(__file__).resolve().parent / "minatar_study.py")
SAMPLERS = ("uniform", "lap", "pal", "per")
SEED_MAJOR = True
RMS_EPS = 1e-5
"""LAP/PAL App. D.2: the Atari Double DQN's centered RMSProp, eps 1e-5."""


def runs(budget: str) -> list[dict]:
    """The study's Breakout runs of these samplers, with RMSProp's eps at LAP's value."""
    return [{**run, "rms_eps": RMS_EPS} for run in STUDY.runs(budget)
            if run["env"] == "MinAtar/Breakout-v1" and run["sampler"] in SAMPLERS]  # fmt: skip
