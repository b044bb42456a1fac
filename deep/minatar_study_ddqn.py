"""The MinAtar sampler study (``minatar_study.py``) with Double DQN in place of DQN: same games, samplers,
budgets and seed-major queue; the samplers take Double DQN's defaults (LAP/PAL Table 7: PER alpha 0.6, beta
0.4, annealed to 1 as in PER Section 3.4; LAP/PAL alpha 0.6, and kappa 0.01 from App. D.2).

    prioritylab sweep deep/minatar_study_ddqn.py --budget reduced --seeds 5 --jobs 2 --out runs/minatar_study_ddqn

The cells run so far are uniform replay and PER on both games, LAP/PAL Table 2's comparison, 5 seeds each
(``docs/results/minatar_study_ddqn/``, with its commands: ``--only`` picks the cells); a run takes about 12 minutes
with two at a time on a 2-core AMD EPYC family 26 machine.
"""

from pathlib import Path

from prioritylab.harness.sweep import load_spec

HERE = Path(__file__).resolve().parent
SEED_MAJOR = True


def runs(budget: str) -> list[dict]:
    return [{**run, "agent": "ddqn"} for run in load_spec(HERE / "minatar_study.py", budget)]
