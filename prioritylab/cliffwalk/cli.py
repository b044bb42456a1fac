"""``prioritylab cliffwalk``: run a Blind Cliffwalk learner over seeds and summarise.

Example (PER Fig. 2 right, one cell)::

    prioritylab cliffwalk --n 16 --learner linear --sampler per --alpha 0.7 --seeds 10

prints the median (min/max) number of updates until the MSE over all 2n
state-action pairs is below the threshold, with the number of censored runs,
and with ``--out`` writes ``runs.csv``, ``summary.csv``, a PNG and
``manifest.json``.  ``--benchmark`` runs the speed comparison against the
plain NumPy reference instead.
"""

from __future__ import annotations

import dataclasses
import sys
import time

from .._cli import BOOKKEEPING, HelpFormatter, check_output_dir, given, positive_int, remember_defaults
from .experiments import CAP_PER_TRANSITION
from .runner import INITS, LEARNERS, SCHEMES, RunConfig

PROGRAM = "prioritylab cliffwalk"
"""What its results folder's ``manifest.json`` records as the ``program`` that wrote it."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "cliffwalk",
        help="Blind Cliffwalk testbed: updates to learn Q* under a replay scheme",
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    d = RunConfig()
    p.add_argument("--n", type=int, nargs="+", default=[d.n], help="number of states; several values run a sweep")
    p.add_argument("--learner", choices=LEARNERS, default=d.learner, help="tabular, or linear (1-hot + bias)")
    p.add_argument("--sampler", choices=sorted(SCHEMES), default=d.scheme, help="replay scheme")
    p.add_argument("--alpha", type=float, default=d.alpha, help="prioritisation exponent (PER eq. 1)")
    p.add_argument("--beta", type=float, default=d.beta, help="IS exponent, constant (0: no IS correction)")
    p.add_argument("--eps", type=float, default=d.eps, help="proportional priority |delta| + eps")
    p.add_argument("--init", choices=sorted(INITS), default=d.init, help="initial priority of the filled memory")
    p.add_argument("--rho", type=float, default=d.rho, help="PSER decay coefficient")
    p.add_argument("--window", type=int, default=None, help="PSER window (default from rho, PSER eq. 8-9)")
    p.add_argument("--eta", type=float, default=d.eta, help="PSER anti-collapse coefficient (eq. 10)")
    p.add_argument("--mode", choices=("max", "add"), default=d.mode, help="PSER decay variant (eq. 6 / eq. 7)")
    p.add_argument("--kappa", type=float, default=d.kappa, help="LAP priority floor")
    p.add_argument("--lr", type=float, default=d.lr, help="step size (PER: 1/4)")
    p.add_argument("--q0", choices=("normal", "zeros"), default=d.q0, help="initial parameters")
    p.add_argument("--init-std", type=float, default=d.init_std, help="std of the initial parameters")
    p.add_argument("--threshold", type=float, default=d.threshold, help="MSE threshold of convergence")
    p.add_argument("--cap", type=positive_int, default=None,
                   help=f"update cap per run (default: {CAP_PER_TRANSITION} per memory transition)")
    p.add_argument("--seeds", type=positive_int, default=10, help="number of seeds (runs seeds 0, 1, ...)")
    p.add_argument("--jobs", type=positive_int, default=1, help="worker processes")
    p.add_argument("--out", default=None, help="folder for runs.csv, summary.csv, a PNG and manifest.json")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--no-diagnostics", action="store_true",
                   help="skip the replay diagnostics (about a tenth faster; docs/benchmarks.md)")
    p.add_argument("--benchmark", action="store_true", help="measure Q-updates/s, jitted vs NumPy reference")
    remember_defaults(p, func=main)


def flags(args) -> dict[str, str]:
    """The option that sets each :class:`RunConfig` field, as the messages name it: the field's own name (the
    parser's ``dest``), but ``scheme``'s ``--sampler`` (:func:`config_from`)."""
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    names = {dest: "--" + dest.replace("_", "-") for dest in args.given_defaults if dest in fields}
    return {**names, "scheme": "--sampler"}


def config_from(args) -> RunConfig:
    return RunConfig(
        n=args.n[0], learner=args.learner, scheme=args.sampler, alpha=args.alpha, beta=args.beta, eps=args.eps,
        init=args.init, rho=args.rho, window=args.window, eta=args.eta, mode=args.mode, kappa=args.kappa,
        lr=args.lr, q0=args.q0, init_std=args.init_std, threshold=args.threshold,
        diagnostics=not args.no_diagnostics,
    )  # fmt: skip


def main(args) -> int:
    if args.benchmark:
        others = [f"--{k.replace('_', '-')}" for k in given(args) if k not in ("benchmark", "no_progress")]  # no bar
        if others:  # the speed comparison has its own fixed settings
            print(f"prioritylab cliffwalk: error: --benchmark measures fixed settings (docs/benchmarks.md) and takes "
                  f"no other option, got {' '.join(others)}", file=sys.stderr)  # fmt: skip
            return 2
        from .speed import main as speed_main

        return speed_main([])
    from .experiments import DIAGNOSTIC_COLUMNS, default_cap, format_table, recorded_template, run_grid, summarise
    from .runner import unread, validate

    try:
        if len(set(args.n)) < len(args.n):
            raise ValueError(f"--n lists a size twice ({' '.join(map(str, args.n))}): its runs would be pooled")
        cfg = config_from(args)
        for n in args.n:
            validate(cfg.replace(n=n), names=flags(args))
        if args.out is not None:  # as typed: "" is refused, not taken for "no --out"
            check_output_dir(args.out, program=PROGRAM)
    except ValueError as err:
        print(f"prioritylab cliffwalk: error: {err}", file=sys.stderr)
        return 2

    def cap_for(label, n):
        return args.cap if args.cap else default_cap(n)

    for name, value, readers in unread(cfg):
        print(f"prioritylab cliffwalk: warning: --{name} {value} has no effect with --sampler {args.sampler} (read "
              f"by {', '.join(readers)})", file=sys.stderr)  # fmt: skip
    label = f"{args.learner}/{args.sampler}"
    t0 = time.perf_counter()
    rows, _ = run_grid({label: cfg}, args.n, range(args.seeds), cap_for=cap_for, jobs=args.jobs,
                       progress=not args.no_progress)  # fmt: skip
    wall = time.perf_counter() - t0
    summary = summarise(rows)
    print(format_table(summary, ["label", "n", "memory_size", "seeds", "median", "min", "max", "censored"]))
    if cfg.diagnostics:
        print("\nreplay diagnostics (medians over seeds; docs/diagnostics.md):")
        print(format_table(summary, list(DIAGNOSTIC_COLUMNS)))
    print(f"{len(rows)} runs in {wall:.1f} s")
    if args.out is not None:
        _write(args.out, rows, summary, recorded_template(cfg, args.n, cap_for, label), vars(args), wall)
    return 0


def _write(out, rows, summary, config: dict, argv: dict, wall: float) -> None:
    from pathlib import Path

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..results import save_figure, write_csv, write_manifest

    out = Path(out)
    write_csv(out / "runs.csv", rows)
    write_csv(out / "summary.csv", summary)
    fig, ax = plt.subplots(figsize=(5, 4))
    x = [r["memory_size"] for r in summary]
    ax.plot(x, [r["median"] for r in summary], "-o", ms=3, label=summary[0]["label"])
    ax.fill_between(x, [r["min"] for r in summary], [r["max"] for r in summary], alpha=0.2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memory size (transitions)")
    ax.set_ylabel(f"updates until MSE < {config['threshold']:g}")
    ax.legend()
    save_figure(fig, out / "summary.png")
    args = {k: v for k, v in argv.items() if k not in BOOKKEEPING}
    write_manifest(out, {"args": args, "config": config}, extra={"wall_seconds": wall, "program": PROGRAM})
