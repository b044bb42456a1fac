"""The deep half of ``make demo``: TD3 on Pendulum-v1 with uniform replay and with PER, a minute or two.

A short, reduced-budget run (3,000 steps, the first 1,000 random, one seed;
``make demo`` runs it beside the theory scripts): it shows the agents, the
samplers and the run files working end to end, not a result.  No wall time per
sampler is printed: one run on a shared machine is no speed comparison
(``prioritylab bench agent`` is).
Writes each run's folder (CSV, TensorBoard, manifest, checkpoint), a combined
``curves.csv``, ``curves.png`` and ``manifest.json`` under ``--out``.

    python deep/pendulum_demo.py --out results/demo/pendulum_demo [--quick] [--steps N]
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from prioritylab._cli import Parser, check_output_dir, fail, nonnegative_int, positive_int  # noqa: E402
from prioritylab.deep import td3  # noqa: E402
from prioritylab.deep.loop import check_settings, train  # noqa: E402
from prioritylab.deep.run import SettingsError  # noqa: E402
from prioritylab.results import EVALS, save_figure, write_csv, write_manifest  # noqa: E402

SAMPLERS = ("uniform", "per")


def main(argv: list[str] | None = None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("results/pendulum_demo"), help="output folder")
    p.add_argument("--quick", action="store_true", help="600 steps, the first 256 random (smoke run)")
    p.add_argument("--steps", type=positive_int, default=3000, help="environment steps per run")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of both runs")
    args = p.parse_args(argv)
    steps = 600 if args.quick else args.steps
    start = 256 if args.quick else 1000  # at least TD3's batch, so that the first batches do not repeat rows
    every = 200 if args.quick else 1000
    if steps <= start:  # train's own message names an option this script does not have
        fail(p.prog, f"--steps {steps} must exceed the {start} random steps that start each run")
    cfgs = [td3.TD3Settings(env="Pendulum-v1", sampler=sampler, steps=steps, start_steps=start, eval_every=every,
                            eval_episodes=5, seed=args.seed, out=args.out, overwrite=True)
            for sampler in SAMPLERS]  # fmt: skip
    try:  # both runs' settings and the folder, before the first run starts
        for cfg in cfgs:
            check_settings(td3.SPEC, cfg)
        check_output_dir(args.out)
    except (SettingsError, ValueError) as err:
        fail(p.prog, str(err))
    rows, summary = [], []
    for sampler, cfg in zip(SAMPLERS, cfgs, strict=True):
        folder = train(td3.SPEC, cfg)
        with open(folder / EVALS, newline="") as fh:
            evals = list(csv.DictReader(fh))
        for r in evals:
            rows.append({"sampler": sampler, "step": int(r["step"]), "return_mean": float(r["return_mean"]),
                         "return_std": float(r["return_std"])})  # fmt: skip
        summary.append(f"{sampler:8s} final return {float(evals[-1]['return_mean']):8.1f} ({steps} steps)")
    write_csv(args.out / "curves.csv", rows)
    fig, ax = plt.subplots(figsize=(5, 3.2))
    for sampler in SAMPLERS:
        pts = [(r["step"], r["return_mean"]) for r in rows if r["sampler"] == sampler]
        ax.plot(*zip(*pts, strict=True), marker="o", label=sampler)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("evaluation return (5 episodes)")
    ax.set_title(f"TD3 on Pendulum-v1, one seed, {steps} steps (reduced budget)")
    ax.legend()
    save_figure(fig, args.out / "curves.png")
    plt.close(fig)
    table = "\n".join(summary)
    write_manifest(args.out, {"steps": steps, "start_steps": start, "seed": args.seed, "samplers": SAMPLERS},
                   {"summary": table})  # fmt: skip
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
