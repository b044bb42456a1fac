"""NERS Fig. 3 (a) and (d): TD3 and SAC on Pendulum with uniform, PER and NERS sampling, 5 seeds.

The paper's Pendulum* is Pendulum-v0 with a sparser reward (1 only after 20 upright steps, App. A.2);
its figure's step budget is not given in the text. Here: gymnasium's standard Pendulum-v1 (dense
reward), the agents' paper settings (256-256 networks, batch 256).

- ``reduced``: 10k steps in total, the first 1,000 random (9k updates; shorter than NERS Table 3's
  10k training steps after 1,000 random actions), evaluated every 500 steps, one torch thread per
  run; about 3-6 min a run on one core.
- ``paper``: 50k steps, evaluated every 1,000 steps (our choice of horizon, see above).

    prioritylab sweep deep/ners_pendulum.py --budget reduced --seeds 5 --out runs/ners_pendulum
    prioritylab report runs/ners_pendulum --out docs/results/ners_pendulum
"""

AGENTS = ("td3", "sac")
SAMPLERS = ("uniform", "per", "ners")


def runs(budget: str) -> list[dict]:
    if budget == "paper":
        common = {"env": "Pendulum-v1", "steps": 50_000, "start_steps": 1000, "eval_every": 1000}
    else:
        common = {"env": "Pendulum-v1", "steps": 10_000, "start_steps": 1000, "eval_every": 500, "threads": 1}
    return [{**common, "agent": a, "sampler": s} for a in AGENTS for s in SAMPLERS]
