"""Replay diagnostics against direct computations on small hand-made buffers and batch sequences."""

from __future__ import annotations

import numpy as np
import pytest

from prioritylab import make_sampler
from prioritylab.replay import ReplayBuffer
from prioritylab.replay.diagnostics import COLUMNS, ReplayDiagnostics


def buffer(sampler="uniform", cap=32, **params):
    return ReplayBuffer(cap, (1,), (), sampler=make_sampler(sampler, cap, seed=0, **params), action_dtype=np.int64)


def step(buf, t, end=False):
    buf.add(np.array([[t]], dtype=np.float32), np.array([0]), np.array([1.0]), np.array([[t + 1]], dtype=np.float32),
            np.array([end]), np.array([False]))  # fmt: skip


def test_uniform_replay_has_flat_probabilities_and_full_ess():
    buf = buffer("uniform")
    for t in range(20):
        step(buf, t)
    for _ in range(10):
        buf.sample(8)
    rep = buf.diagnostics_report()
    assert set(rep) == set(COLUMNS)
    assert rep["prob_n_p1"] == rep["prob_n_p50"] == rep["prob_n_p99"] == pytest.approx(1.0, rel=1e-12, abs=0)
    assert rep["ess_mean"] == rep["ess_p5"] == 1.0 and rep["weight_mean"] == 1.0
    assert rep["top1_share"] == pytest.approx(1 / 19, rel=1e-12, abs=0)  # one slot of the 19 sampleable


def test_one_dominant_slot_holds_the_top_share_and_is_replayed_most():
    buf = buffer("per", cap=256, alpha=1.0, eps=0.0)
    for t in range(200):
        step(buf, t)
    live = np.flatnonzero(buf.sampler.sampleable(np.arange(256)))
    td = np.full(live.shape[0], 1e-6)
    td[0] = 1e6
    buf.sampler.update(live, td)
    for _ in range(20):
        batch = buf.sample(16, beta=0.5)
    rep = buf.diagnostics_report()
    assert rep["top1_share"] > 0.999
    assert rep["max_replays"] >= 300  # nearly all 320 draws hit the dominant slot
    assert rep["coverage"] < 0.05
    assert rep["beta"] == 0.5
    assert batch.weights.shape == (16,)
    assert 0 < rep["ess_p5"] <= rep["ess_mean"] <= 1


def test_ess_matches_the_formula_on_given_weights():
    d = ReplayDiagnostics(8)
    w = np.array([1.0, 0.5, 0.25, 0.25])
    d.on_sample(np.array([0, 1, 2, 3]), w, np.array([0, 1, 2, 3]), 0.4)
    d.on_sample(np.array([0, 0, 0, 0]), np.ones(4), np.array([5, 5, 5, 5]), 0.4)
    rep = d.report(np.full(8, 1 / 8), np.ones(8, dtype=bool))
    expected = (w.sum() ** 2 / (4 * (w**2).sum()) + 1.0) / 2
    assert rep["ess_mean"] == pytest.approx(expected, rel=1e-12, abs=0)
    assert rep["age_median"] == 4.0 and rep["max_replays"] == 5
    assert rep["coverage"] == 0.5
    assert rep["weight_mean"] == pytest.approx((w.sum() + 4) / 8, rel=1e-12, abs=0)


def test_ess_of_weights_too_small_to_square_and_of_zero_weights_and_their_state_reloads():
    """Global normalisation can give a whole batch weights under 1e-145, whose squares underflow: the ESS
    fraction is computed from the weights over their largest, as it does not change with their scale.  Weights
    that are all 0 reach the learner as equal floors: a fraction of 1.  Either way the state reloads (before, a
    NaN fraction made a checkpoint of such a run one that would not resume)."""
    d = ReplayDiagnostics(8)
    w = np.array([1.0, 0.5, 0.25, 0.25])
    d.on_sample(np.array([0, 1, 2, 3]), w * 1e-200, np.array([0, 1, 2, 3]), 0.4)
    d.on_draw(np.array([0, 1, 2, 3]), w * 1e-200, np.zeros(8, dtype=np.int64), 3, 0.4)
    expected = w.sum() ** 2 / (4 * (w**2).sum())
    np.testing.assert_allclose(d.ess, [expected, expected], rtol=1e-12, atol=0)
    d.on_draw(np.array([0, 1]), np.zeros(2), np.zeros(8, dtype=np.int64), 3, 0.4)
    assert d.ess[-1] == 1.0
    again = ReplayDiagnostics(8)
    again.assign(ReplayDiagnostics.parse_state(d.state_dict(), 8))
    assert again.ess == d.ess
    zeros = ReplayDiagnostics(8)  # a window of zero weights alone
    zeros.on_draw(np.array([0, 1]), np.zeros(2), np.zeros(8, dtype=np.int64), 3, 0.4)
    again.assign(ReplayDiagnostics.parse_state(zeros.state_dict(), 8))
    assert again.ess == [1.0] and again.weights.n == 2
    buf = buffer("per", cap=16, alpha=1.0, eps=0.0, normalise="global")  # the same through a buffer's checkpoint
    for t in range(12):
        step(buf, t)
    live = np.flatnonzero(buf.sampler.sampleable(np.arange(16)))
    buf.sampler.update(live, np.r_[1e-200, np.ones(live.shape[0] - 1)])
    buf.sample(4, beta=1.0)
    assert 0 < buf.diagnostics.ess[-1] <= 1
    buffer("per", cap=16, alpha=1.0, eps=0.0, normalise="global").load_state_dict(buf.state_dict())


def test_ages_and_coverage_after_the_ring_wraps():
    buf = buffer("uniform", cap=16)
    for t in range(40):  # wraps twice: slots now hold steps 24..39 (one held as newest)
        step(buf, t)
    batch = buf.sample(64)
    rep = buf.diagnostics_report()
    obs = batch.obs[:, 0].astype(np.int64)  # the step each drawn transition was written at
    assert rep["age_median"] == pytest.approx(np.median(39 - obs), rel=0, abs=0)
    assert rep["age_p90"] == pytest.approx(np.percentile(39 - obs, 90), rel=1e-12, abs=0)
    assert obs.min() >= 24  # nothing older than the ring
    assert rep["coverage"] == pytest.approx(np.unique(batch.indices).shape[0] / 15, rel=1e-12, abs=0)
    step(buf, 40)  # overwrites the oldest slot: its count starts again
    assert buf.diagnostics.counts[buf.writer["pos"][0] - 1] == 0


def test_report_starts_a_new_window_and_diagnostics_can_be_off():
    buf = buffer("uniform")
    for t in range(10):
        step(buf, t)
    buf.sample(4)
    buf.diagnostics_report()
    rep = buf.diagnostics_report()
    assert np.isnan(rep["ess_mean"]) and np.isnan(rep["age_median"])
    off = ReplayBuffer(32, (1,), (), sampler=make_sampler("uniform", 32, seed=0), action_dtype=np.int64,
                       diagnostics=False)  # fmt: skip
    assert off.diagnostics_report() == {}


@pytest.mark.parametrize("what", ["td", "q"])
def test_values_whose_squares_pass_the_float_range_report_an_infinite_std_and_the_state_reloads(what):
    """PER at alpha 0.6 accepts a |TD error| of 1e200 (its mass is 1e120): the window's sum of squares is then
    inf, which the buffer's own state must still load with, and the std must read inf, not NaN or a number."""
    buf = buffer("per", alpha=0.6)
    for t in range(20):
        step(buf, t)
    b = buf.sample(4, beta=0.4)
    values = np.array([1e200 if what == "td" else 2e154, 1.0, 2.0, 3.0])
    buf.update(b, values if what == "td" else np.ones(4))
    if what == "q":
        buf.diagnostics.on_values(q=values)
    again = buffer("per", alpha=0.6)
    again.load_state_dict(buf.state_dict())
    for rep in (buf.diagnostics_report(), again.diagnostics_report()):
        assert rep[f"{what}_mean"] == pytest.approx(values.mean(), rel=1e-12)
        assert rep[f"{what}_std"] == np.inf


def test_a_refused_write_is_undone_with_diagnostics_on_as_with_them_off(monkeypatch):
    """Past ``may_overflow``'s limit a write that the sampler refuses is undone; a window whose sum of squares has
    left the float range must not stop the undo, nor may any check of a loaded state: the undo puts back the state
    the buffer has just taken without going through them."""
    from prioritylab.samplers import PriorityOverflow

    def refuse(self, state):
        raise AssertionError("an undo went through load_state_dict's checks")

    states = []
    for diagnostics in (False, True):
        buf = ReplayBuffer(16, (1,), (), sampler=make_sampler("per", 16, seed=0, alpha=1.0, eps=0.0),
                           action_dtype=np.int64, diagnostics=diagnostics)  # fmt: skip
        for t in range(8):
            step(buf, t)
        buf.update(buf.sample(4, beta=0.5), np.r_[np.finfo(float).max / 6, np.ones(3)])
        for t in range(8, 40):
            before = buf.state_dict()
            try:
                with monkeypatch.context() as patch:
                    patch.setattr(ReplayBuffer, "load_state_dict", refuse)
                    step(buf, t)
            except PriorityOverflow:
                break
        else:
            raise AssertionError("no write was refused")
        after = buf.state_dict()
        assert after["writer"]["steps"] == before["writer"]["steps"]
        assert all((after["storage"][k] == v).all() for k, v in before["storage"].items())
        ReplayBuffer(16, (1,), (), sampler=make_sampler("per", 16, seed=0, alpha=1.0, eps=0.0), action_dtype=np.int64,
                     diagnostics=diagnostics).load_state_dict(after)  # fmt: skip
        states.append((t, after["sampler"]["writes"]))
    assert states[0] == states[1]


def test_the_beta_column_is_the_exponent_the_weights_were_computed_with():
    """A weighted sampler sampled without a beta uses its own; a sampler without weights has none."""
    per = buffer("per", beta=0.4)
    uniform = buffer("uniform")
    for t in range(20):
        step(per, t)
        step(uniform, t)
    per.sample(8)
    uniform.sample(8, beta=0.7)
    assert per.diagnostics_report()["beta"] == 0.4
    assert np.isnan(uniform.diagnostics_report()["beta"])
    per.sample(8, beta=0.9)
    assert per.diagnostics_report()["beta"] == 0.9
