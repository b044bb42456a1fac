"""The replay methods table: each method is one entry, and a new entry is a new method."""

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
