"""``prioritylab bench ...``: speed benchmarks (``sumtree``, ``replay``, ``agent``)."""

from __future__ import annotations

import argparse
import math
import re
from contextlib import contextmanager
from pathlib import Path

from .._cli import Distinct, given, nonnegative_int, remember_defaults
from . import OPS, PEERS, load
from .replay_contenders import LAYOUTS as REPLAY_LAYOUTS
from .replay_contenders import PEERS as REPLAY_PEERS
from .replay_contenders import QUICK_CAPACITY as REPLAY_QUICK_CAPACITY

QUICK = {"capacities": [2**16], "batches": [1, 256], "seconds": 0.05, "repeats": 1}
MAX_SIZE = 2**62
"""The largest size any option takes: slots, counts and steps are int64 counters (the samplers' bound)."""
MAX_THREADS = 4096
"""The most torch threads ``--threads`` takes (as ``prioritylab train``'s)."""


def _digits(text: str) -> int | None:
    """A decimal integer, or None past the 19 digits of :data:`MAX_SIZE` (``int()`` refuses 4,300 and more)."""
    text = text.lstrip("0") or "0"
    return int(text) if len(text) <= 19 else None


def parse_size(text: str) -> int:
    """A positive integer written as ``1048576``, ``2^20`` or ``2**20``, at most :data:`MAX_SIZE` (2^62)."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:(?:\^|\*\*)\s*(\d+))?\s*", text)
    if not m and re.fullmatch(r"\s*-\s*\d+\s*", text):
        raise argparse.ArgumentTypeError(f"size must be positive, got {text!r}")
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 1048576, 2^20 or 2**20)")
    base, power = _digits(m.group(1)), _digits(m.group(2) or "1")
    too_large = base is None or (base > 1 and (power is None or power > 62))  # not computed: 9^10^9 takes minutes
    value = 0 if too_large else base ** (1 if power is None else power)  # power None: a base of 0 or 1
    if too_large or value > MAX_SIZE:
        raise argparse.ArgumentTypeError(f"size must be at most 2^62, got {text!r}")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"size must be positive, got {text!r}")
    return value


def finite_seconds(text: str) -> float:
    """A finite number of seconds above 0 (``inf`` would time a cell for ever)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds above 0, got {text!r}")
    return value


def thread_count(text: str) -> int:
    """A thread count: a size (:func:`parse_size`) of at most :data:`MAX_THREADS`."""
    value = parse_size(text)
    if value > MAX_THREADS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_THREADS} threads, got {text!r}")
    return value


def register(subparsers) -> None:
    bench = subparsers.add_parser("bench", help="speed benchmarks against peer libraries")
    sub = bench.add_subparsers(dest="bench", required=True)
    p = sub.add_parser(
        "sumtree",
        help="sum tree updates/samples and the PER step per second, side by side with tianshou, cpprb and NumPy",
        description="Throughput of prioritylab's sum tree and PER sampler against peer libraries "
        "(see docs/benchmarks.md). Peers that are not installed are skipped; install them with "
        "pip install 'prioritylab[bench]'.",
    )
    p.add_argument("--capacities", type=parse_size, nargs="+", action=Distinct, default=[2**20, 2**22],
                   help="tree capacities (slots), e.g. 2^20 2^22 (default: 2^20 2^22)")  # fmt: skip
    p.add_argument("--batches", type=parse_size, nargs="+", action=Distinct, default=[1, 32, 256, 1024],
                   help="batch sizes per call (default: 1 32 256 1024)")  # fmt: skip
    p.add_argument("--seconds", type=finite_seconds, default=0.5,
                   help="timed seconds per contender and cell in each repeat (default: 0.5)")  # fmt: skip
    p.add_argument("--repeats", type=parse_size, default=3,
                   help="repeats; contenders are interleaved and the median is reported (default: 3)")  # fmt: skip
    p.add_argument("--ops", nargs="+", action=Distinct, choices=OPS, default=list(OPS),
                   help="operations to measure (default: all)")
    p.add_argument("--peers", nargs="*", action=Distinct, choices=PEERS, default=list(PEERS),
                   help="peer libraries to compare against (default: all that are installed)")  # fmt: skip
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: capacity 2^16, batches 1 and 256, 0.05 s per cell, 1 repeat (an option "
                        "given beside it wins)")  # fmt: skip
    p.add_argument("--json", metavar="PATH", default=None, help="also write the results as JSON to PATH")
    p.add_argument("--drift", type=parse_size, metavar="UPDATES", default=None,
                   help="instead of timing, check |root - fsum(leaves)| / root after UPDATES random updates "
                        "at capacity 2^20 (e.g. 10^8)")  # fmt: skip
    p.add_argument("--seed", type=nonnegative_int, default=0,
                   help="seed of the random slots, values and TD errors (default: 0)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    remember_defaults(p, func=run_sumtree)
    _register_agent(sub)
    _register_replay(sub)


def quick_settings(quick: dict, args: argparse.Namespace) -> dict:
    """``--quick``'s settings but those given on the command line (an option given beats ``--quick``, as in the
    theory scripts); a setting with no option of its own is always ``--quick``'s."""
    return {k: v for k, v in quick.items() if k not in given(args)}


AGENT_QUICK = {"steps": 20, "prefill": 300, "repeats": 1, "warmup": 5, "hidden": 32, "batch": 32,
               "buffer_size": 10_000, "atari_buffer_size": 10_000, "atari_batch": 8,
               "atari_net": {"channels": (4, 4, 4), "hidden": 16}}  # fmt: skip


def _register_agent(sub) -> None:
    from .agent import AGENTS, PEERS, SAMPLERS, TRIES

    p = sub.add_parser(
        "agent",
        help="TD3/SAC training steps per second with every sampler, the bare update, and peer libraries",
        description="Training steps (env step + one update) per second of our TD3 and SAC with each sampler, "
        "where the time goes, the bare update on fixed tensors, and stable-baselines3 / tianshou side by side "
        "(see docs/benchmarks.md). Peers that are not installed are skipped.",
    )
    p.add_argument("--env", default="Hopper-v5", help="gymnasium environment of TD3 and SAC (default: Hopper-v5)")
    p.add_argument("--agents", nargs="+", action=Distinct, choices=AGENTS, default=["td3", "sac"],
                   help="agents (default: td3 sac); dqn and ddqn run on --atari-env, where one training step is "
                        "4 agent steps and one update")  # fmt: skip
    p.add_argument("--atari-env", default="ALE/Pong-v5", help="ALE game of DQN and DDQN (default: ALE/Pong-v5)")
    p.add_argument("--atari-buffer-size", type=parse_size, default=10**6,
                   help="replay capacity of DQN and DDQN (default: 10^6; only the prefill is touched)")  # fmt: skip
    p.add_argument("--atari-batch", type=parse_size, default=32, help="batch size of DQN and DDQN (default: 32)")
    p.add_argument("--samplers", nargs="+", action=Distinct, choices=SAMPLERS, default=list(SAMPLERS),
                   help="samplers of our agents (default: all)")  # fmt: skip
    p.add_argument("--peers", nargs="*", action=Distinct, choices=PEERS, default=list(PEERS),
                   help="peer libraries (default: all that are installed; none with an empty list)")  # fmt: skip
    p.add_argument("--tries", nargs="*", action=Distinct, choices=TRIES, default=[],
                   help="variants to measure alongside (default: none): of the bare update, threads+1, "
                        "flush-denormal, actor-full-critic; of our loop, diagnostics-off (uniform and per "
                        "rows)")  # fmt: skip
    p.add_argument("--steps", type=parse_size, default=300, help="timed training steps per contender and repeat")
    p.add_argument("--repeats", type=parse_size, default=5,
                   help="repeats; contenders are interleaved and the median is reported (default: 5)")  # fmt: skip
    p.add_argument("--prefill", type=parse_size, default=5000,
                   help="uniformly random steps stored before timing (default: 5000)")  # fmt: skip
    p.add_argument("--warmup", type=parse_size, default=50, help="untimed training steps per contender (default: 50)")
    p.add_argument("--threads", type=thread_count, default=1, help="torch.set_num_threads (default: 1)")
    p.add_argument("--hidden", type=parse_size, default=256, help="hidden layer width (default: 256)")
    p.add_argument("--batch", type=parse_size, default=256, help="batch size (default: 256)")
    p.add_argument("--buffer-size", type=parse_size, default=10**6, help="replay capacity (default: 10^6)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of every contender (default: 0)")
    p.add_argument("--device", default="cpu",
                   help="torch device of our agents and stable-baselines3's: cpu (default), cuda, cuda:1, ..., "
                        "or auto (CUDA when present)")  # fmt: skip
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: 20 steps, 300 prefill, 1 repeat, hidden 32, batch 32, capacity 10^4; a tiny "
                        "CNN and batch 8 for DQN/DDQN (an option given beside it wins)")  # fmt: skip
    p.add_argument("--json", metavar="PATH", default=None, help="also write the results as JSON to PATH")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    remember_defaults(p, func=run_agent)


def _check_device(args) -> str:
    """``--device`` names a torch device that is here: checked before any work; returns it resolved."""
    from .._cli import fail
    from ..deep.run import SettingsError, pick_device

    try:
        return str(pick_device(args.device))
    except SettingsError as err:
        fail(f"prioritylab bench {args.bench}", str(err))


def _check_json(args) -> None:
    """``--json`` must be writable: checked before any timing."""
    if getattr(args, "json", None) is not None:
        from .._cli import check_output_file, empty_refused, fail

        empty_refused(f"prioritylab bench {args.bench}", args.json, "--json", "a file")
        try:
            check_output_file(args.json, "--json")
        except ValueError as err:
            fail(f"prioritylab bench {args.bench}", str(err))


@contextmanager
def _json_output(args):
    """``--json``'s folder checked writable (made where missing) for the work inside; the folders made are taken
    back, while empty, when the command stops before writing its file: a refusal, an error or Ctrl-C."""
    from .._cli import missing_dirs, remove_empty_dirs

    made = missing_dirs(Path(args.json).parent) if getattr(args, "json", None) else []
    try:
        _check_json(args)
        yield
    except BaseException:
        remove_empty_dirs(made)
        raise


TREE_BYTES_PER_SLOT = 32
"""The least memory a slot of ``bench sumtree`` takes: the ``+minmax`` contender's three trees, each 4/3 x 8 bytes a
slot (``SumTree``'s arrays); the other contenders add more."""
POOL_BYTES_PER_ROW = 4 * 24
"""The least memory a row of the largest batch of ``bench sumtree`` takes: its pool of pre-drawn slots, values and
TD errors (8 bytes each) holds four draws a row (:data:`prioritylab.bench.sumtree.POOL`)."""


def _load_line(machine_load: dict) -> str:
    """The load the figures were taken under (and torch's thread count where torch ran), printed beside them."""
    before, after = machine_load["before"]["loadavg_1_5_15"][0], machine_load["after"]["loadavg_1_5_15"][0]
    threads = f"torch threads {machine_load['torch_threads']}; " if "torch_threads" in machine_load else ""
    cores = machine_load["before"]["cpu_count"]
    return f"{threads}load average (1 min) {before:.2f} before, {after:.2f} after, on {cores} cores"


def _check_tree_memory(capacity: int, batch: int = 1) -> None:
    """Refuse, before any contender is built, a capacity whose trees alone cannot fit in the memory available, and
    a batch whose pool of pre-drawn values cannot fit beside them."""
    from .._checks import available_bytes, size_text
    from .._cli import fail

    trees, pool, have = TREE_BYTES_PER_SLOT * capacity, POOL_BYTES_PER_ROW * batch, available_bytes()
    if have is not None and trees > have:
        fail("prioritylab bench sumtree", f"--capacities {capacity:,}: its trees alone need at least "
                                          f"{size_text(trees)}, and {size_text(have)} of memory is "
                                          "available")  # fmt: skip
    if have is not None and trees + pool > have:
        fail("prioritylab bench sumtree", f"--batches {batch:,}: its pre-drawn slots, values and TD errors need at "
                                          f"least {size_text(pool)} beside the trees' {size_text(trees)} (--capacities "
                                          f"{capacity:,}), and {size_text(have)} of memory is available")  # fmt: skip


def _check_agent_sizes(config: dict, agents, samplers) -> None:
    """Before any contender is built, for each agent: its environment, the least replay its stacks and returns need,
    and what its sizes need at least against the memory available: a replay of ``--buffer-size`` slots (the peers'
    and the SB3 + prioritylab rows' capacity; by the replay's formula), the networks of each of our contenders with
    Adam's moments (``--hidden``, :func:`~prioritylab.deep.loop.network_bytes`), and a batch's rows and two hidden
    activations a row (``--batch``)."""
    import numpy as np

    from .._checks import available_bytes, size_text
    from .._cli import fail
    from ..deep.loop import network_bytes
    from ..deep.run import SettingsError
    from ..replay import estimate_bytes, least_slots
    from .agent import ATARI, _settings

    prog = "prioritylab bench agent"
    for agent in agents:
        size, batch = ("--atari-buffer-size", "--atari-batch") if agent in ATARI else ("--buffer-size", "--batch")
        spec, cfg = _settings(agent, "uniform", config)
        try:
            env = spec.make_env(cfg.env, cfg)
        except SettingsError as err:
            fail(prog, str(err))
        kw = spec.buffer_args(cfg, env)
        least = least_slots(kw.get("n_step", 1), kw.get("frame_stack", 1))
        if cfg.buffer_size < least:
            fail(prog, f"{size} {cfg.buffer_size:,}: {agent}'s replay needs at least {least} slots (n_step + "
                       f"frame_stack + 2)")  # fmt: skip
        have = available_bytes()
        try:
            nets = network_bytes(spec, cfg, env)  # weights and Adam's moments, counted on torch's meta device
        except SettingsError:
            fail(prog, f"--hidden {cfg.hidden:,}: {agent}'s networks are too large to build")
        finally:
            env.close()
        if have is None:  # pragma: no cover - not Linux
            continue
        obs = int(np.prod(kw["obs_shape"], dtype=np.int64)) * np.dtype(kw["obs_dtype"]).itemsize
        action_dtype, frame_stack = kw.get("action_dtype", np.float32), kw.get("frame_stack", 1)
        act = int(np.prod(kw.get("action_shape", ()), dtype=np.int64)) * np.dtype(action_dtype).itemsize
        parts = [  # (option, value, what it sizes, bytes)
            (size, cfg.buffer_size, f"a replay of {cfg.buffer_size:,} slots needs",
             estimate_bytes(cfg.buffer_size, kw["obs_shape"], kw["obs_dtype"], kw.get("action_shape", ()),
                            action_dtype, frame_stack)),
            ("--hidden" if agent not in ATARI else None, cfg.hidden,
             f"the networks of {1 + len(samplers)} contenders need", (1 + len(samplers)) * nets),
            (batch, cfg.batch_size, "a batch needs", cfg.batch_size * (2 * obs + act + 20 + 2 * 4 * cfg.hidden)),
        ]  # fmt: skip
        for option, value, what, need in parts:
            if option is not None and need > have:
                fail(prog, f"{option} {value:,}: {what} at least {size_text(need)} ({agent}), and "
                           f"{size_text(have)} of memory is available")  # fmt: skip
        if sum(need for *_, need in parts) > have:
            option, value, *_ = max((p for p in parts if p[0] is not None), key=lambda p: p[3])
            fail(prog, f"{agent} needs at least {size_text(sum(need for *_, need in parts))} in all ("
                       + ", ".join(f"{what.rsplit(' ', 1)[0]} {size_text(need)}" for _, _, what, need in parts)
                       + f"), and {size_text(have)} of memory is available; lower {option} {value:,}")  # fmt: skip


def run_agent(args: argparse.Namespace) -> int:
    import torch

    from ..results import write_json
    from . import agent as bench

    config = {
        "env": args.env, "agents": args.agents, "samplers": args.samplers, "steps": args.steps,
        "repeats": args.repeats, "prefill": args.prefill, "warmup": args.warmup, "threads": args.threads,
        "hidden": args.hidden, "batch": args.batch, "buffer_size": args.buffer_size, "seed": args.seed,
        "tries": args.tries, "total_steps": 10**6, "atari_env": args.atari_env,
        "atari_buffer_size": args.atari_buffer_size, "atari_batch": args.atari_batch, "atari_net": None,
    }  # fmt: skip
    if args.quick:
        config.update(quick_settings(AGENT_QUICK, args))
    config["device"] = _check_device(args)
    _check_agent_sizes(config, args.agents, args.samplers)
    with _json_output(args):  # last of the checks: a folder it makes is taken back if the command stops short
        torch.set_num_threads(config["threads"])
        load_before = load()
        peers, skipped = bench.available_peers(args.peers)
        for name, why in skipped.items():
            print(f"skipping {name}: {why}")
        from ..deep.run import SettingsError

        try:  # a setting the agents cannot take: one line, before any timing
            contenders, not_built = bench.build(args.agents, args.samplers, peers, config, args.tries)
        except SettingsError as err:
            from .._cli import fail

            fail("prioritylab bench agent", str(err))
        skipped.update(not_built)
        torch.set_num_threads(config["threads"])  # whatever a peer's set-up did
        results = bench.run(contenders, config["steps"], config["repeats"], config["warmup"],
                            progress=not args.no_progress)  # fmt: skip
        machine_load = {"before": load_before, "after": load(), "torch_threads": torch.get_num_threads()}
        print(_load_line(machine_load))
        print(bench.format_table(results))
        if args.json is not None:
            write_json(args.json, bench.to_json(results, {**config, "peers": peers}, skipped, machine_load))
            print(f"wrote {args.json}")
    return 0


def run_sumtree(args: argparse.Namespace) -> int:
    from ..results import write_json
    from . import sumtree as bench

    if args.drift is not None:
        unused = [f"--{k}" for k in given(args, ("capacities", "batches", "seconds", "repeats", "ops", "peers",
                                                  "quick", "json"))]  # fmt: skip
        if unused:  # the drift check runs at capacity 2^20 and prints its one number
            from .._cli import fail

            fail("prioritylab bench sumtree", f"--drift takes only --seed and --no-progress, got {' '.join(unused)}")
        worst = bench.drift_check(args.drift, seed=args.seed, progress=not args.no_progress)
        verdict = "ok" if worst <= 1e-12 else "FAILS the 1e-12 bound"
        print(f"drift after {args.drift:,} updates: max |root - fsum(leaves)| / root = {worst:.3g} ({verdict})")
        return 0
    config = {
        "capacities": args.capacities, "batches": args.batches, "seconds": args.seconds,
        "repeats": args.repeats, "ops": args.ops, "seed": args.seed,
    }  # fmt: skip
    if args.quick:
        config.update(quick_settings(QUICK, args))
    _check_tree_memory(max(config["capacities"]), max(config["batches"]))
    with _json_output(args):  # last of the checks: a folder it makes is taken back if the command stops short
        peers, skipped = bench.available_peers(args.peers)
        for name, why in skipped.items():
            print(f"skipping {name}: {why}")
        load_before = load()
        results = bench.run(
            config["capacities"], config["batches"], config["seconds"], config["repeats"],
            peers=peers, ops=args.ops, seed=args.seed, progress=not args.no_progress,
        )  # fmt: skip
        machine_load = {"before": load_before, "after": load()}
        print(bench.format_table(results))
        print(_load_line(machine_load))
        if args.json is not None:
            write_json(args.json, bench.to_json(results, {**config, "peers": peers}, skipped, machine_load))
            print(f"wrote {args.json}")
    return 0


QUICK_REPLAY = {"seconds": 0.02, "repeats": 1}


def _capacities(capacities: dict[str, int]) -> str:
    """``{"mujoco": 4096}`` as ``2^12 (mujoco)``, for a help line."""
    return ", ".join(f"2^{c.bit_length() - 1} ({name})" if c & (c - 1) == 0 else f"{c:,} ({name})"
                     for name, c in capacities.items())  # fmt: skip


def _register_replay(sub) -> None:
    p = sub.add_parser(
        "replay",
        help="replay steps per second (add from N envs, sample 256 to torch, update) and memory, "
        "side by side with cpprb, tianshou and stable-baselines3",
        description="Throughput of prioritylab's replay buffer against peer libraries, MuJoCo and Atari "
        "layouts, 1 and 8 environments (see docs/benchmarks.md). Peers that are not installed are skipped; "
        "install them with pip install 'prioritylab[bench]'. Before timing, every contender is self-checked on a "
        "small buffer (fields of each drawn row, sampling frequencies, IS weights); one that fails is timed but "
        "given no ratio, and no ratio is taken against it.",
    )
    p.add_argument("--layouts", nargs="+", action=Distinct, choices=tuple(REPLAY_LAYOUTS), default=list(REPLAY_LAYOUTS),
                   help="observation layouts (default: both)")  # fmt: skip
    p.add_argument("--envs", type=parse_size, nargs="+", action=Distinct, default=[1, 8],
                   help="numbers of environments adding per step (default: 1 8)")  # fmt: skip
    p.add_argument("--seconds", type=finite_seconds, default=1.0,
                   help="timed seconds per contender and cell in each repeat (default: 1)")  # fmt: skip
    p.add_argument("--repeats", type=parse_size, default=3,
                   help="repeats; contenders are interleaved and the median is reported (default: 3)")  # fmt: skip
    p.add_argument("--peers", nargs="*", action=Distinct, choices=REPLAY_PEERS, default=list(REPLAY_PEERS),
                   help="peer libraries to compare against (default: all that are installed)")  # fmt: skip
    p.add_argument("--quick", action="store_true",
                   help=f"a smoke run: capacities {_capacities(REPLAY_QUICK_CAPACITY)}, 0.02 s per cell, 1 repeat (an "
                        "option given beside it wins)")  # fmt: skip
    p.add_argument("--json", metavar="PATH", default=None, help="also write the results as JSON to PATH")
    p.add_argument("--seed", type=nonnegative_int, default=0,
                   help="seed of the pre-made steps and TD errors (default: 0)")
    p.add_argument("--device", default="cpu",
                   help="torch device of the sampled batches (each contender's tensors are copied there): "
                        "cpu (default), cuda, cuda:1, ..., or auto (CUDA when present)")  # fmt: skip
    p.add_argument("--threads", type=thread_count, default=1,
                   help="torch.set_num_threads for every contender (default: 1; SB3's copy of a batch runs on "
                        "torch's threads)")  # fmt: skip
    p.add_argument("--check-only", action="store_true",
                   help="only the self-check that runs before any timing: each contender, built small, is checked "
                        "for the fields of every drawn row, sampling frequencies against priority^0.6 / sum "
                        "(uniform: 1/N) and IS weights; exits 1 if one fails")  # fmt: skip
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    remember_defaults(p, func=run_replay)


def _check_replay_envs(envs: int, capacities: dict[str, int], timed: bool = True) -> None:
    """``--envs``, before any contender is built: each environment's share of a timed buffer holds the least a replay
    needs (the self-check builds its own, 32 slots an environment or more), the self-check marks the frames of at
    most :data:`~prioritylab.bench.replay_contenders.MARKED_ENVS` environments, and our four contenders' pools of
    pre-made steps (``POOL_STEPS`` steps of every environment, observations and next ones) fit in the memory
    available."""
    import numpy as np

    from .._checks import available_bytes, size_text
    from .._cli import fail
    from ..replay import least_slots
    from .replay_check import check_layout
    from .replay_contenders import MARKED_ENVS, POOL_STEPS

    prog, need = "prioritylab bench replay", 0
    for name, capacity in capacities.items():
        layout = REPLAY_LAYOUTS[name]
        least = least_slots(1, layout.frame_stack)
        if timed and capacity // envs < least:
            fail(prog, f"--envs {envs:,}: the {name} buffer's {capacity:,} slots give {capacity // envs:,} an "
                       f"environment, fewer than the {least} a replay needs (n_step + frame_stack + 2)")  # fmt: skip
        if layout.frame_stack > 1 and envs > MARKED_ENVS:
            fail(prog, f"--envs {envs:,}: the self-check marks the {name} frames of at most {MARKED_ENVS} "
                       "environments")  # fmt: skip
        act = int(np.prod(layout.action_shape, dtype=np.int64)) * np.dtype(layout.action_dtype).itemsize
        step = 2 * (layout.stacked_obs_bytes if timed else check_layout(layout).stacked_obs_bytes) + act
        need = max(need, 4 * POOL_STEPS * envs * step)
    have = available_bytes()
    if have is not None and need > have:
        fail(prog, f"--envs {envs:,}: the contenders' pre-made steps need at least {size_text(need)}, and "
                   f"{size_text(have)} of memory is available")  # fmt: skip


def run_replay(args: argparse.Namespace) -> int:
    if args.check_only:
        unused = [f"--{k}" for k in given(args, ("seconds", "repeats", "quick"))]
        if unused:  # the self-check times nothing and builds its own small buffers
            from .._cli import fail

            fail("prioritylab bench replay", f"--check-only times nothing, got {' '.join(unused)}")
    device = _check_device(args)
    from .replay_contenders import BATCH, BETA

    config = {"layouts": args.layouts, "envs": args.envs, "seconds": args.seconds, "repeats": args.repeats,
              "seed": args.seed, "batch": BATCH, "beta": BETA, "device": device}  # fmt: skip
    capacities = {name: REPLAY_LAYOUTS[name].capacity for name in args.layouts}
    if args.quick:
        config.update(quick_settings(QUICK_REPLAY, args))
        capacities = {name: REPLAY_QUICK_CAPACITY[name] for name in args.layouts}
    config["capacities"] = capacities
    _check_replay_envs(max(args.envs), capacities, timed=not args.check_only)
    with _json_output(args):  # last of the checks: a folder it makes is taken back if the command stops short
        return _replay(args, config, capacities, device)


def _replay(args: argparse.Namespace, config: dict, capacities: dict, device: str) -> int:
    from ..results import write_json
    from . import replay as bench
    from .replay_check import format_checks, self_check
    from .replay_contenders import available_peers

    peers, skipped = available_peers(args.peers)
    for name, why in skipped.items():
        print(f"skipping {name}: {why}")
    import torch

    # SB3 copies each sampled field with torch.tensor, which runs on torch's threads: left at torch's default, a
    # loaded machine slows that copy (and SB3's Atari step) several times over while the others, which copy
    # nothing, keep their speed
    torch.set_num_threads(args.threads)
    config["threads"] = args.threads
    load_before = load()
    # every contender does the work it is timed for, or is given no ratio: checked before anything is timed
    checks = self_check(args.layouts, args.envs, peers, seed=args.seed, device=device,
                        progress=not args.no_progress)  # fmt: skip
    print(format_checks(checks))
    print()
    if args.check_only:
        if args.json is not None:
            machine_load = {"before": load_before, "after": load(), "torch_threads": torch.get_num_threads()}
            write_json(args.json, bench.to_json([], {**config, "peers": peers, "check_only": True}, skipped,
                                                machine_load, checks))  # fmt: skip
            print(f"wrote {args.json}")
        return 0 if all(c.passed for c in checks) else 1
    results = bench.run(
        args.layouts, args.envs, config["seconds"], config["repeats"], peers=peers, capacities=capacities,
        seed=args.seed, progress=not args.no_progress, device=device, checks=checks,
    )  # fmt: skip
    machine_load = {"before": load_before, "after": load(), "torch_threads": torch.get_num_threads()}
    print(bench.format_table(results))
    print()
    print(bench.format_memory(results))
    print(_load_line(machine_load))
    if args.json is not None:
        write_json(args.json, bench.to_json(results, {**config, "peers": peers}, skipped, machine_load, checks))
        print(f"wrote {args.json}")
    return 0
