"""NERS Table 1: TD3 and SAC on MuJoCo with uniform ("RANDOM"), PER and NERS sampling.

Paper budget (NERS Table 1, App. B): Ant, Walker2d and Hopper (v3 then; v5 here), 500k training steps, 5
seeds, TD3 and SAC, with Table B.1's settings for continuous control where they differ from the agents' own
(LAP Table 6): 5,000 random actions (LAP: 25k), batch 128 (LAP: 256), and PER's alpha 0.5 (PER's own: 0.6; NERS
takes 0.5 by default).  Two of Table B.1's settings are departures here: TD3's learning rate stays 3e-4 (TD3's
and LAP Table 6's; Table B.1 gives 5e-3 and no run here has tried it), and evaluations stay 10 episodes every
5k steps (Table B.1's "one evaluation rollout per the maximum steps" does not say how often).
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
        return [{"agent": a, "env": e, "sampler": s, "steps": 500_000, "start_steps": 5_000, "batch_size": 128,
                 **({"replay.alpha": 0.5} if s == "per" else {})} for a in AGENTS for e in PAPER_ENVS
                for s in SAMPLERS]  # fmt: skip
    return [{"agent": "td3", "env": "Hopper-v5", "sampler": s, "steps": 100_000, "threads": 1,
             "checkpoint_every": 10_000} for s in SAMPLERS]  # fmt: skip
