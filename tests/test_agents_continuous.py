"""TD3 and SAC on real MuJoCo / classic-control environments: smoke runs, resume, bad settings."""

from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import pytest
import torch

from prioritylab.cli import main as cli_main
from prioritylab.deep import sac, td3
from prioritylab.deep.continuous import CONTINUOUS_DEFAULTS
from prioritylab.deep.loop import train
from prioritylab.deep.methods import METHODS

AGENTS = {"td3": (td3.SPEC, td3.TD3Settings), "sac": (sac.SPEC, sac.SACSettings)}
TINY = {"hidden": 32, "batch_size": 32, "eval_episodes": 1, "progress": False, "threads": 1}


def settings(agent, tmp_path, **kw):
    _, cls = AGENTS[agent]
    return cls(out=tmp_path, **{**TINY, **kw})


def read_rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("sampler", METHODS)
@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_every_agent_and_sampler_trains_on_hopper(agent, sampler, tmp_path):
    cfg = settings(agent, tmp_path, env="Hopper-v5", sampler=sampler, steps=300, start_steps=100, eval_every=150)
    folder = train(AGENTS[agent][0], cfg)
    rows = read_rows(folder / "evaluations.csv")
    assert [int(r["step"]) for r in rows] == [150, 300]
    assert int(rows[-1]["updates"]) == 201  # one update per step from step 100 on
    for r in rows:
        assert np.isfinite(float(r["return_mean"])) and np.isfinite(float(r["critic_loss"]))
    from prioritylab.replay.diagnostics import COLUMNS

    last = rows[-1]
    assert set(COLUMNS) <= set(last)
    for key in ("ess_mean", "age_median", "coverage", "prob_n_p50", "td_mean", "q_mean", "weight_mean"):
        assert np.isfinite(float(last[key])), key
    if sampler in ("per", "pser", "ners"):
        assert 0 < float(last["ess_mean"]) <= 1 and 0.4 < float(last["beta"]) <= 1
    else:
        assert float(last["ess_mean"]) == 1.0
    state = torch.load(folder / "checkpoint.pt", weights_only=False)
    sampler_state = state["buffer"]["sampler"]
    # Tree-backed samplers keep a raw priority per slot; uniform draws (uniform, PAL) keep none.
    assert ("raw" in sampler_state) == (sampler in ("per", "lap", "pser", "ners"))
    if sampler in ("per", "lap", "pser", "ners"):
        written = sampler_state["generation"] >= 0
        assert np.isfinite(sampler_state["raw"][written]).all() and (sampler_state["raw"][written] > 0).all()
    td = sampler_state["td"]
    assert np.isfinite(td[~np.isnan(td)]).all() and (~np.isnan(td)).sum() > 0
    assert (folder / "manifest.json").exists() and (folder / "finished.json").exists()
    assert any((folder / "tb").iterdir())


@pytest.mark.parametrize(("agent", "sampler"), [("td3", "pser"), ("sac", "per")])
def test_stopped_and_resumed_run_equals_the_uninterrupted_one(agent, sampler, tmp_path):
    spec, _ = AGENTS[agent]
    common = {"env": "Pendulum-v1", "sampler": sampler, "steps": 700, "start_steps": 150, "eval_every": 100}
    full = train(spec, settings(agent, tmp_path / "full", **common))
    stopped = train(spec, settings(agent, tmp_path / "split", stop_after=250, **common))
    assert not (stopped / "finished.json").exists()
    assert torch.load(stopped / "checkpoint.pt", weights_only=False)["step"] == 400  # the first episode end after 250
    resumed = train(spec, settings(agent, tmp_path / "split", resume=True, **common))
    assert (full / "evaluations.csv").read_bytes() == (resumed / "evaluations.csv").read_bytes()
    a = torch.load(full / "checkpoint.pt", weights_only=False)["agent"]
    b = torch.load(resumed / "checkpoint.pt", weights_only=False)["agent"]
    for part in ("actor", "critic"):
        for key, value in a[part].items():
            assert torch.equal(value, b[part][key]), (part, key)


BAD = [
    (["td3", "--env", "NoSuchEnv-v0"], "unknown environment 'NoSuchEnv-v0'"),
    # a misspelt game is named before another bad setting (here steps below DQN's random start)
    (["dqn", "--env", "ALE/Pongg-v5", "--steps", "2000"], "unknown Atari game 'ALE/Pongg-v5'"),
    (["dqn", "--env", "MinAtar/Breakoutt-v1", "--steps", "2000"], "unknown MinAtar game 'MinAtar/Breakoutt-v1'"),
    (["td3", "--env", "Hoper-v5", "--steps", "0"], "unknown environment 'Hoper-v5'"),
    (["dqn", "--env", "PongNoFrameskip-v4"], "PongNoFrameskip-v4 is not an Atari game"),  # ale-py's older id
    (["td3", "--sampler", "best"], "unknown sampler 'best'"),
    (["td3", "--steps", "0"], "--steps must be a positive integer, got 0"),
    (["sac", "--sampler", "per", "--replay.alpha", "-1"], "sampler per: --replay.alpha must be in"),
    (["td3", "--sampler", "pser", "--replay.rho", "1.5"], "sampler pser: --replay.rho must be in"),
    (["td3", "--sampler", "per", "--replay.beta0", "2"], "sampler per: --replay.beta0 must be in [0.0, 1.0], got 2.0"),
    (["sac", "--sampler", "ners", "--replay.ners-local", "0"], "sampler ners: --replay.ners-local must be a non-empty"),
    (["td3", "--sampler", "ners", "--replay.ners-lr", "-1"], "sampler ners: --replay.ners-lr must be a positive"),
    (["td3", "--env", "CartPole-v1"], "needs a continuous (Box) action space"),
    (["sac", "--device", "cuda:7"], "cuda"),
    (["td3", "--device", "mps"], "device 'mps': the agents run on the CPU or a CUDA GPU"),
    (["td3", "--device", "meta"], "device 'meta': the agents run on the CPU or a CUDA GPU"),
]


def test_a_cuda_ordinal_this_machine_lacks_is_refused_up_front(monkeypatch):
    """``cuda:1`` on a one-GPU machine is a settings error naming the count, not a CUDA error inside the run
    (seen on a one-GPU machine: "invalid device ordinal" from the first ``.to(device)``)."""
    from prioritylab.deep.run import SettingsError, pick_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert pick_device("cuda:0") == torch.device("cuda:0") and pick_device("cuda") == torch.device("cuda")
    with pytest.raises(SettingsError, match=r"device 'cuda:1' asked for, but this machine has 1 CUDA device"):
        pick_device("cuda:1")


@pytest.mark.parametrize("env_id", ["gymnasium.envs.classic_control:Pendulum-v1", "Pendulum", "Pendulum-v1",
                                    "PongNoFrameskip-v4"])  # fmt: skip
def test_the_early_id_check_accepts_every_id_gym_make_resolves(env_id):
    """``module:Id`` (gym.make imports the module), an id without a version (gym.make takes the latest) and
    ale-py's older ids pass the registry check that ``check_settings`` runs first; the agent judges them after."""
    from prioritylab.deep.loop import check_env_id

    check_env_id(env_id)


def test_a_known_id_that_cannot_be_made_is_one_settings_error():
    """An id gymnasium knows whose making fails for want of a dependency is named with gymnasium's reason."""
    import gymnasium as gym

    from prioritylab.deep.loop import make_gym_env
    from prioritylab.deep.run import SettingsError

    def needs_foo():
        raise gym.error.DependencyNotInstalled("needs foo")

    gym.register("prioritylab-test/NeedsFoo-v0", entry_point=needs_foo)
    try:
        with pytest.raises(SettingsError, match=r"^environment '\S+NeedsFoo-v0' cannot be made: needs foo$"):
            make_gym_env("prioritylab-test/NeedsFoo-v0")
    finally:
        gym.registry.pop("prioritylab-test/NeedsFoo-v0")


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_settings_fail_before_any_work_with_one_line(args, message, tmp_path, capsys):
    if "cuda:7" in args and torch.cuda.device_count() > 7:
        pytest.skip("hardware: this machine has the device, so the request is valid")  # the gpu-only exception
    code = cli_main(["train", *args, "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert message in err and "Traceback" not in err and len(err.splitlines()) == 1
    assert not any(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize(("args", "message"), [
    (["td3", "--expl-noise", "nan"], "--expl-noise must be a finite number, got nan"),  # crashed after the warm-up
    (["td3", "--lr", "inf"], "--lr must be a finite number, got inf"),
    (["sac", "--target-entropy", "nan"], "--target-entropy must be a finite number, got nan"),
    (["sac", "--initial-temperature", "inf"], "--initial-temperature must be a finite number, got inf"),
    (["sac", "--log-prob-of", "raw"], "--log-prob-of must be 'unit' or 'scaled', got 'raw'"),
    (["td3", "--buffer-size", "3"], "--buffer-size 3 gives a replay of 3 slots, fewer than the 4 it needs"),
    (["td3", "--steps", "1e5000"], "--steps"),  # left for tyro to refuse, not written out digit by digit
    # sizes without a bound of their own, which failed at the first update or evaluation, the run folder written
    (["td3", "--batch-size", str(2**40)], f"--batch-size {2**40}: a batch needs at least 52,776.6 GB but only"),
    (["td3", "--eval-episodes", str(2**62)], f"--eval-episodes {2**62}: an evaluation's returns need at least"),
    (["td3", "--hidden", str(2**40)], f"--hidden {2**40}: the networks are too large to build"),
    (["sac", "--hidden", "100000"], "--hidden 100000: the networks need at least"),  # 10^10 weights per layer
    (["td3", "--sampler", "ners", "--replay.ners-local", str(2**40)],
     f"--replay.ners-local {2**40}: NERS's scorer needs at least"),
    (["td3", "--env", "nosuchmodule:Foo-v0"], "unknown environment 'nosuchmodule:Foo-v0': no module named "
                                              "'nosuchmodule' to import it from"),
    (["sac", "--log-std-min", "3"], "--log-std-min 3.0 must be below --log-std-max 2.0"),
    (["td3", "--stop-after", "600"], "--stop-after 600 is not before the run's last step (--steps 600)"),
    (["td3", "--device", "cpu:3"], "device 'cpu:3': torch has one CPU device (cpu, or cpu:0)"),
    (["dqn", "--env", "MinAtar/Breakout-v1", "--start-steps", "599", "--update-every", "7"],
     "the first update would come at step 602 (the first multiple of --update-every 7 from --start-steps 599 on)"),
])  # fmt: skip
def test_settings_that_would_fail_late_are_refused_before_any_work(args, message, tmp_path, capsys):
    try:
        base = {"--env": "Pendulum-v1", "--steps": "600", "--start-steps": "200", "--eval-every": "200"}
        given = [word for flag, value in base.items() if flag not in args for word in (flag, value)]  # typed once
        code = cli_main(["train", args[0], *given, *args[1:], "--out", str(tmp_path), "--no-progress"])
    except SystemExit as exit:  # tyro's own refusals exit
        code = exit.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1, err
    assert not any(tmp_path.iterdir())  # no run folder left behind


def test_a_run_stopped_before_its_first_checkpoint_points_to_restart(tmp_path, capsys):
    args = ["train", "td3", "--env", "Pendulum-v1", "--steps", "600", "--eval-every", "200", "--start-steps", "200",
            "--out", str(tmp_path), "--no-progress"]  # fmt: skip
    folder = tmp_path / "td3_Pendulum-v1_uniform_s0"
    folder.mkdir()
    (folder / "evaluations.csv").write_text("step,return_mean\n200,-1500.0\n")
    assert cli_main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "holds a run stopped before its first checkpoint; pass --restart to run it again" in err, err


def test_output_folder_that_cannot_be_created_is_refused(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert cli_main(["train", "td3", "--out", str(blocker / "runs"), "--no-progress"]) == 2
    assert f"--out {blocker / 'runs'}: {blocker} is an existing file, not a folder" in capsys.readouterr().err
    assert cli_main(["train", "td3", "--out", str(blocker), "--no-progress"]) == 2
    assert f"--out {blocker} is an existing file, not a folder" in capsys.readouterr().err
    assert blocker.read_text() == "not a folder" and [p.name for p in tmp_path.iterdir()] == ["a-file"]


@pytest.mark.parametrize("given", [["--out", ""], ["--out="], ["--out", " "]])
def test_an_empty_out_is_refused_not_read_as_the_current_folder(given, tmp_path, capsys, monkeypatch):
    """``Path("")`` is the current folder: an empty ``--out`` (a variable that was not set) would write the run
    where the command was typed."""
    monkeypatch.chdir(tmp_path)
    assert cli_main(["train", "td3", "--env", "Pendulum-v1", *given, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "prioritylab train td3: error: --out is empty; give the folder that holds the runs (. for the " \
                  "current one)", err  # fmt: skip
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("inside", [".", "tb/more"])
def test_out_at_or_inside_a_run_folder_is_refused(inside, tmp_path, capsys):
    """A run written into another run's folder would be found with it by ``report`` and ``collect``."""
    run = tmp_path / "td3_Pendulum-v1_uniform_s0"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"command": "prioritylab train td3", "config": {}}))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    out = run / inside
    assert cli_main(["train", "td3", "--env", "Pendulum-v1", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    where = "is" if inside == "." else f"is inside {run}, which is"
    assert err.endswith(f"--out {out} {where} a training run's folder; give the folder that holds the runs"), err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_finished_run_is_not_overwritten_without_a_flag(tmp_path, capsys):
    args = ["train", "td3", "--env", "Pendulum-v1", "--steps", "60", "--start-steps", "30", "--eval-every", "60",
            "--eval-episodes", "1", "--hidden", "16", "--batch-size", "8", "--out", str(tmp_path), "--no-progress"]
    assert cli_main(args) == 0
    capsys.readouterr()
    lock = tmp_path / "td3_Pendulum-v1_uniform_s0" / ".lock"
    lock.write_text("4242\n")  # the pid of the process that ran it, long gone
    assert cli_main(args) == 2
    assert "already holds a finished run" in capsys.readouterr().err
    assert lock.read_text() == "4242\n"  # the refused run wrote nothing into the folder, its lock file included
    assert cli_main(["train", "sac", *args[2:], "--resume"]) == 2  # no sac run there
    assert cli_main([*args, "--overwrite"]) == 0


def test_checkpoint_of_another_sampler_is_refused(tmp_path, capsys):
    common = ["--env", "Pendulum-v1", "--steps", "400", "--start-steps", "50", "--eval-every", "200",
              "--eval-episodes", "1", "--hidden", "16", "--batch-size", "8", "--out", str(tmp_path), "--no-progress"]
    assert cli_main(["train", "td3", *common, "--sampler", "lap", "--stop-after", "10"]) == 0
    folder = tmp_path / "td3_Pendulum-v1_lap_s0"
    other = tmp_path / "td3_Pendulum-v1_per_s0"
    other.mkdir()
    (folder / "checkpoint.pt").rename(other / "checkpoint.pt")
    capsys.readouterr()
    assert cli_main(["train", "td3", *common, "--sampler", "per", "--resume"]) == 2
    assert "was written by" in capsys.readouterr().err


@pytest.mark.slow
def test_td3_uniform_learns_pendulum(tmp_path):
    """TD3 + uniform replay on Pendulum-v1: mean evaluation return above -400 within 15k steps
    (random policy: about -1200; documented in docs/results/)."""
    cfg = td3.TD3Settings(env="Pendulum-v1", sampler="uniform", steps=15_000, start_steps=1000, eval_every=5000,
                          out=tmp_path, progress=False)  # fmt: skip
    rows = read_rows(train(td3.SPEC, cfg) / "evaluations.csv")
    assert float(rows[-1]["return_mean"]) > -400


def tiny_agent(cls, settings_cls, **kw):
    import gymnasium as gym

    from prioritylab.deep.methods import Method, ReplaySettings

    env = gym.make("Pendulum-v1")
    cfg = settings_cls(hidden=8, **kw)
    method = Method("uniform", ReplaySettings(), CONTINUOUS_DEFAULTS, 100)
    gen = torch.Generator().manual_seed(3)
    torch.manual_seed(0)
    return cls(cfg, env, torch.device("cpu"), np.random.default_rng(0), gen, method), method


def fake_batch(n=6):
    from prioritylab.replay import Batch

    g = torch.Generator().manual_seed(1)
    return Batch(
        obs=torch.randn(n, 3, generator=g), action=torch.rand(n, 1, generator=g) * 4 - 2,
        reward=torch.randn(n, generator=g), next_obs=torch.randn(n, 3, generator=g),
        discount=torch.tensor([0.99, 0.0, 0.99, 0.5, 0.0, 0.99])[:n], weights=torch.ones(n),
        indices=np.arange(n), generations=np.arange(n), probs=np.full(n, 1 / n),
    )  # fmt: skip


def test_td3_update_follows_its_equations():
    """Target r + discount * min_k Q'_k(s', clip(pi'(s'))) (no smoothing noise here), priority max_k |delta_k|,
    actor and targets moved only every policy_freq updates, targets by Polyak averaging with tau."""
    import copy

    agent, method = tiny_agent(td3.TD3, td3.TD3Settings, policy_noise=0.0, tau=0.1, policy_freq=2)
    b = fake_batch()
    with torch.no_grad():
        a_next = agent.actor_target(b.next_obs).clamp(-2, 2)
        y = b.reward + b.discount * agent.critic_target(b.next_obs, a_next).min(0).values
        delta = agent.critic(b.obs, b.action) - y
    actor0, target0 = copy.deepcopy(agent.actor.state_dict()), copy.deepcopy(agent.critic_target.state_dict())
    priority, _ = agent.update(b, method)
    torch.testing.assert_close(priority, delta.abs().amax(0), rtol=1e-6, atol=0)
    for k, v in agent.actor.state_dict().items():  # first update: the actor waits
        assert torch.equal(v, actor0[k])
    for k, v in agent.critic_target.state_dict().items():
        assert torch.equal(v, target0[k])
    agent.update(b, method)
    assert any(not torch.equal(v, actor0[k]) for k, v in agent.actor.state_dict().items())
    for k, v in agent.critic_target.state_dict().items():
        torch.testing.assert_close(v, torch.lerp(target0[k], agent.critic.state_dict()[k], 0.1), rtol=1e-6, atol=1e-7)


def test_sac_target_includes_the_entropy_term():
    agent, method = tiny_agent(sac.SAC, sac.SACSettings, initial_temperature=0.5)
    b = fake_batch()
    state = agent.noise.get_state()
    with torch.no_grad():
        g = torch.Generator().manual_seed(0)
        g.set_state(state)
        a_next, logp = agent.actor(b.next_obs, g)
        q_next = agent.critic_target(b.next_obs, a_next).min(0).values - 0.5 * logp
        delta = agent.critic(b.obs, b.action) - (b.reward + b.discount * q_next)
    priority, stats = agent.update(b, method)
    torch.testing.assert_close(priority, delta.abs().amax(0), rtol=1e-5, atol=1e-6)
    assert stats["temperature"] == pytest.approx(0.5, rel=1e-6, abs=0)


def test_pal_loss_uses_the_twin_critic_priority_for_lambda():
    """PAL (LAP/PAL eq. 10) with lambda = mean_i max(max_k |delta_ki|, kappa)^alpha over the batch."""
    from prioritylab.deep.methods import Method, ReplaySettings

    m = Method("pal", ReplaySettings(), CONTINUOUS_DEFAULTS, 10)
    delta = torch.tensor([[0.5, -3.0, 0.1], [2.0, 0.2, -0.05]], dtype=torch.float64)
    a, k = 0.4, 1.0
    lam = np.mean(np.maximum(np.abs(delta.numpy()).max(0), k) ** a)
    d = np.abs(delta.numpy())
    per_item = np.where(d <= k, 0.5 * k**a * d**2, k * d ** (1 + a) / (1 + a)) / lam
    expected = per_item.mean(1).sum()
    assert float(m.critic_loss(delta, torch.ones(3))) == pytest.approx(expected, rel=1e-12, abs=0)


def test_frozen_critic_gives_the_values_and_action_gradients_of_the_full_one():
    """The actor's loss through TwinQ.frozen: same values and action gradients, no critic weight gradients."""
    from prioritylab.deep.nets import TwinQ

    torch.manual_seed(0)
    q = TwinQ(3, 2, hidden=16)
    obs = torch.randn(10, 3)
    for members in (None, 1):
        act_full = torch.randn(10, 2, requires_grad=True)
        act_frozen = act_full.detach().clone().requires_grad_(True)
        full = q(obs, act_full)[: members or 2]
        frozen = q.frozen(obs, act_frozen, members=members)
        torch.testing.assert_close(frozen, full, rtol=1e-6, atol=1e-7)
        full.min(0).values.sum().backward()
        frozen.min(0).values.sum().backward()
        torch.testing.assert_close(act_frozen.grad, act_full.grad, rtol=1e-6, atol=1e-7)
        q.zero_grad(set_to_none=True)
        q.frozen(obs, act_frozen.detach().requires_grad_(True), members=members).sum().backward()
        assert all(p.grad is None for p in q.parameters())


@pytest.mark.gpu
def test_td3_trains_on_cuda(tmp_path):
    """On a CUDA device: a short PER run trains there, its batches arrive as CUDA tensors, and its manifest says
    so (not run on CPU-only machines)."""
    import json

    if not torch.cuda.is_available():
        pytest.skip("hardware: no CUDA device")
    devices = set()

    class Watching(td3.TD3):
        def update(self, batch, method):
            devices.update(t.device.type for t in (batch.obs, batch.action, batch.reward, batch.weights))
            return super().update(batch, method)

    spec = dataclasses.replace(td3.SPEC, make_agent=Watching)
    folder = train(spec, settings("td3", tmp_path, env="Pendulum-v1", sampler="per", steps=300, start_steps=100,
                                  eval_every=300, device="cuda"))  # fmt: skip
    rows = read_rows(folder / "evaluations.csv")
    assert np.isfinite(float(rows[-1]["return_mean"]))
    assert devices == {"cuda"}
    assert json.loads((folder / "manifest.json").read_text())["device"].startswith("cuda")
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark


def test_sigterm_while_the_run_is_set_up_stops_it_with_a_checkpoint(tmp_path, monkeypatch):
    """A sweep may stop a run as soon as its manifest exists, before the training loop starts: the signal is
    held and the run stops at its first episode end with a checkpoint, ready to resume."""
    import os
    import signal

    from prioritylab.deep import loop
    from prioritylab.deep.run import Interrupted

    original = loop.write_run_manifest

    def manifest_then_sigterm(*args, **kwargs):
        original(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(loop, "write_run_manifest", manifest_then_sigterm)
    cfg = settings("td3", tmp_path, env="Pendulum-v1", steps=700, start_steps=150, eval_every=100)
    with pytest.raises(Interrupted) as stopped:
        train(td3.SPEC, cfg)
    assert stopped.value.signum == signal.SIGTERM and stopped.value.step == 200  # Pendulum's first episode end
    assert torch.load(stopped.value.folder / "checkpoint.pt", weights_only=False)["step"] == 200
    assert not (stopped.value.folder / "finished.json").exists()


@pytest.mark.parametrize("sampler", ["uniform", "lap"])
def test_a_run_shorter_than_the_buffer_is_a_longer_runs_beginning(sampler, tmp_path):
    """Pendulum's 200-step episodes each write a tail slot besides their steps: a run of 600 steps needs 603
    slots, and its result at a step must not depend on how long it would have gone on (replay_capacity).
    (PER's and PSER's IS exponent anneals over the run's steps, so their runs of two lengths differ anyway.)"""
    rows = {}
    for steps in (600, 1000):
        cfg = settings("td3", tmp_path / str(steps), env="Pendulum-v1", sampler=sampler, steps=steps,
                       start_steps=100, eval_every=200, hidden=8)  # fmt: skip
        rows[steps] = read_rows(train(AGENTS["td3"][0], cfg) / "evaluations.csv")
    keys = ("step", "return_mean", "critic_loss", "td_mean")
    short, long = ([{k: r[k] for k in keys} for r in rows[s]] for s in rows)
    assert [int(r["step"]) for r in short] == [200, 400, 600]
    assert short == long[:3]


def test_a_run_as_long_as_its_random_start_updates_once_and_is_not_refused(tmp_path, capsys):
    """Updates start at step --start-steps, so --steps equal to it gives one update: the refusal of a run that
    would end before its first update is of --steps below --start-steps only."""
    common = ["--env", "Pendulum-v1", "--eval-episodes", "1", "--hidden", "8", "--batch-size", "8",
              "--out", str(tmp_path), "--no-progress"]  # fmt: skip
    assert cli_main(["train", "td3", "--steps", "200", "--start-steps", "200", "--eval-every", "200", *common]) == 0
    assert json.loads((tmp_path / "td3_Pendulum-v1_uniform_s0" / "finished.json").read_text())["updates"] == 1
    assert cli_main(["train", "sac", "--steps", "199", "--start-steps", "200", "--eval-every", "199", *common]) == 2
    assert "--steps 199 < --start-steps 200: the run would end before its first update" in capsys.readouterr().err
