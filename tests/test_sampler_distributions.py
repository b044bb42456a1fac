"""Seeded chi-square goodness of fit of the samplers' draw frequencies.

Each test states its false-failure probability (the p-value threshold).
"""

import numpy as np
import pytest
from scipy import stats

from prioritylab import make_sampler

TD = np.array([0.0, 0.3, -1.2, 2.5, 0.05, -0.7, 4.0, 0.9, -0.01, 1.6, 0.0, -3.3])


def chi_square_pvalue(counts, probs):
    support = probs > 0
    assert counts[~support].sum() == 0, "drew a slot of probability zero"
    return stats.chisquare(counts[support], probs[support] / probs[support].sum() * counts.sum()).pvalue


@pytest.mark.parametrize(
    ("name", "params", "raw"),
    [
        ("per", {"alpha": 0.6, "eps": 0.01}, np.abs(TD) + 0.01),
        ("per", {"alpha": 1.0, "eps": 0.01}, np.abs(TD) + 0.01),
        ("lap", {"alpha": 0.4, "kappa": 1.0}, np.maximum(np.abs(TD), 1.0)),
        ("lap", {"alpha": 0.4, "kappa": 0.1}, np.maximum(np.abs(TD), 0.1)),
    ],
)
def test_proportional_frequencies_match_p_alpha(name, params, raw):
    s = make_sampler(name, 16, seed=2024, stratified=False, **params)
    s.add(np.arange(TD.size))
    s.update(np.arange(TD.size), TD)
    counts = np.zeros(16)
    for _ in range(200):
        np.add.at(counts, s.sample(500).indices, 1)
    p = np.zeros(16)
    p[: TD.size] = raw ** params["alpha"]
    np.testing.assert_allclose(s.probabilities(), p / p.sum(), rtol=1e-12, atol=0)
    assert chi_square_pvalue(counts, p) > 1e-3  # false-failure probability 1e-3


@pytest.mark.parametrize("name", ["per", "lap"])
def test_stratified_marginal_matches_p_alpha(name):
    """Pooled over batch positions the frequencies are p^alpha/sum; stratification only lowers the
    variance, so the multinomial chi-square is conservative (false-failure probability <= 1e-3)."""
    s = make_sampler(name, 16, seed=99)
    s.add(np.arange(TD.size))
    s.update(np.arange(TD.size), TD)
    counts = np.zeros(16)
    for _ in range(2000):
        np.add.at(counts, s.sample(32).indices, 1)
    assert chi_square_pvalue(counts, s.probabilities()) > 1e-3


def test_rank_based_frequencies_match_power_law_per_segment():
    """Exact within-segment draws: position q of the batch follows the power law restricted to
    segment q of equal mass; chi-square per position, Bonferroni to a total of 1e-3."""
    alpha, n, k, batches = 0.7, 40, 4, 20_000
    s = make_sampler("per-rank", 64, alpha=alpha, seed=7)
    s.add(np.arange(n))
    s.update(np.arange(n), np.random.default_rng(0).normal(size=n))
    s.refresh()
    ranks = np.arange(1, n + 1)
    mass = ranks**-alpha / np.sum(ranks**-alpha)
    cum = np.concatenate([[0.0], np.cumsum(mass)])
    counts = np.zeros((k, n))
    for _ in range(batches):
        b = s.sample(k)
        counts[np.arange(k), s.ranks(b.indices) - 1] += 1
    pvalues = []
    for q in range(k):
        lo, hi = q / k, (q + 1) / k
        p = np.clip(np.minimum(cum[1:], hi) - np.maximum(cum[:-1], lo), 0, None)
        pvalues.append(chi_square_pvalue(counts[q], p))
    assert min(pvalues) > 1e-3 / k
    pooled = counts.sum(axis=0)  # and the pooled frequencies against rank^-alpha / H_n
    assert chi_square_pvalue(pooled, mass) > 1e-3


def test_rank_uniform_within_segment_reports_its_own_probabilities():
    s = make_sampler("per-rank", 64, alpha=0.7, within_segment="uniform", seed=3)
    s.add(np.arange(40))
    s.update(np.arange(40), np.linspace(0, 1, 40))
    s.refresh()
    counts = np.zeros(40)
    probs = {}
    for _ in range(5000):
        b = s.sample(4)
        r = s.ranks(b.indices) - 1
        np.add.at(counts, r, 1)
        probs.update(zip(r.tolist(), b.probs.tolist(), strict=True))
    p = np.array([probs.get(r, 0.0) for r in range(40)])
    assert chi_square_pvalue(counts, p) > 1e-3


def per_uniform_segment_model(n: int, k: int, alpha: float):
    """PER Section 3.3 written out independently of the sampler: ``P(r) = r^-alpha / sum_j j^-alpha``
    over ranks ``1..n``; the CDF is split into ``k`` segments of mass ``1/k``, rank ``r`` belonging to
    the segment that holds its cumulative mass ``F(r)`` (``q/k <= F(r) < (q+1)/k``); a segment that
    no rank ends in holds the single rank whose mass spans its lower bound.  A batch draws one rank
    uniformly from each segment.  Returns the power law, the 0-based ranks of each segment, and
    whether each segment is such a fallback."""
    p = np.array([r**-alpha for r in range(1, n + 1)])
    p /= p.sum()
    cum = np.cumsum(p)
    segments, fallback = [], []
    for q in range(k):
        upper = np.inf if q == k - 1 else (q + 1) / k
        members = [r for r in range(n) if q / k <= cum[r] < upper]
        fallback.append(not members)
        segments.append(members or [next(r for r in range(n) if cum[r] >= q / k)])
    return p, segments, fallback


@pytest.mark.parametrize(("n", "k", "batches"), [(100, 8, 4000), (60, 32, 3000)])
def test_rank_uniform_within_segment_matches_an_independent_segment_model(n, k, batches):
    """(100, 8): every segment has ranks of its own; (60, 32): rank 1 alone holds more than 1/32 of
    the mass, so the first segments are empty and all fall back to it."""
    alpha = 0.7
    p, segments, fallback = per_uniform_segment_model(n, k, alpha)
    assert any(fallback) == (k == 32)
    # a draw's probability, the position it is drawn at taken at random: a rank in several segments (the
    # fallbacks) is in each one's share, so the IS weights of a rank drawn more often are smaller
    marginal = np.zeros(n)
    for q in range(k):
        marginal[segments[q]] += 1.0 / (k * len(segments[q]))
    s = make_sampler("per-rank", 128, alpha=alpha, within_segment="uniform", seed=11)
    s.add(np.arange(n))
    s.update(np.arange(n), np.random.default_rng(1).permutation(n) + 1.0)
    s.refresh()
    counts = np.zeros((k, n))
    for _ in range(batches):
        b = s.sample(k)
        ranks = s.ranks(b.indices) - 1
        counts[np.arange(k), ranks] += 1
        np.testing.assert_allclose(b.probs, marginal[ranks], rtol=1e-12, atol=0)
    observed = [np.flatnonzero(counts[q]).tolist() for q in range(k)]  # the sampler's segments, as drawn
    # every rank is reachable
    assert sorted(set().union(*map(set, observed))) == list(range(n))
    # each segment of the sampler is a run of ranks holding 1/k of the power-law mass, up to one boundary
    # rank on either side: F(a-1) < q/k <= F(a) and F(b-1) < (q+1)/k <= F(b) for a segment [a, b)
    for q in range(k):
        a, last = observed[q][0], observed[q][-1]
        assert observed[q] == list(range(a, last + 1)), f"segment {q}"
        if not fallback[q]:
            excess = p[a : last + 1].sum() - 1 / k
            upper_slack = p[last + 1] if last + 1 < n else 0.0
            assert -upper_slack <= excess <= p[a], f"segment {q} holds {excess + 1 / k}"
    # and they are exactly the segments of the model
    assert observed == segments
    # draws at each position are uniform over its segment (chi-square, Bonferroni to 1e-3 in total)
    for q in range(k):
        if len(segments[q]) == 1:
            continue  # a single rank: already checked above
        support = np.zeros(n)
        support[segments[q]] = 1.0
        assert chi_square_pvalue(counts[q], support) > 1e-3 / k, f"segment {q}"
    # pooled over positions, the draws follow the probabilities reported (with a rank in several segments too)
    assert chi_square_pvalue(counts.sum(axis=0), marginal) > 1e-3
    # and the global IS normaliser is the least probability of any rank under the same scheme: with 3 ranks and
    # 32 segments every rank is in several, so it is not one segment's share
    for size in (n, 3):
        _, parts, _ = per_uniform_segment_model(size, k, alpha)
        least = np.zeros(size)
        for q in range(k):
            least[parts[q]] += 1.0 / (k * len(parts[q]))
        g = make_sampler("per-rank", 128, alpha=alpha, within_segment="uniform", normalise="global", beta=0.5,
                         seed=11)  # fmt: skip
        g.add(np.arange(size))
        g.update(np.arange(size), np.random.default_rng(1).permutation(size) + 1.0)
        g.refresh()
        b = g.sample(k)
        expected = (least[g.ranks(b.indices) - 1] / least.min()) ** -0.5
        np.testing.assert_allclose(b.weights, expected, rtol=1e-12, atol=0)
