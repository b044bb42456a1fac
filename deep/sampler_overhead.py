"""LAP/PAL App. B, Table 3: the run time of TD3 with each sampler and its increase over a uniform buffer.

Paper budget: TD3 for 1M time steps, 3 trials per implementation (Table 3: uniform 81.6 min, the LAP
authors' PER +13.7 %, Dopamine's +75.2 %, OpenAI baselines' +229.4 %; the environment is not named
there; ``paper`` here uses HalfCheetah-v5).  ``prioritylab report`` turns the runs' ``timing.csv`` into
the same table (``overhead.md``).

``reduced`` (a few minutes on a 2-core machine): Hopper-v5, 3,000 steps of which 1,000 random, every
sampler, one torch thread, evaluations every 1,000 steps with 2 episodes.  Run the seeds one at a time
(``--jobs 1``, the default) so that the runs do not share a core; the wall times still include the
machine's load, so compare runs made in one sweep.  ``prioritylab bench agent`` measures the same
overhead with the samplers interleaved, which is more robust to load (docs/benchmarks.md).

    prioritylab sweep deep/sampler_overhead.py --budget reduced --seeds 3 --out runs/sampler_overhead
    prioritylab report runs/sampler_overhead --out report/sampler_overhead
"""

SAMPLERS = ("uniform", "per", "lap", "pal", "pser", "ners")


def runs(budget: str) -> list[dict]:
    if budget == "paper":
        return [{"agent": "td3", "env": "HalfCheetah-v5", "sampler": s, "steps": 1_000_000} for s in SAMPLERS]
    return [{"agent": "td3", "env": "Hopper-v5", "sampler": s, "steps": 3_000, "start_steps": 1_000,
             "eval_every": 1_000, "eval_episodes": 2, "threads": 1} for s in SAMPLERS]  # fmt: skip
