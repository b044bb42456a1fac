"""LAP/PAL Table 1 (and the Table 4 ablation's samplers): TD3 on MuJoCo with uniform, PER, LAP and PAL.

Paper budget (LAP/PAL Section 6 and App. D): ``PAPER_STEPS`` x 10 seeds on HalfCheetah, Hopper, Walker2d, Ant,
Humanoid (v3 then; v5 here). Reduced budget (fits a 2-core machine,
about 15 min a run): Hopper-v5, 100k steps; results labelled as such in docs/results/.

    prioritylab sweep deep/lap_mujoco.py --budget reduced --seeds 2 --out runs/lap_mujoco
"""

SAMPLERS = ("uniform", "per", "lap", "pal")
PAPER_STEPS = 3_000_000
"""The length of a Table 1 run.  The LAP/PAL text does not give it: App. B Table 3's "1 million time steps" is the
span over which run times were measured, not the training length.  The authors' public code trains for 3M steps
by default (``continuous/main.py``, ``--max_timesteps 3e6``, with PER's beta annealed to 1 over 3M steps in its
``utils.py``), so Table 1 is read as 3M steps."""
PAPER_ENVS = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5")


def runs(budget: str) -> list[dict]:
    if budget == "paper":
        return [{"agent": "td3", "env": env, "sampler": s, "steps": PAPER_STEPS}
                for env in PAPER_ENVS for s in SAMPLERS]  # fmt: skip
    return [{"agent": "td3", "env": "Hopper-v5", "sampler": s, "steps": 100_000, "threads": 1,
             "checkpoint_every": 10_000} for s in SAMPLERS]  # fmt: skip
