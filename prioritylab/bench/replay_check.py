"""The replay benchmark's self-check: what each contender's own calls hand back, before anything is timed.

Each contender (:func:`self_check`), built by the same code as the timed one on a small buffer
(:data:`CHECK_ROWS` slots, Atari frames of :data:`CHECK_FRAME`) and filled with rows whose content names them
(:class:`MarkedSteps`), must hand back the fields of one written row, the row its reported index holds; a
prioritized one, its priorities set by its own update calls, must draw rows in proportion to
``priority^alpha`` (a G test over :data:`CHECK_DRAWS` draws) and hand back IS weights ``(N P(i))^-beta`` over
the largest of the buffer or of the batch, as it documents; a uniform one must draw uniformly. A contender
that fails is still timed, but its row gets no ratio and no ratio is taken against it. What a peer does
otherwise by its own rules (tianshou's edge rows with frame stacks, its independent draws) is reported as a
named difference, not a failure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import numpy as np

from .replay_contenders import ALPHA, BATCH, BETA, LAYOUTS, PEERS, Contender, Edge, Layout, MarkedSteps, Steps, makers

CHECK_DRAWS = 200_000
"""Rows drawn (in batches of ``BATCH``) for the frequency test and the IS weights of one contender."""
CHECK_LEVEL = 1e-6
"""A contender fails the frequency test when its G test's p-value is at or below this."""
CHECK_WEIGHT_RTOL = 1e-4
"""Largest relative error of an IS weight (the contenders hand back float32 weights, tianshou float64)."""
CHECK_ROWS = 256
"""Slots of a checked buffer (at least 32 per environment)."""
CHECK_FRAME = (8, 8)
"""Frame size of the checked Atari layout: every option a contender takes from the layout (stacks, dtypes,
next_of, stack_compress, save_only_last_obs, ignore_obs_next, optimize_memory_usage) is the full layout's, at
a fraction of the copying per draw."""
STRATIFIED_BELOW = 0.6
"""Batch dispersion below which a sampler's batches are called stratified (independent draws give about 1)."""
_MAX_PRIORITY_BATCHES = 4000
_FIELDS = ("obs", "next_obs", "action", "reward")


def check_layout(layout: Layout) -> Layout:
    """The layout a contender is checked on: ``layout`` itself, with frames of :data:`CHECK_FRAME`."""
    if layout.frame_stack == 1:
        return layout
    return replace(layout, obs_shape=(layout.frame_stack, *CHECK_FRAME))


def marked_td(rows: int) -> np.ndarray:
    """The TD error reported for each row: magnitudes spread over ``[10^-1.5, 10^1.5]`` (masses over a factor of
    63 at ``alpha = 0.6``), signs alternating, so that a contender must take ``|td|`` itself or be given it."""
    r = np.arange(rows)
    magnitude = 10.0 ** (3.0 * ((r * 0.6180339887498949) % 1.0) - 1.5)
    return np.where(r % 2 == 0, magnitude, -magnitude)


@dataclass
class CheckResult:
    """One contender's self-check in one (layout, N) cell."""

    contender: str
    layout: str
    num_envs: int
    kind: str
    passed: bool
    reason: str = ""
    """Every failure, in one line; empty when it passed."""
    rows: int = 0
    """Rows the contender may draw (its own rules)."""
    draws: int = 0
    """Rows drawn for the frequency test and the IS weights."""
    g: float | None = None
    """G statistic of the frequencies against ``priority^alpha / sum`` (uniform: ``1 / rows``)."""
    dof: int = 0
    p_value: float | None = None
    weight_error: float | None = None
    """Largest relative error of an IS weight (uniform: of a weight against 1); None where none is handed back."""
    dispersion: float | None = None
    """Variance of a row's count per batch over that of independent draws: about 1 for independent draws, well
    below for stratified batches."""
    batches: str = ""
    """``"independent"`` or ``"stratified"``, from the dispersion."""
    eps: float | None = None
    normalise: str | None = None
    differences: dict = field(default_factory=dict)
    """Named differences: what the contender does otherwise than the others, by name."""
    seen: dict = field(default_factory=dict)
    """How many of the ``checked`` draws showed each named difference of drawn rows."""
    checked: int = 0
    """Rows drawn in all, those that set the priorities included (every one's fields are checked)."""


class _Tally:
    """Checks drawn rows against the rows written: fields of one row, the row the index reported holds."""

    def __init__(self, pool: MarkedSteps, edges: dict[str, Edge]):
        self.pool = pool
        self.edges = {name: (np.isin(np.arange(pool.rows), e.rows), e) for name, e in edges.items()}
        self.seen = dict.fromkeys(edges, 0)
        self.problems: dict[str, list] = {}  # what -> [count, first example]
        self.draws = 0

    def _problem(self, what: str, mask: np.ndarray, example: str) -> None:
        count = int(mask.sum())
        if count:
            entry = self.problems.setdefault(what, [0, example])
            entry[0] += count

    def add(self, v: dict, locate, written: int, capacity: int) -> np.ndarray:
        """Tally one drawn batch; returns the row each drawn observation names (-1 where none)."""
        rows = self.pool.row_of(v["obs"])
        b = rows.shape[0]
        self.draws += b
        known = rows >= 0
        safe = np.where(known, rows, 0)
        if not known.all():
            self._problem("no row", ~known, f"first: batch position {int(np.argmax(~known))}")
        bad = {}
        for f in _FIELDS:
            got, want = np.asarray(v[f]), self.pool.written[f][safe]
            if got.shape != want.shape:
                self._problem(f"{f} shape", np.ones(b, bool), f"{f} of shape {got.shape[1:]}, written "
                                                              f"{want.shape[1:]}")  # fmt: skip
                bad[f] = np.zeros(b, bool)
                continue
            same = (got == want).reshape(b, -1).all(axis=1)
            bad[f] = known & ~same
        wrong = np.zeros(b, bool)
        for f in _FIELDS:
            wrong |= bad[f]
        explained = np.zeros(b, bool)
        for name, (member, edge) in self.edges.items():
            fits = known & member[safe]
            for f in _FIELDS:
                if f not in edge.fields:
                    fits &= ~bad[f]
            self.seen[name] += int((fits & wrong).sum())
            explained |= fits
        for f in _FIELDS:
            odd = bad[f] & ~explained
            if odd.any():
                first = int(rows[np.argmax(odd)])
                self._problem(f, odd, f"first: {self.pool.where(first)}")
        if locate is not None and v["indices"] is not None:
            idx = np.asarray(v["indices"]).astype(np.int64)
            outside = (idx < 0) | (idx >= capacity)
            self._problem("index", outside, f"index {int(idx[np.argmax(outside)])} outside [0, {capacity})")
            held = np.where(outside, -1, locate(np.where(outside, 0, idx), written))
            other = known & ~outside & (held != rows)
            if other.any():
                j = int(np.argmax(other))
                self._problem("other row", other, f"first: index {int(idx[j])} holds {self.pool.where(int(held[j]))}"
                                                  f", fields of {self.pool.where(int(rows[j]))}")  # fmt: skip
        return rows

    def reasons(self) -> list[str]:
        text = {
            "no row": "drawn obs that name no row written",
            "other row": "drawn rows whose fields are another row's than the index reported holds",
            "index": "reported indices outside the buffer",
            "obs": "drawn obs stacks other than the one written with their row",
            "next_obs": "drawn next_obs other than the one written with the row's obs",
            "action": "drawn actions other than the one written with the row's obs",
            "reward": "drawn rewards other than the one written with the row's obs",
        }
        return [f"{count:,} of {self.draws:,} {text.get(what, what)} ({example})"
                for what, (count, example) in self.problems.items()]  # fmt: skip


def check_contender(make: Callable[[int, Steps], Contender], layout: Layout, n: int, seed: int = 0,
                    draws: int | None = None) -> CheckResult:  # fmt: skip
    """Build a small instance of one contender with ``make(capacity, steps)`` and check what its own calls do.

    The buffer (:data:`CHECK_ROWS` slots, on :func:`check_layout` of ``layout``) is filled with
    :class:`MarkedSteps` and then half a ring more, so that it has wrapped, as in the timed steps.  Then:

    1. every drawn row's ``obs``, ``next_obs``, ``action`` and ``reward`` are those written as one
       row, and, where the contender reports indices, the row its index holds (on every draw below);
    2. a prioritized contender's priorities are set by its own draw and update calls, each drawn
       row given :func:`marked_td` of the row its obs names, until every row it may draw has been
       updated; ``draws`` rows (:data:`CHECK_DRAWS` by default) are then drawn (no update), and a
       G test compares each row's count with ``priority^alpha / sum`` over the rows it may draw
       (uniform: with ``1 / rows``), ``priority = |td| + eps`` with the contender's own ``eps``;
    3. the IS weights of a prioritized contender are ``(N P(i))^-beta`` over the largest of the
       buffer or of the batch (as the contender documents), within :data:`CHECK_WEIGHT_RTOL`; a
       uniform contender's weights, where it hands any back, are 1.

    Rows where the contender's own documented rules hand back other fields (:class:`Edge`) are
    counted as named differences, not failures.  NumPy's global generator (tianshou's and SB3's
    draws) is seeded with ``seed`` and restored afterwards.
    """
    draws = CHECK_DRAWS if draws is None else draws
    small = check_layout(layout)
    seg = max(32, -(-CHECK_ROWS // n))
    capacity, extra = seg * n, seg // 2
    pool = MarkedSteps(small, n, seg + extra)
    saved = np.random.get_state()  # noqa: NPY002  (the peers draw from NumPy's global generator)
    np.random.seed(seed)  # noqa: NPY002
    try:
        c = make(capacity, pool)
        result = CheckResult(c.name, layout.name, n, c.kind, passed=False)
        if c.probe is None:
            result.reason = "has no probe: its calls cannot be checked"
            return result
        _check(c, result, pool, capacity, extra, draws)
    finally:
        np.random.set_state(saved)  # noqa: NPY002
    return result


def _check(c: Contender, result: CheckResult, pool: MarkedSteps, capacity: int, extra: int, draws: int) -> None:
    from scipy.stats import chi2

    p = c.probe
    for _ in range(extra):
        p.add()
    written = pool.i
    allowed = np.asarray(p.sampleable(written), dtype=np.int64)
    in_set = np.zeros(pool.rows, dtype=bool)
    in_set[allowed] = True
    tally = _Tally(pool, p.edges(written))
    prioritized = c.kind == "per"
    reasons = []
    td = marked_td(pool.rows)
    result.rows, result.eps, result.normalise = int(allowed.size), (p.eps if prioritized else None), p.normalise
    if prioritized and p.normalise not in ("buffer", "batch"):
        reasons.append(f"is prioritized but names no IS normaliser ('buffer' or 'batch'), got {p.normalise!r}")
    if prioritized and p.update is None:
        reasons.append("is prioritized but has no update call")
    elif prioritized:
        updated = np.zeros(pool.rows, dtype=bool)
        for _ in range(_MAX_PRIORITY_BATCHES):
            batch = p.draw()
            rows = tally.add(p.view(batch), p.locate, written, capacity)
            p.update(batch, np.where(rows >= 0, td[np.maximum(rows, 0)], 1.0))
            updated[rows[rows >= 0]] = True
            if updated[allowed].all():
                break
        else:
            missing = int((~updated[allowed]).sum())
            reasons.append(f"{missing} of {allowed.size} rows it may draw were never drawn in "
                           f"{_MAX_PRIORITY_BATCHES:,} batches")  # fmt: skip
    mass = (np.abs(td) + p.eps) ** ALPHA if prioritized else np.ones(pool.rows)
    prob = mass[allowed] / mass[allowed].sum()
    least = mass[allowed].min()
    counts = np.zeros(pool.rows, dtype=np.int64)
    batches = -(-draws // BATCH)
    spread, weight_error, no_weights, misfit = 0.0, 0.0, False, ""
    for _ in range(batches):
        v = p.view(p.draw())
        named = tally.add(v, p.locate, written, capacity)
        if p.locate is not None and v["indices"] is not None:
            idx = np.asarray(v["indices"]).astype(np.int64)
            rows = np.where((idx >= 0) & (idx < capacity), p.locate(np.clip(idx, 0, capacity - 1), written), -1)
        else:  # no index reported: the row is the one its obs names
            rows = named
        rows = rows[rows >= 0]
        per_batch = np.bincount(rows, minlength=pool.rows)
        counts += per_batch
        spread += float(((per_batch[allowed] - rows.size * prob) ** 2).sum())
        w = v["weights"]
        if w is None:
            no_weights |= prioritized
            continue
        w = np.asarray(w, dtype=np.float64).reshape(-1)
        if w.shape[0] != rows.shape[0]:
            if w.shape[0] != len(v["obs"]):
                misfit = f"hands back {w.shape[0]} IS weights for a batch of {len(v['obs'])}"
            continue  # else rows without a place in the buffer: failed above
        if prioritized:
            m = mass[rows]
            want = (m / (least if p.normalise == "buffer" else m.min())) ** -BETA
            weight_error = max(weight_error, float(np.max(np.abs(w - want) / want)))
        else:
            weight_error = max(weight_error, float(np.max(np.abs(w - 1.0))))
    total = int(counts.sum())
    observed, expected = counts[allowed], total * prob
    seen = observed > 0
    g = 2.0 * float(np.sum(observed[seen] * np.log(observed[seen] / expected[seen])))
    dof = int(allowed.size) - 1
    p_value = float(chi2.sf(g, dof)) if dof > 0 else 1.0
    dispersion = spread / (batches * float(np.sum(BATCH * prob * (1 - prob)))) if dof > 0 else None
    result.draws, result.g, result.dof, result.p_value, result.dispersion = total, g, dof, p_value, dispersion
    result.weight_error = None if no_weights or v["weights"] is None else weight_error
    if dispersion is not None:
        result.batches = "stratified" if dispersion < STRATIFIED_BELOW else "independent"
    reasons += tally.reasons()
    outside = int(counts[~in_set].sum())
    if outside:
        first = int(np.nonzero(counts * ~in_set)[0][0])
        reasons.append(f"{outside:,} draws of rows it may not draw by its own rules (first: {pool.where(first)})")
    if p_value <= CHECK_LEVEL:
        law = f"priority^{ALPHA} / sum" if prioritized else "uniform"
        reasons.append(f"frequencies do not follow {law} (G = {g:,.0f} on {dof} dof, p = {p_value:.2g})")
    if misfit:
        reasons.append(misfit)
    if no_weights:
        reasons.append("hands back no IS weights")
    elif prioritized and weight_error > CHECK_WEIGHT_RTOL:
        reasons.append(f"IS weights differ from (N P(i))^-{BETA} over the {p.normalise}'s largest by up to "
                       f"{weight_error:.2g} (relative; tolerance {CHECK_WEIGHT_RTOL:g})")  # fmt: skip
    elif not prioritized and result.weight_error is not None and weight_error > CHECK_WEIGHT_RTOL:
        reasons.append(f"is uniform but hands back IS weights other than 1 (by up to {weight_error:.2g})")
    for name, count in tally.seen.items():
        if count:
            result.differences[name], result.seen[name] = tally.edges[name][1].what, count
    result.checked = tally.draws
    result.passed, result.reason = not reasons, "; ".join(reasons)


def self_check(layouts: Iterable[str] = tuple(LAYOUTS), num_envs: Iterable[int] = (1, 8),
               peers: Iterable[str] = PEERS, seed: int = 0, draws: int | None = None, device: str = "cpu",
               progress: bool = False) -> list[CheckResult]:  # fmt: skip
    """:func:`check_contender` for every contender of every (layout, N) cell, as
    :func:`prioritylab.bench.replay.run` would build them.

    A contender whose check raises fails with the error as its reason.  Within a cell, a
    prioritized contender whose batches are stratified where ``prioritylab per``'s are
    independent, or the reverse, gets that as a named difference (``"batches"``).
    """
    from tqdm.auto import tqdm

    peers, num_envs, out = list(peers), list(num_envs), []
    cells = [(name, n) for name in layouts for n in num_envs]
    with tqdm(total=len(cells) * (4 + len(peers)), disable=not progress, desc="self-check", unit="check") as bar:
        for name, n in cells:
            layout = LAYOUTS[name]
            cell = []
            for who, make in makers(check_layout(layout), n, peers, device):
                bar.set_postfix_str(f"{name}, N={n}: {who}")
                try:
                    res = check_contender(make, layout, n, seed=seed, draws=draws)
                except Exception as err:  # a peer's own error: reported as this contender's failure
                    first = (str(err).splitlines() or [""])[0]
                    res = CheckResult(who, name, n, "?", passed=False, reason=f"raised {type(err).__name__}: {first}")
                cell.append(res)
                bar.update(1)
            ours = next((r for r in cell if r.contender == "prioritylab per" and r.batches), None)
            for r in cell:
                if ours is not None and r.kind == "per" and r.batches and r.batches != ours.batches:
                    r.differences["batches"] = (f"draws the rows of a batch {_BATCH_WORDS[r.batches]} (prioritylab "
                                                f"per: {_BATCH_WORDS[ours.batches]}; dispersion {r.dispersion:.2f} "
                                                f"against {ours.dispersion:.2f})")  # fmt: skip
            out += cell
    return out


_BATCH_WORDS = {"independent": "independently", "stratified": f"one from each of {BATCH} equal slices of the "
                "total priority"}  # fmt: skip


def format_checks(checks: list[CheckResult]) -> str:
    """The self-check, one line a contender and cell, then each failure's reason and each named difference."""
    head = (f"{'layout':<7} {'N':>2} {'contender':<28} {'check':<6} {'rows':>5} {'draws':>8} {'G':>8} {'dof':>4} "
            f"{'p':>8} {'|w err|':>8} {'batches':<11}")  # fmt: skip
    title = (f"self-check: fields of every drawn row, frequencies against priority^{ALPHA} / sum (uniform: "
             f"1 / rows; G test, fails at p <= {CHECK_LEVEL:g}), IS weights (beta {BETA})")  # fmt: skip
    lines = [title, head, "-" * len(head)]
    for r in checks:
        g = "" if r.g is None else f"{r.g:,.0f}"
        p = "" if r.p_value is None else f"{r.p_value:.3f}"
        w = "" if r.weight_error is None else f"{r.weight_error:.1e}"
        lines.append(f"{r.layout:<7} {r.num_envs:>2} {r.contender:<28} {'ok' if r.passed else 'FAILED':<6} "
                     f"{r.rows:>5} {r.draws:>8,} {g:>8} {r.dof:>4} {p:>8} {w:>8} {r.batches:<11}")  # fmt: skip
    for r in checks:
        if not r.passed:
            lines.append(f"{r.contender} ({r.layout}, N={r.num_envs}) FAILED its self-check, no ratio: {r.reason}")
    differences: dict[tuple[str, str], list] = {}  # (contender, name) -> [what, cells]
    for r in checks:
        for name, what in r.differences.items():
            seen = f": {r.seen[name]:,} of {r.checked:,} draws" if name in r.seen else ""
            differences.setdefault((r.contender, name), [what, []])[1].append(f"{r.layout} N={r.num_envs}{seen}")
    for (who, name), (what, cells) in differences.items():
        lines.append(f"{who} differs ({name}): {what} [{', '.join(cells)}]")
    return "\n".join(lines)
