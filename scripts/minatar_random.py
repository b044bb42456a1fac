"""The mean return of a uniformly random policy on each MinAtar game (``prioritylab.scores.MINATAR_RANDOM``).

    python scripts/minatar_random.py [--episodes 200] [--version v1]

Sticky actions 0.1 and difficulty ramping (MinAtar's defaults), the project's 10k-step cap; env seeds
0..episodes-1, actions drawn from ``default_rng(0)``.  Prints game, mean and standard error.
"""

from __future__ import annotations

import numpy as np

from prioritylab._cli import Parser, positive_int
from prioritylab.deep.minatar import GAMES, make_minatar_env


def random_returns(game: str, episodes: int, rng: np.random.Generator, version: str = "v1") -> np.ndarray:
    env = make_minatar_env(f"MinAtar/{game}-{version}")
    out = np.empty(episodes)
    for ep in range(episodes):
        env.reset(seed=ep)
        total, done = 0.0, False
        while not done:
            _, r, term, trunc, _ = env.step(int(rng.integers(env.action_space.n)))
            total += r
            done = term or trunc
        out[ep] = total
    return out


def main() -> None:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=positive_int, default=200,
                   help="episodes of each game (environment seeds 0 .. episodes - 1)")  # fmt: skip
    p.add_argument("--version", choices=("v1", "v0"), default="v1",
                   help="v1: each game's minimal action set (the table's); v0: all 6 actions")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    for game in GAMES:
        r = random_returns(game, args.episodes, rng, args.version)
        print(f"{game:14s} {r.mean():.3f} +- {r.std() / np.sqrt(len(r)):.3f}")


if __name__ == "__main__":
    main()
