"""LAP/PAL Table 1 (and the Table 4 ablation's samplers): TD3 on MuJoCo with uniform, PER, LAP and PAL.

Paper budget (LAP/PAL Section 6 and App. D; 1M steps from App. B Table 3): 1M steps x 10 seeds on HalfCheetah, Hopper,
Walker2d, Ant, Humanoid (v3 then; v5 here). Reduced budget (fits a 2-core machine,
about 15 min a run): Hopper-v5, 100k steps; results labelled as such in docs/results/.

    prioritylab sweep deep/lap_mujoco.py --budget reduced --seeds 2 --out runs/lap_mujoco
"""

SAMPLERS = ("uniform", "per", "lap", "pal")
PAPER_ENVS = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5")


def runs(budget: str) -> list[dict]:
    if budget == "paper":
        return [{"agent": "td3", "env": env, "sampler": s, "steps": 1_000_000} for env in PAPER_ENVS for s in SAMPLERS]
    return [{"agent": "td3", "env": "Hopper-v5", "sampler": s, "steps": 100_000, "threads": 1,
             "checkpoint_every": 10_000} for s in SAMPLERS]  # fmt: skip
