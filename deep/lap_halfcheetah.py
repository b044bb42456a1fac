"""LAP/PAL Table 1 where its claim can show: TD3 on HalfCheetah-v5 with uniform, PER, LAP and PAL, 5 seeds.

LAP/PAL Table 1 (TD3, 10 seeds, 3M steps as read in ``lap_mujoco.PAPER_STEPS``: the text gives no length) shows
LAP's gains on HalfCheetah, Walker2d, Ant and Humanoid, while Hopper is tied (TD3 3393 +- 382 against LAP
3247 +- 463), so the Hopper runs of ``lap_mujoco.py`` cannot test LAP.  HalfCheetah is the cheapest of the
environments where the table separates the samplers (Table 1, last 10 evaluations, 95 % CIs over 10 trials): TD3
13,570.9 +- 794.2, TD3 + PER 13,927.8 +- 683.9, TD3 + LAP 14,836.5 +- 532.2, TD3 + PAL
15,012.2 +- 885.4.  At the paper's length the gains are +9 % (LAP) and +11 % (PAL) over TD3; at a
reduced budget only their direction can be checked.

- ``paper``: 3M steps, evaluated every 5k steps (10 episodes), as in the paper (10 seeds there).
- ``reduced``: 200k steps (7 % of the 3M of the authors' code; the 20 % of 1M this page said before took App. B
  Table 3's timing span for the training length), the paper's 25k random start and settings
  (LAP/PAL Table 6), evaluated every 5k steps, one torch thread, checkpoints every 25k steps.  A
  TD3 update here runs at 150-210/s on a quiet core, so a run takes 20-25 minutes alone and about
  twice that beside other work; 4 samplers x 5 seeds = 20 runs, about 8-15 core-hours.

Queued seed by seed, so that a sweep stopped part-way has every sampler at the same seeds:

    prioritylab sweep deep/lap_halfcheetah.py --budget reduced --seeds 5 --out runs/lap_halfcheetah
    prioritylab report runs/lap_halfcheetah --out docs/results/lap_halfcheetah

Power, worked out before the runs (``scripts/paper_power.py``, from Table 1's means and 95 % intervals over
10 trials, each interval read as a t and as a normal one since the paper does not say which; the Welch test
simulated): if Table 1's effects and seed-to-seed spreads were the truth, a 5-seed Welch comparison would
resolve LAP - TD3 (+9.3 %) with probability 0.34-0.43, PAL - TD3 (+10.6 %) with 0.29-0.37 and LAP - PER
(+6.5 %) with 0.23-0.29, its 95 % interval about +-9-15 % of the baseline's score wide; 80 % power for
LAP - TD3 needs 11-13 seeds a side.  So at 5 seeds "inconclusive" is the likely verdict even where the
paper's gains hold (unless they are larger at 200k steps); what the study can do is exclude gains larger than
its intervals.

    python scripts/paper_power.py --trials 10 --seeds 5 --baseline td3 --pair lap:per --pair pal:per \
        td3=13570.9,794.2 per=13927.8,683.9 lap=14836.5,532.2 pal=15012.2,885.4

The 5-seed grid is the first stage.  LAP's main claim, LAP over TD3, then gets seeds 5-12 for uniform and LAP
alone (16 more runs; 13 a side give 0.81-0.90 power):

    prioritylab sweep deep/lap_halfcheetah.py --budget reduced --seeds 13 --only sampler=uniform \
        --only sampler=lap --out runs/lap_halfcheetah

Its runs are committed apart from the 20 (``docs/results/lap_halfcheetah/followup/runs``), so that the 5-seed
report keeps rebuilding from its own runs; the follow-up's report reads both folders.
"""

from pathlib import Path

from prioritylab.harness.sweep import load_module

SAMPLERS = ("uniform", "per", "lap", "pal")
SEED_MAJOR = True
PAPER_STEPS = load_module(Path(__file__).resolve().parent / "lap_mujoco.py").PAPER_STEPS


def runs(budget: str) -> list[dict]:
    if budget == "paper":
        extra = {"steps": PAPER_STEPS}
    else:
        extra = {"steps": 200_000, "threads": 1, "checkpoint_every": 25_000}
    return [{"agent": "td3", "env": "HalfCheetah-v5", "sampler": s, **extra} for s in SAMPLERS]
