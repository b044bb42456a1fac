"""The replay methods table: each method is one entry, and a new entry is a new method."""

import contextlib
import io
import re

import pytest
import torch

from prioritylab.deep import method_table
from prioritylab.deep.methods import METHODS, Defaults, Method, MethodEntry, ReplaySettings, register
from prioritylab.samplers import make_sampler

DEFAULTS = Defaults(per_alpha=0.6, per_beta0=0.4, per_eps=1e-10, lap_alpha=0.4, kappa=1.0)


def test_every_method_is_one_entry_and_ners_registers_its_own():
    assert METHODS == tuple(method_table.METHOD_TABLE) == ("uniform", "per", "lap", "pal", "pser", "ners")
    assert method_table.METHOD_TABLE["ners"].build.__module__ == "prioritylab.deep.ners"
    for name in METHODS:
        m = Method(name, ReplaySettings(), DEFAULTS, total_steps=100)
        assert m.entry is method_table.METHOD_TABLE[name]
        assert (m.beta_at(0) is not None) == m.entry.uses_weights


def test_a_new_entry_is_a_new_method(monkeypatch):
    monkeypatch.setattr(method_table, "METHOD_TABLE", dict(method_table.METHOD_TABLE))
    import prioritylab.deep.methods as methods

    monkeypatch.setattr(methods, "METHOD_TABLE", method_table.METHOD_TABLE)
    seen = []
    register(MethodEntry(
        "per_l1", uses_weights=True, default_alpha=lambda d: d.per_alpha,
        build=lambda m, capacity, seed: make_sampler("per", capacity, alpha=m.alpha, eps=m.eps, seed=seed),
        loss=lambda m, delta, weights: (delta.abs() * weights).mean(-1).sum(),
        report=lambda buffer, batch, priority, q_values: seen.append(priority),
    ))  # fmt: skip
    m = Method("per_l1", ReplaySettings(), DEFAULTS, total_steps=10)
    assert m.alpha == 0.6 and m.make_sampler(4, seed=0).name == "per"
    delta, w = torch.tensor([[1.0, -3.0]]), torch.tensor([1.0, 0.5])
    assert float(m.critic_loss(delta, w)) == pytest.approx(1.25)
    m.report(None, None, "p", None)
    assert seen == ["p"]
    with pytest.raises(ValueError, match="already registered"):
        register(MethodEntry("per", build=lambda m, capacity, seed: None))


@pytest.mark.parametrize("name", ["per", "pser", "ners"])
def test_the_is_weights_are_normalised_by_the_batch_unless_asked_and_the_choice_is_recorded(name):
    """The papers' code divides by the minibatch's largest weight; 'global' on request, in the manifest."""
    from prioritylab.deep.dqn import DQN_DEFAULTS

    for settings, expected in ((ReplaySettings(), "batch"), (ReplaySettings(normalise="global"), "global")):
        method = Method(name, settings, DQN_DEFAULTS, 1000)
        assert method.make_sampler(64, seed=0).normalise == expected
        assert method.describe()["normalise"] == expected
    assert "normalise" not in Method("lap", ReplaySettings(), DQN_DEFAULTS, 1000).describe()



def test_the_end_of_betas_schedule_is_recorded_for_the_weighted_samplers():
    """DQN keeps beta at beta0 (PSER Table 4), Double DQN and the continuous agents anneal it to 1 (PER Sec. 3.4);
    the manifest's ``method`` records where it ends, so a default that changes is seen on a resume."""
    from prioritylab.deep.continuous import CONTINUOUS_DEFAULTS
    from prioritylab.deep.dqn import DDQN_DEFAULTS, DQN_DEFAULTS

    cases = [(DQN_DEFAULTS, ReplaySettings(), 0.5), (DQN_DEFAULTS, ReplaySettings(beta0=0.7), 0.7),
             (DDQN_DEFAULTS, ReplaySettings(), 1.0), (CONTINUOUS_DEFAULTS, ReplaySettings(), 1.0)]  # fmt: skip
    for defaults, settings, end in cases:
        method = Method("per", settings, defaults, 1000)
        assert method.describe()["beta_end"] == end
        assert method.beta_at(1000) == pytest.approx(end)
    assert "beta_end" not in Method("lap", ReplaySettings(), DQN_DEFAULTS, 1000).describe()


@pytest.mark.parametrize("agent, sampler, beta0, end", [("dqn", "per", 0.5, 0.5), ("dqn", "pser", 0.6, 0.6),
                                                        ("ddqn", "per", 0.4, 1.0), ("td3", "ners", 0.4, 1.0),
                                                        ("sac", "per", 0.4, 1.0), ("dqn", "lap", 0.5, None)])
def test_a_manifest_before_beta_end_was_recorded_reads_as_the_schedule_it_ran(agent, sampler, beta0, end):
    from prioritylab.provenance import changed_settings, recorded

    old = {"config": {"agent": agent, "sampler": sampler, "replay": {"beta0": None}},
           "method": {"name": sampler, "beta0": beta0}}  # fmt: skip
    assert recorded(old).get("method.beta_end") == end
    if end is not None:  # the same run recorded now is the same settings; another end is a change
        now = {**old, "method": {**old["method"], "beta_end": end}}
        assert changed_settings(old, now) == {}
        moved = {**old, "method": {**old["method"], "beta_end": end + 0.25}}
        assert changed_settings(old, moved) == {"method.beta_end": (end, end + 0.25)}


def test_every_committed_weighted_run_ended_at_the_beta_its_manifest_reads_as():
    """The fill-in for manifests that predate ``method.beta_end`` agrees with the beta each committed run logged
    at its last evaluation (its last step is the run's end, where the schedule reaches beta_end)."""
    import csv
    import json
    from pathlib import Path

    from prioritylab.provenance import WEIGHTED, recorded

    checked = 0
    for manifest in sorted(Path(__file__).parents[1].glob("docs/results/**/runs/*/manifest.json")):
        m = json.loads(manifest.read_text())
        if m.get("config", {}).get("sampler") not in WEIGHTED:
            continue
        rows = list(csv.DictReader(open(manifest.parent / "evaluations.csv")))
        settings = recorded(m)
        last = rows[-1]
        frac = int(last["step"]) / settings["steps"]
        b0, b1 = settings["method.beta0"], settings["method.beta_end"]
        assert float(last["beta"]) == pytest.approx(b0 + (b1 - b0) * min(frac, 1.0), abs=1e-6), manifest.parent.name
        checked += 1
    assert checked >= 100


ALTERNATIVE = {"alpha": 0.9, "beta0": 0.1, "eps": 0.5, "kappa": 0.3, "rho": 0.9, "eta": 0.2, "window": 1,
               "mode": "add", "normalise": "global", "ners_baseline": "first", "ners_schedule": "evaluation",
               "ners_sample_size": 16, "ners_lr": 0.5, "ners_local": (8,), "ners_score": (8,)}  # fmt: skip
"""A valid value other than the default for every setting."""


def _behaviour(name: str, settings: ReplaySettings) -> tuple:
    """What a method does with its settings: the draws, probabilities and IS weights of its sampler after three
    rounds of priority updates, and its loss on fixed TD errors."""
    import numpy as np

    m = Method(name, settings, DEFAULTS, total_steps=100)
    s = m.make_sampler(64, seed=0)
    s.add(np.arange(40), episode_start=(np.arange(40) % 8 == 0))
    rng = np.random.default_rng(1)
    drawn = []
    for _ in range(3):
        b = s.sample(16, m.beta_at(50))
        drawn += [b.indices, b.probs, b.weights]
        s.update(b.indices, rng.normal(size=16) * 3, b.generations)
    delta = torch.linspace(-3.0, 3.0, 12).reshape(2, 6)
    loss = m.critic_loss(delta, torch.linspace(0.1, 1.0, 6))
    return np.concatenate(drawn).tolist(), loss.item()


def test_a_method_reads_exactly_the_settings_its_entry_names():
    """``MethodEntry.reads`` is what the user is told (the train CLI and the SB3 buffer name a setting given for
    a method that does not read it): a setting outside it changes nothing the method does, and every setting in
    it changes what the core methods do.  NERS, whose sampler needs a buffer to score, is checked on its eps."""
    fields = [f for f in ALTERNATIVE if not f.startswith("ners_")]
    for name in ("uniform", "per", "lap", "pal", "pser"):
        base = _behaviour(name, ReplaySettings())
        reads = method_table.METHOD_TABLE[name].reads
        for field in fields:
            changed = _behaviour(name, ReplaySettings(**{field: ALTERNATIVE[field]})) != base
            assert changed == (field in reads), (name, field, changed)
    ners = Method("ners", ReplaySettings(eps=0.5), DEFAULTS, total_steps=100).make_sampler(8, seed=0)
    assert ners.eps == 0.0 and "eps" not in method_table.METHOD_TABLE["ners"].reads


def test_the_settings_that_split_no_comparison_are_those_the_methods_do_not_read():
    """``provenance.ONLY_FOR`` (which samplers a recorded ``replay.*`` setting matters to) agrees with the
    entries' ``reads``; every name in ``reads`` is a setting."""
    from dataclasses import fields

    from prioritylab.provenance import ONLY_FOR

    names = {f.name for f in fields(ReplaySettings)}
    for name, entry in method_table.METHOD_TABLE.items():
        assert set(entry.reads) <= names, name
    for prefix, samplers in ONLY_FOR.items():
        if prefix.startswith("replay."):
            field = prefix.removeprefix("replay.")
            readers = {m for m, e in method_table.METHOD_TABLE.items() if any(r.startswith(field) for r in e.reads)}
            assert readers == set(samplers), prefix


def test_a_setting_the_sampler_does_not_read_is_named_before_the_run(tmp_path, capsys):
    from prioritylab.cli import main as cli_main
    from prioritylab.deep.methods import unread

    assert unread("per", ReplaySettings(alpha=0.7, kappa=2.0, ners_lr=0.1)) == [
        ("kappa", 2.0, ("lap", "pal")), ("ners_lr", 0.1, ("ners",))]  # fmt: skip
    assert unread("pser", ReplaySettings(rho=0.9, window=3)) == []
    code = cli_main(["train", "td3", "--env", "Pendulum-v1", "--sampler", "uniform", "--replay.kappa", "5",
                     "--steps", "300", "--out", str(tmp_path), "--no-progress"])  # refused: steps < start_steps
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and lines[0] == ("prioritylab train td3: warning: --replay.kappa 5.0 has no effect with "
                                      "--sampler uniform (read by lap, pal)")  # fmt: skip
    assert len(lines) == 2 and "error: --steps 300 < --start-steps" in lines[1]


@pytest.mark.parametrize(("name", "setting", "message"),
                         [("uniform", {"alpha": -1.0}, "alpha must be in"), ("per", {"rho": 5.0}, "rho must be in"),
                          ("lap", {"beta0": 7.0}, "beta must be in"), ("pser", {"kappa": -1.0}, "kappa must be in"),
                          ("uniform", {"ners_lr": -1.0}, "lr must be a positive number")])  # fmt: skip
def test_a_setting_the_sampler_does_not_read_is_still_refused_out_of_its_range(name, setting, message):
    """The warning says it has no effect; a value no sampler that reads it would take is an error all the same,
    as in the Cliffwalk testbed."""
    with pytest.raises(ValueError, match=re.escape(message)):
        Method(name, ReplaySettings(**setting), DEFAULTS, total_steps=100)


@pytest.mark.parametrize("sampler", ["per", "uniform"])
def test_a_beta0_that_is_not_a_number_is_named_as_the_flag_given(sampler, tmp_path, capsys):
    """Not as the argument of the schedule built from it ("start must be ...")."""
    from prioritylab.cli import main as cli_main

    code = cli_main(["train", "td3", "--env", "Pendulum-v1", "--sampler", sampler, "--replay.beta0", "nan",
                     "--steps", "300", "--start-steps", "10", "--out", str(tmp_path), "--no-progress"])  # fmt: skip
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and lines[-1] == (f"prioritylab train td3: error: --sampler {sampler}: --replay.beta0 must be "
                                       "in [0.0, 1.0], got nan")  # fmt: skip
    assert not any(tmp_path.iterdir())


def test_a_batch_larger_than_the_replay_at_the_first_update_is_named_before_the_run(tmp_path, capsys):
    from prioritylab.cli import main as cli_main

    args = ["train", "td3", "--env", "Pendulum-v1", "--out", str(tmp_path), "--no-progress", "--eval-episodes", "1"]
    code = cli_main([*args, "--steps", "50", "--start-steps", "100", "--batch-size", "256"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "error: --steps 50 < --start-steps 100" in lines[0]  # refused: no warning
    code = cli_main([*args, "--steps", "102", "--eval-every", "102", "--start-steps", "100", "--batch-size", "256"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 0 and lines == ["prioritylab train td3: warning: --batch-size 256 is larger than the at most "
                                   "100 transitions stored when updates start (--start-steps 100): the first "
                                   "batches draw transitions more than once"]  # fmt: skip
    code = cli_main([*args, "--steps", "258", "--eval-every", "258", "--start-steps", "256", "--batch-size", "256",
                     "--seed", "1"])  # fmt: skip
    assert code == 0 and capsys.readouterr().err.strip() == ""


def test_a_priority_past_the_float_range_ends_the_run_in_one_line_keeping_its_checkpoint(tmp_path, capsys):
    """An alpha under which ordinary TD errors overflow is named at the start; the run goes on until a priority's
    mass passes the float range, then stops with one line naming the step and what its folder keeps (not a
    traceback), unfinished, and ``--resume`` takes it up from that checkpoint."""
    from prioritylab.cli import main as cli_main

    args = ["train", "td3", "--env", "Pendulum-v1", "--out", str(tmp_path), "--no-progress", "--eval-episodes", "1",
            "--sampler", "per", "--replay.alpha", "1e6", "--steps", "600", "--eval-every", "600", "--start-steps",
            "250", "--batch-size", "32", "--checkpoint-every", "200"]  # fmt: skip
    code = cli_main(args)
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(lines) == 2, lines
    assert lines[0].startswith("prioritylab train td3: warning: with --replay.alpha 1000000.0 a priority above "
                               "1.00071 overflows")
    folder = tmp_path / "td3_Pendulum-v1_per_s0"
    assert re.fullmatch(r"prioritylab train td3: error: the run stopped at step 250 of 600: priority from "
                        r"td_errors\[\d+\] = [0-9.e+-]+ overflows when raised to alpha=1000000.0; a smaller "
                        rf"--replay.alpha keeps priorities in range. It is not finished; {re.escape(str(folder))} "
                        r"keeps its checkpoint of step 200", lines[1])  # fmt: skip
    assert not (folder / "finished.json").exists() and (folder / "checkpoint.pt").exists()
    assert cli_main([*args, "--resume"]) == 1  # the same run from its checkpoint: stopped at the same step
    assert "stopped at step 250 of 600" in capsys.readouterr().err


def test_a_new_items_priority_past_the_float_range_ends_the_run_in_one_line_too(tmp_path, capsys, monkeypatch):
    """New items take the running maximum priority, so an ``add`` can overflow where every update fitted: it ends
    the run as an update's overflow does (one line naming the step and the checkpoint kept), not with a
    traceback.  The overflow is made to happen at the 230th transition stored."""
    from prioritylab.cli import main as cli_main
    from prioritylab.replay.buffer import ReplayBuffer
    from prioritylab.samplers import PriorityOverflow

    real, calls = ReplayBuffer.add, []

    def add(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 230:
            raise PriorityOverflow("the new item's priority overflows the tree's total")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ReplayBuffer, "add", add)
    args = ["train", "td3", "--env", "Pendulum-v1", "--out", str(tmp_path), "--no-progress", "--eval-episodes", "1",
            "--sampler", "per", "--steps", "600", "--eval-every", "600", "--start-steps", "150", "--batch-size",
            "32", "--checkpoint-every", "200"]  # fmt: skip
    code = cli_main(args)
    lines = capsys.readouterr().err.strip().splitlines()
    folder = tmp_path / "td3_Pendulum-v1_per_s0"
    assert code == 1 and lines == [
        "prioritylab train td3: error: the run stopped at step 230 of 600: the new item's priority overflows the "
        "tree's total; a smaller --replay.alpha keeps priorities in range. It is not finished; "
        f"{folder} keeps its checkpoint of step 200"]  # fmt: skip
    assert not (folder / "finished.json").exists() and (folder / "checkpoint.pt").exists()


def test_an_alpha_whose_priorities_fit_is_not_named():
    from prioritylab.deep.loop import warn_if_priorities_may_overflow

    class Cfg:
        sampler = "per"

    defaults = Defaults(per_alpha=0.6, per_beta0=0.4, per_eps=1e-6, lap_alpha=0.4, kappa=1.0)
    for alpha, named in ((0.6, False), (51.0, False), (52.0, True)):  # 1.8e308 ** (1 / 51.4) = 1e6
        out = io.StringIO()
        with contextlib.redirect_stderr(out):
            warn_if_priorities_may_overflow(Cfg, Method("per", ReplaySettings(alpha=alpha), defaults, 1000))
        assert bool(out.getvalue()) == named, alpha
