"""The off-policy training loop every agent runs: act, store, sample, update, evaluate, checkpoint.

An agent (``td3``, ``sac``, ...) supplies its networks and update; a replay
method (:mod:`prioritylab.deep.methods`) supplies the sampler and the loss.
The loop owns the environment, the replay buffer, the run folder and the
random streams:

``SeedSequence(seed)`` spawns one stream each for the network initialisation,
exploration, the sampler and the agent's own noise (a ``torch.Generator``);
the training environment is seeded once with ``seed``, the evaluation
environment with ``seed + 100`` at every evaluation (LAP App. D).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import gymnasium as gym
import numpy as np
import torch
from tqdm import tqdm

from ..replay import ReplayBuffer
from .methods import Defaults, Method
from .run import (
    CHECKPOINT,
    Clock,
    RunLog,
    RunSettings,
    SettingsError,
    StopSignal,
    check_common,
    env_rng_state,
    load_checkpoint,
    mark_finished,
    pick_device,
    prepare_dir,
    run_dir,
    save_atomic,
    set_env_rng_state,
    write_run_manifest,
)


class Agent(Protocol):
    """What the loop needs from an algorithm."""

    stat_keys: tuple[str, ...]  # scalars of the last update, logged at each evaluation

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray: ...

    def update(self, batch, method: Method) -> tuple[torch.Tensor, dict]:
        """One gradient step on ``batch``; returns the new priorities (one per item) and scalars to log."""

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


@dataclass
class Spec:
    """How an algorithm plugs into the loop."""

    name: str
    make_env: object  # (env_id, cfg) -> gym.Env, raising SettingsError on a bad env
    check: object  # cfg -> None, raising SettingsError on a bad agent setting
    make_agent: object  # (cfg, env, device, rng, noise_generator, method) -> Agent
    buffer_args: object  # (cfg, env) -> dict of ReplayBuffer keyword arguments
    learning_starts: object  # cfg -> first step that updates
    update_every: object  # cfg -> env steps per update
    random_action: object  # (env, rng) -> a uniformly random action
    defaults: Defaults  # the agent's sampler defaults (its paper's table)


def make_gym_env(env_id: str) -> gym.Env:
    try:
        return gym.make(env_id)
    except gym.error.Error as err:
        raise SettingsError(f"unknown environment {env_id!r}: {err}") from None


def evaluate(agent: Agent, env: gym.Env, seed: int, episodes: int) -> np.ndarray:
    """Returns of ``episodes`` episodes of the deterministic policy; the env is reseeded at the first."""
    returns = np.empty(episodes)
    for i in range(episodes):
        obs, _ = env.reset(seed=seed) if i == 0 else env.reset()
        total, done = 0.0, False
        while not done:
            obs, r, term, trunc, _ = env.step(agent.act(obs, explore=False))
            total += float(r)
            done = term or trunc
        returns[i] = total
    return returns


def train(spec: Spec, cfg: RunSettings) -> Path:
    """Run (or resume) one training run; returns its folder.  Every check happens before any work."""
    check_common(cfg)
    spec.check(cfg)
    device = pick_device(cfg.device)
    env = spec.make_env(cfg.env, cfg)
    eval_env = spec.make_env(cfg.env, cfg)
    try:
        method = Method(cfg.sampler, cfg.replay, spec.defaults, cfg.steps)
    except ValueError as err:
        raise SettingsError(f"sampler {cfg.sampler}: {err}") from None
    folder = run_dir(cfg, spec.name)
    prepare_dir(folder, cfg.resume, cfg.overwrite)
    identity = {"agent": spec.name, "env": cfg.env, "sampler": cfg.sampler, "seed": cfg.seed}
    checkpoint = load_checkpoint(folder / CHECKPOINT, identity) if cfg.resume else None
    if cfg.threads:
        torch.set_num_threads(cfg.threads)

    streams = np.random.SeedSequence(cfg.seed).spawn(4)
    torch_seed = int(streams[0].generate_state(1)[0])
    rng = np.random.default_rng(streams[1])
    noise = torch.Generator(device=device)
    noise.manual_seed(int(streams[3].generate_state(1)[0]))
    torch.manual_seed(torch_seed)
    agent = spec.make_agent(cfg, env, device, rng, noise, method)
    capacity = min(cfg.buffer_size, max(cfg.steps, 64))
    buffer = ReplayBuffer(capacity, sampler=method.make_sampler(capacity, np.random.default_rng(streams[2])),
                          diagnostics=cfg.diagnostics, **spec.buffer_args(cfg, env))  # fmt: skip
    try:
        method.attach(buffer)
    except ValueError as err:
        raise SettingsError(f"sampler {cfg.sampler}: {err}") from None

    step, updates, episodes, next_ckpt = 0, 0, 0, cfg.checkpoint_every
    if checkpoint is not None:
        agent.load_state_dict(checkpoint["agent"])
        buffer.load_state_dict(checkpoint["buffer"])
        rng.bit_generator.state = checkpoint["rng"]
        noise.set_state(checkpoint["noise"])
        torch.set_rng_state(checkpoint["torch_rng"])
        step, updates, episodes, next_ckpt = (checkpoint[k] for k in ("step", "updates", "episodes", "next_ckpt"))
    log = RunLog(folder, step if checkpoint is not None else None)
    clock = Clock(checkpoint["wall_time"] if checkpoint is not None else 0.0)
    write_run_manifest(folder, cfg, spec.name, device, method.describe())

    env.reset(seed=cfg.seed)
    if checkpoint is not None:
        set_env_rng_state(env, checkpoint["env_rng"])
    obs, _ = env.reset() if checkpoint is not None else env.reset(seed=cfg.seed)
    starts, every = spec.learning_starts(cfg), spec.update_every(cfg)
    last_eval = float(log.evals[-1]["return_mean"]) if log.evals else math.nan
    ess = float(log.evals[-1].get("ess_mean", math.nan)) if log.evals else math.nan
    stats: dict = {}

    def save(reason: str) -> None:
        save_atomic({
            "identity": identity, "step": step, "updates": updates, "episodes": episodes, "next_ckpt": next_ckpt,
            "agent": agent.state_dict(), "buffer": buffer.state_dict(), "rng": rng.bit_generator.state,
            "noise": noise.get_state(), "torch_rng": torch.get_rng_state(), "env_rng": env_rng_state(env),
            "wall_time": clock.elapsed, "reason": reason,
        }, folder / CHECKPOINT)  # fmt: skip

    bar = tqdm(total=cfg.steps, initial=step, disable=not cfg.progress, unit="step", dynamic_ncols=True,
               desc=f"{spec.name} {cfg.env} {cfg.sampler} s{cfg.seed}")  # fmt: skip
    stopped = False
    with StopSignal() as stop:
        while step < cfg.steps:
            action = spec.random_action(env, rng) if step < starts else agent.act(obs, explore=True)
            next_obs, reward, term, trunc, _ = env.step(action)
            buffer.add(obs[None], np.asarray(action)[None], np.array([reward]), np.asarray(next_obs)[None],
                       np.array([term]), np.array([trunc]))  # fmt: skip
            obs = next_obs
            step += 1
            if step >= starts and step % every == 0 and len(buffer) >= 1:
                batch = buffer.sample(cfg.batch_size, beta=method.beta_at(step), device=device)
                priority, stats = agent.update(batch, method)
                q_values = stats.pop("q_values", None)
                method.report(buffer, batch, priority, q_values)
                if q_values is not None and buffer.diagnostics is not None:
                    buffer.diagnostics.on_values(q=q_values.detach().to("cpu").numpy())
                updates += 1
            if step % cfg.eval_every == 0 or step == cfg.steps:
                returns = evaluate(agent, eval_env, cfg.seed + 100, cfg.eval_episodes)
                last_eval = float(returns.mean())
                buffer.sampler.on_evaluation({"return": last_eval, "step": step, "updates": updates})
                row = {"step": step, "episodes": episodes, "return_mean": last_eval, "return_std": float(returns.std()),
                       "updates": updates, **{k: float(stats.get(k, math.nan)) for k in agent.stat_keys},
                       **buffer.diagnostics_report()}  # fmt: skip
                ess = row.get("ess_mean", math.nan)
                log.record(row, {"step": step, **clock.rates(step, updates)})
            if term or trunc:
                episodes += 1
                halt = stop.requested or (cfg.stop_after is not None and step >= cfg.stop_after)
                if (step >= next_ckpt or halt) and step < cfg.steps:
                    while next_ckpt <= step:
                        next_ckpt += cfg.checkpoint_every
                    save("stop" if halt else "periodic")
                    if halt:
                        stopped = True
                        break
                obs, _ = env.reset()
            if step % 1000 == 0 or step == cfg.steps:
                bar.set_postfix(updates=updates, last_eval=f"{last_eval:.1f}", ess=f"{ess:.2f}", refresh=False)
                bar.update(step - bar.n)
    bar.close()
    log.close()
    if not stopped:
        save("finished")
        mark_finished(folder, {"step": step, "updates": updates, "episodes": episodes, "last_eval": last_eval,
                               "wall_time": clock.elapsed})  # fmt: skip
    return folder
