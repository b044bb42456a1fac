"""How large the gradients a run's optimiser has seen are, read from its checkpoints.

    python scripts/optimizer_scale.py RUN_FOLDER [RUN_FOLDER ...]

For each run folder's ``checkpoint.pt`` (the state at its last checkpoint) and each parameter
tensor of the Q-network or critic, prints the median over the tensor's entries of the optimiser's
running gradient scale: ``sqrt(square_avg - grad_avg^2)`` for centered RMSprop (the MinAtar and
Nature DQN settings), ``sqrt(square_avg)`` for plain RMSprop and ``sqrt(exp_avg_sq / (1 - beta2^t))``
for Adam after ``t`` steps (its bias correction).
RMSprop and Adam divide each step by this scale plus their ``eps``; where the scale is far below
``eps``, the step shrinks with the gradient instead of being normalised.  Each checkpoint is read as a
resume reads it: its SHA-256 checked, and refused if written by another run than its folder's manifest names.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from prioritylab._cli import Parser
from prioritylab.deep.run import SettingsError, load_checkpoint
from prioritylab.results import CHECKPOINT, MANIFEST


def gradient_scales(optimiser_state: dict) -> list[float]:
    """Per parameter tensor, in the optimiser's order: the median running gradient scale."""
    out = []
    beta2 = optimiser_state["param_groups"][0].get("betas", (None, None))[1]
    for key in sorted(optimiser_state["state"]):
        s = optimiser_state["state"][key]
        if "square_avg" in s:
            second = s["square_avg"] - (s["grad_avg"] ** 2 if "grad_avg" in s else 0.0)
        elif "exp_avg_sq" in s:
            second = s["exp_avg_sq"] / (1 - beta2 ** float(s["step"]))
        else:
            raise ValueError(f"parameter {key}: neither RMSprop nor Adam state ({sorted(s)})")
        out.append(float(second.clamp(min=0).sqrt().median()))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders holding a checkpoint.pt")
    args = parser.parse_args(argv)
    for run in args.runs:
        try:
            config = json.loads((run / MANIFEST).read_text())["config"]
            identity = {k: config[k] for k in ("agent", "env", "sampler", "seed")}
        except (OSError, ValueError, KeyError, TypeError) as err:
            print(f"optimizer_scale: error: {run / MANIFEST}: no readable config ({err!r})", file=sys.stderr)
            return 2
        try:
            checkpoint = load_checkpoint(run / CHECKPOINT, identity)
        except (OSError, SettingsError) as err:  # a checkpoint gone or unreadable, corrupt or another run's
            print(f"optimizer_scale: error: {run / CHECKPOINT}: {err}", file=sys.stderr)
            return 2
        states = checkpoint["agent"]
        optimisers = {k: v for k, v in states.items() if isinstance(v, dict) and "param_groups" in v}
        for name, state in optimisers.items():
            eps = state["param_groups"][0].get("eps")
            scales = "  ".join(f"{x:.1e}" for x in gradient_scales(state))
            print(f"{run.name} step {checkpoint['step']} {name} (eps {eps}): {scales}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
