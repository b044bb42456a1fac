"""NERS Table 1: TD3 and SAC on MuJoCo with uniform ("RANDOM"), PER and NERS sampling.

Paper budget (NERS Table 1, App. B): Ant, Walker2d and Hopper (v3 then; v5 here), 500k training steps, 5
seeds, TD3 and SAC, after 5,000 random actions (Table B.1; the agents' own default is LAP Table 6's 25k).
``reduced`` (fits a 2-core machine, 15-35 min a run): TD3 on Hopper-v5, 100k steps (25k random), checkpoints
every 10k steps, one torch thread; the same runs as the Hopper comparison of deep/lap_mujoco.py, so both
sweeps can share one output folder. The Pendulum figure (NERS Fig. 3) has its own specification,
deep/ners_pendulum.py.

    prioritylab sweep deep/ners_mujoco.py --budget reduced --seeds 2 --out runs/td3_hopper_reduced
"""

AGENTS = ("td3", "sac")
SAMPLERS = ("uniform", "per", "ners")
PAPER_ENVS = ("Ant-v5", "Walker2d-v5", "Hopper-v5")


def runs(budget: str) -> list[dict]:
    if budget == "paper":
        return [{"agent": a, "env": e, "sampler": s, "steps": 500_000, "start_steps": 5_000} for a in AGENTS
                for e in PAPER_ENVS for s in SAMPLERS]  # fmt: skip
    return [{"agent": "td3", "env": "Hopper-v5", "sampler": s, "steps": 100_000, "threads": 1,
             "checkpoint_every": 10_000} for s in SAMPLERS]  # fmt: skip
