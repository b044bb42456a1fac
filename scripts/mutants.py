"""Mutation check of the core maths: ``make mutants`` (not part of the default test run).

Each mutant below is one exact text replacement in one file, with the test files that
should catch it.  The script copies the repository to a temporary folder, runs the listed
tests once unmutated (they must pass), then applies the mutants one at a time, runs only
their tests (one pytest process, a fresh Numba cache folder per mutant, no bytecode files)
and prints mutant -> killed/survived -> the first failing test.

Exit status: 0 if every mutant is killed; 1 if any survives, if the unmutated tests fail,
or if a mutant's target text is not found exactly once (so the list follows the code).

    python scripts/mutants.py [--only NAME ...] [--list] [--timeout SECONDS]
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from prioritylab._cli import Parser

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the repository root
    old: str  # must occur exactly once in the file
    new: str
    tests: tuple[str, ...]


SUMTREE_TESTS = ("tests/test_sumtree.py",)
SAMPLER_TESTS = ("tests/test_samplers.py", "tests/test_sampler_distributions.py")
TESTBED_TESTS = ("tests/test_cliffwalk_learners.py",)
PROTOCOL_TESTS = ("tests/test_sampler_protocol.py",)
REPLAY_TESTS = ("tests/test_replay.py",)
AGENT_TESTS = ("tests/test_agents_continuous.py",)
TARGET_TESTS = ("tests/test_targets.py",)
FUZZ_TESTS = ("tests/test_state_fuzz.py",)
FUSED_TESTS = ("tests/test_fused_paths.py",)
FUSED_CHECKS = SAMPLER_TESTS + FUZZ_TESTS + FUSED_TESTS
DIAGNOSTICS_TESTS = ("tests/test_diagnostics.py",)
POLICY_TESTS = ("tests/test_policies.py",)
RUN_TESTS = ("tests/test_run_integrity.py::test_a_damaged_evaluations_file_is_written_back_from_the_checkpoint_and_the_"
             "run_finishes_as_uninterrupted",)  # fmt: skip

# (name, file, exact old text, new text, tests to run)
MUTANTS = [
    Mutant(*m)
    for m in [
        # -- sum tree ------------------------------------------------------------------------------
        ("tree_update: leaf written one slot to the right", "prioritylab/sumtree.py",
         "        tree[leaf0 + indices[i]] = values[i]\n", "        tree[leaf0 + indices[i] + 1] = values[i]\n",
         SUMTREE_TESTS),
        ("tree_update: ancestor index shifted by one bit per level", "prioritylab/sumtree.py",
         "        shift += _FANOUT_BITS\n", "        shift += 1\n", SUMTREE_TESTS),
        ("tree_update: parent sums its first three children only", "prioritylab/sumtree.py",
         "        for j in range(FANOUT):\n            s += t[first + np.uint64(j)]\n",
         "        for j in range(FANOUT - 1):\n            s += t[first + np.uint64(j)]\n", SUMTREE_TESTS),
        ("tree_set: path refresh reads the wrong children", "prioritylab/sumtree.py",
         "        first = np.uint64(parent * FANOUT + 1)  # unsigned, as in _child\n",
         "        first = np.uint64(parent * FANOUT)  # unsigned, as in _child\n", SUMTREE_TESTS),
        ("min tree keeps maxima", "prioritylab/sumtree.py",
         "        e = max(e, v) if is_max else min(e, v)\n", "        e = max(e, v)\n", SUMTREE_TESTS),
        ("descend: remainder not reduced by the left siblings' mass", "prioritylab/sumtree.py",
         "    return first + c, v - prev\n", "    return first + c, v\n", SUMTREE_TESTS),
        ("sorted descend: merged level keeps the whole query value", "prioritylab/sumtree.py",
         "            values[q] = v - below\n", "            values[q] = v\n", SUMTREE_TESTS),
        ("tree_sample_one: draws below the first child's mass only", "prioritylab/sumtree.py",
         "    v = rng.random() * tree[0]\n", "    v = rng.random() * tree[1]\n", SUMTREE_TESTS + TESTBED_TESTS),
        # -- samplers ------------------------------------------------------------------------------
        ("stratified segment width total / (k + 1)", "prioritylab/sumtree.py",
         "        seg = total / k\n", "        seg = total / (k + 1)\n", SUMTREE_TESTS + SAMPLER_TESTS),
        ("IS weights normalised by the batch's largest weight, not the global one", "prioritylab/sumtree.py",
         "    log_ref = np.log(norm_mass) if norm_mass > 0.0 else np.inf\n",
         "    log_ref = np.inf\n    norm_mass = 0.0\n", SAMPLER_TESTS),
        ("alpha applied twice on the update path", "prioritylab/samplers/kernels.py",
         "        x = mass_of(r, alpha)\n", "        x = mass_of(mass_of(r, alpha), alpha)\n",
         SAMPLER_TESTS + PROTOCOL_TESTS + FUSED_TESTS),
        ("alpha applied twice to new items", "prioritylab/samplers/priority.py",
         "        return raw, masses_of(raw, self.alpha)",
         "        return raw, masses_of(masses_of(raw, self.alpha), self.alpha)",
         SAMPLER_TESTS + PROTOCOL_TESTS),
        ("PER eq. 1 drops eps", "prioritylab/priorities.py",
         "    return abs(delta) + eps\n", "    return abs(delta)\n", SAMPLER_TESTS),
        ("PER sampler passes no eps to its rule", "prioritylab/samplers/per.py",
         "        self._rule_param = self.eps\n", "        self._rule_param = 0.0\n", SAMPLER_TESTS),
        ("LAP eq. 9 drops the kappa floor", "prioritylab/priorities.py",
         "    return max(abs(delta), kappa)\n", "    return abs(delta)\n", SAMPLER_TESTS),
        ("LAP sampler passes no kappa to its rule", "prioritylab/samplers/lap.py",
         "        self._rule_param = self.kappa\n", "        self._rule_param = 0.0\n", SAMPLER_TESTS),
        ("global IS weights (rank) normalised by the batch maximum", "prioritylab/samplers/priority.py",
         "    ref = logp.min() if min_prob is None else np.log(min_prob)\n", "    ref = logp.min()\n", SAMPLER_TESTS),
        ("rank, uniform within segment: lower bounds shifted by one rank", "prioritylab/samplers/rank.py",
         "            lo = np.minimum(edges[:-1], n - 1)\n", "            lo = np.minimum(edges[:-1] + 1, n - 1)\n",
         SAMPLER_TESTS),
        ("rank, uniform within segment: a rank counted in the first segment holding it only",
         "prioritylab/samplers/rank.py", "        return mass[last] - mass[first]\n",
         "        return mass[first + 1] - mass[first]\n", SAMPLER_TESTS),
        ("rank, uniform within segment: global normaliser from one segment's share",
         "prioritylab/samplers/rank.py", "            least = float(self._marginal(lo, hi, mass, starts).min())\n",
         "            least = float(np.diff(mass).min())\n", SAMPLER_TESTS),
        ("rank, exact within segment: segment width total / (k + 1)", "prioritylab/samplers/rank.py",
         "            target = (np.arange(k) + u) * (total / k)\n",
         "            target = (np.arange(k) + u) * (total / (k + 1))\n", SAMPLER_TESTS),
        ("rank: smallest probability taken at rank 1", "prioritylab/samplers/rank.py",
         "self._rank_mass[n - 1] / total\n", "self._rank_mass[0] / total\n", SAMPLER_TESTS),
        ("PSER decay starts one power of rho lower", "prioritylab/priorities.py",
         "    decayed = raw[t]\n", "    decayed = raw[t] * rho\n", SAMPLER_TESTS + ("tests/test_replay.py",)),
        ("PSER window one step short", "prioritylab/priorities.py",
         "    for _ in range(window):\n", "    for _ in range(window - 1):\n",
         SAMPLER_TESTS + ("tests/test_replay.py",)),
        ("PSER decay crosses the episode start (links of one stream)", "prioritylab/samplers/bookkeeping.py",
         "                links[starts] = -1\n", "                pass\n",
         SAMPLER_TESTS + ("tests/test_replay.py",)),
        ("PSER eq. 10 with eta = 1", "prioritylab/priorities.py",
         "    return max(base, eta * p_old)\n", "    return max(base, p_old)\n",
         SAMPLER_TESTS + ("tests/test_replay.py",)),
        ("PSER applies eq. 10 to every copy of a slot drawn twice", "prioritylab/samplers/pser.py",
         "        if once and scratch[t] != i:\n", "        if once and scratch[t] < 0:\n",
         SAMPLER_TESTS),
        ("PSER eq. 7 (ADD) without its cap at the largest priority", "prioritylab/priorities.py",
         "min(old + decayed, p_max) if add_mode", "(old + decayed) if add_mode", ("tests/test_samplers.py",)),
        ("PSER eq. 7 (ADD) capped at the new priority, not the largest", "prioritylab/priorities.py",
         "min(old + decayed, p_max) if add_mode", "min(old + decayed, raw[t]) if add_mode",
         ("tests/test_samplers.py",)),
        ("rank: the heap never re-sorts itself (sort_every ignored)", "prioritylab/samplers/rank.py",
         "        if self._since_sort >= self.sort_every:\n", "        if False:\n", ("tests/test_samplers.py",)),
        ("PSER window rounds up", "prioritylab/samplers/pser.py",
         "int(math.floor(math.log(threshold) / math.log(rho)))", "int(math.ceil(math.log(threshold) / math.log(rho)))",
         SAMPLER_TESTS),
        # -- losses --------------------------------------------------------------------------------
        ("PAL large branch without kappa", "prioritylab/losses.py",
         "k * np.power(ad, 1.0 + a) / (1.0 + a)", "np.power(ad, 1.0 + a) / (1.0 + a)", ("tests/test_losses.py",)),
        ("PAL large-branch gradient without kappa", "prioritylab/losses.py",
         "k * np.power(ad, a) * np.sign(d)", "np.power(ad, a) * np.sign(d)", ("tests/test_losses.py",)),
        ("Huber linear branch without its kappa factor", "prioritylab/losses.py",
         "k * (a - 0.5 * k))", "(a - 0.5 * k))", ("tests/test_losses.py",)),
        ("Huber switches at 1 whatever kappa", "prioritylab/losses.py",
         "    small = a <= k\n", "    small = a <= 1.0\n", ("tests/test_losses.py",)),
        ("PER's eta takes 0^(alpha beta) as computed, 1 where the product underflows", "prioritylab/losses.py",
         "    if p_min == 0.0 and alpha > 0.0 and beta > 0.0:\n", "    if False:\n",
         ("tests/test_losses.py", "tests/test_equivalence.py")),
        # -- testbed -------------------------------------------------------------------------------
        ("testbed PER priority drops eps", "prioritylab/cliffwalk/learners.py",
         "        return raw_priority(PER_RULE, abs_delta, cfg.eps)\n",
         "        return raw_priority(PER_RULE, abs_delta, 0.0)\n",
         TESTBED_TESTS),
        ("testbed LAP priority drops the kappa floor", "prioritylab/cliffwalk/learners.py",
         "        return raw_priority(LAP_RULE, abs_delta, cfg.kappa)\n",
         "        return abs(abs_delta)\n", TESTBED_TESTS),
        ("testbed PSER decay crosses episode starts", "prioritylab/priorities.py",
         "    prev = np.where(starts, -1, generation - 1).astype(np.int64)\n",
         "    prev = np.where(generation == 0, -1, generation - 1).astype(np.int64)\n", TESTBED_TESTS),
        ("testbed IS normaliser takes a zero mass", "prioritylab/cliffwalk/learners.py",
         "        tmin[leaf0 + i] = mass if mass > 0.0 else np.inf\n", "        tmin[leaf0 + i] = mass\n",
         TESTBED_TESTS),
        ("testbed PSER eq. 10 with eta = 1", "prioritylab/cliffwalk/learners.py",
         "                p = pser_anti_collapse(p, cfg.eta, raw[i])",
         "                p = pser_anti_collapse(p, 1.0, raw[i])",
         TESTBED_TESTS),
        ("testbed rank CDF exponent x 1.1", "prioritylab/cliffwalk/structures.py",
         "dtype=np.float64) ** -float(alpha))", "dtype=np.float64) ** -(1.1 * float(alpha)))", TESTBED_TESTS),
        ("argmax tree: ties go to the right", "prioritylab/cliffwalk/structures.py",
         "    return y if key[y] > key[x] else x\n", "    return y if key[y] >= key[x] else x\n", TESTBED_TESTS),
        ("argmax tree: repair starts one level too high", "prioritylab/cliffwalk/structures.py",
         "    node = (leaves + slot) // 2\n", "    node = (leaves + slot) // 4\n", TESTBED_TESTS),
        # -- replay and agents -----------------------------------------------------------------------
        ("n-step: no terminal mask (bootstraps through a termination)", "prioritylab/replay/kernels.py",
         "        disc[b] = 0.0 if done else scale\n", "        disc[b] = scale\n", REPLAY_TESTS),
        ("n-step: gamma zeroed on truncation", "prioritylab/replay/kernels.py",
         "            if truncated[q]:\n                break",
         "            if truncated[q]:\n                done = True\n                break",
         REPLAY_TESTS),
        ("frame stack reads across the episode start", "prioritylab/replay/kernels.py",
         "            back = min(stack - 1 - j, es)\n", "            back = stack - 1 - j\n", REPLAY_TESTS),
        ("TD3: no target-network delay (targets copy the online networks)", "prioritylab/deep/td3.py",
         "            polyak(self.critic_target, self.critic, cfg.tau)\n",
         "            polyak(self.critic_target, self.critic, 1.0)\n", AGENT_TESTS),
        ("TD3: target ignores the discount", "prioritylab/deep/td3.py",
         "            target = batch.reward + batch.discount * q_next\n",
         "            target = batch.reward + q_next\n",
         AGENT_TESTS),
        ("TD3: actor updated at every critic update", "prioritylab/deep/td3.py",
         "        if self.updates % cfg.policy_freq == 0:\n", "        if True:\n", AGENT_TESTS),
        ("SAC: target without the entropy term", "prioritylab/deep/sac.py",
         "min(0).values - temp * next_logp\n", "min(0).values\n", AGENT_TESTS),
        ("TD3: twin maximum instead of minimum in the target", "prioritylab/deep/td3.py",
         "q_next = self.critic_target(batch.next_obs, next_action).min(0)",
         "q_next = self.critic_target(batch.next_obs, next_action).max(0)", TARGET_TESTS),
        ("TD3: smoothing noise not clipped", "prioritylab/deep/td3.py",
         ".clamp(-cfg.noise_clip, cfg.noise_clip) * self.half", " * self.half", TARGET_TESTS),
        ("TD3: smoothing noise not scaled by the action half-width", "prioritylab/deep/td3.py",
         "cfg.noise_clip) * self.half", "cfg.noise_clip)", TARGET_TESTS),
        ("TD3: next action clamped below at -high", "prioritylab/deep/td3.py",
         "+ smooth, self.high), self.low)", "+ smooth, self.high), -self.high)", TARGET_TESTS),
        ("SAC: entropy term added in the target", "prioritylab/deep/sac.py",
         "min(0).values - temp * next_logp\n", "min(0).values + temp * next_logp\n", TARGET_TESTS),
        ("DQN: reward not clipped in the target", "prioritylab/deep/dqn.py",
         "batch.reward.clamp(-1.0, 1.0) if self.cfg.clip_reward", "batch.reward if self.cfg.clip_reward",
         TARGET_TESTS),
        ("Double DQN: the target network picks the next action", "prioritylab/deep/dqn.py",
         "best = self.q(next_obs).argmax(1, keepdim=True)", "best = self.target(next_obs).argmax(1, keepdim=True)",
         TARGET_TESTS),
        ("DQN evaluates at the training epsilon", "prioritylab/deep/dqn.py",
         "(self.cfg.eval_eps, self.eval_rng)", "(self.epsilon(), self.eval_rng)", POLICY_TESTS),
        ("TD3 evaluates with exploration noise", "prioritylab/deep/td3.py",
         "        if explore:\n", "        if True:\n", POLICY_TESTS),
        ("SAC evaluates a sampled action", "prioritylab/deep/sac.py",
         "deterministic=not explore", "deterministic=False", POLICY_TESTS),
        ("critics step up their loss", "prioritylab/deep/continuous.py",
         "    loss.backward()\n", "    (-loss).backward()\n", POLICY_TESTS),
        ("TD3: the actor lowers Q_1", "prioritylab/deep/td3.py",
         "actor_loss = -self.critic.frozen(", "actor_loss = self.critic.frozen(", POLICY_TESTS),
        ("SAC: the actor lowers Q", "prioritylab/deep/sac.py",
         "(temp * logp - self.critic", "(temp * logp + self.critic", POLICY_TESTS),
        ("SAC: the temperature moves away from its target entropy", "prioritylab/deep/sac.py",
         "temp_loss = -(self.log_temp", "temp_loss = (self.log_temp", POLICY_TESTS),
        ("IS exponent reaches 1 at twice the run's length", "prioritylab/deep/methods.py",
         "LinearSchedule(self.beta0, self.beta_end, total_steps)",
         "LinearSchedule(self.beta0, self.beta_end, 2 * total_steps)",
         POLICY_TESTS),
        ("DQN anneals its IS exponent (PSER Table 4 keeps it)", "prioritylab/deep/dqn.py",
         "per_beta0=0.5, per_beta_end=None)", "per_beta0=0.5)", POLICY_TESTS),
        ("Numba's cache not refreshed after a kernel edit", "prioritylab/__init__.py",
         "_kernel_cache.refresh(tree_update)\n", "pass\n", ("tests/test_kernel_cache.py",)),
        ("the report's IQM is the mean", "prioritylab/harness/report/stats.py",
         "np.array([iqm(scores),", "np.array([metrics.aggregate_mean(scores),",
         ("tests/test_report.py::test_the_iqm_is_the_interquartile_mean_of_the_runs_not_their_mean_or_median",)),
        ("the report's IQM sorts where SciPy partitions (a last-bit difference)", "prioritylab/harness/report/stats.py",
         "np.partition(a, (low, high - 1))[low:high]", "np.sort(a)[low:high]",
         ("tests/test_report.py::test_the_iqm_gives_rliables_bits",)),
        ("the batched bootstrap's IQM sorts where SciPy partitions", "prioritylab/harness/report/stats.py",
         "np.partition(flat, (low, high - 1), axis=1)[:, low:high]", "np.sort(flat, axis=1)[:, low:high]",
         ("tests/test_report.py::test_the_batched_statistics_are_each_matrixs_to_the_bit",)),
        ("the profile band counts scores at a threshold as above it", "prioritylab/harness/report/plots.py",
         "np.mean(batch[:, None, :, :] > np.asarray(taus)", "np.mean(batch[:, None, :, :] >= np.asarray(taus)",
         ("tests/test_report.py::test_the_performance_profiles_bands_are_rliables_to_the_bit",)),
        ("the batched bootstrap gives X the resamples drawn for Y", "prioritylab/harness/report/stats.py",
         "a[index[:, i], column]", "a[index[:, -1 - i], column]",
         ("tests/test_report.py::test_the_batched_bootstrap_gives_rliables_intervals_to_the_bit",)),
        ("PAL: lambda from the first critic only", "prioritylab/deep/method_table.py",
         "L.pal_lambda(delta.detach().abs().amax(0),", "L.pal_lambda(delta.detach()[0].abs(),", AGENT_TESTS),
        # -- fused sampler kernels ------------------------------------------------------------------
        ("fused add: sampleable count ignores the overwritten slot's flag", "prioritylab/samplers/fused.py",
         "        delta += np.int64(flag) - np.int64(sampleable[j])\n", "        delta += np.int64(flag)\n",
         FUSED_CHECKS),
        ("fused add: a link to a never-written slot is accepted", "prioritylab/samplers/fused.py",
         "            if g < 0:\n                bad = i\n", "            if False:\n                bad = i\n",
         FUSED_CHECKS),
        ("fused add: an overwritten slot is listed twice among the filled slots", "prioritylab/samplers/fused.py",
         "        if generation[j] < 0:\n            filled[size] = j\n",
         "        if True:\n            filled[size] = j\n", FUSED_CHECKS),
        ("fused add: a held item enters the min tree", "prioritylab/samplers/fused.py",
         "mass if flag and mass > 0.0 else np.inf", "mass if mass > 0.0 else np.inf", FUSED_CHECKS),
        ("fused flags: a held slot keeps its mass in the sum tree", "prioritylab/samplers/fused.py",
         "            tree[leaf0 + j] = m if sampleable[j] else 0.0\n", "            tree[leaf0 + j] = m\n",
         FUSED_CHECKS),
        ("fused update: stale items are written", "prioritylab/samplers/fused.py",
         "        fresh[i] = not use_gen or generation[j] == generations[i]\n", "        fresh[i] = True\n",
         FUSED_CHECKS),
        ("fused update: the largest raw priority is the last one", "prioritylab/samplers/fused.py",
         "            top = max(top, r)\n", "            top = r\n", FUSED_CHECKS),
        ("fused update: the overflow bound counts one item", "prioritylab/samplers/fused.py",
         "    if tree.shape[0] > 0 and past_safe_total(tree[0], m, span, top_mass):\n",
         "    if tree.shape[0] > 0 and past_safe_total(tree[0], 1, 0, top_mass):\n", FUSED_CHECKS),
        ("the overflow bound leaves out the slots each item raises", "prioritylab/samplers/kernels.py",
         "    return not total + n * (1 + span) * top < SAFE_TOTAL\n", "    return not total + n * top < SAFE_TOTAL\n",
         FUSED_CHECKS + SAMPLER_TESTS),
        ("fused draw: held slots are not counted (never redrawn)", "prioritylab/samplers/fused.py",
         "        held += not sampleable[idx[i]]\n", "        held += 0\n",
         FUSED_CHECKS + REPLAY_TESTS),
        ("the buffer's overflow guard leaves out PSER's decay", "prioritylab/samplers/priority.py",
         "            top = SAFE_TOTAL / (2.0 * (self.capacity + n * (1 + self._decay_span)))\n",
         "            top = SAFE_TOTAL / (2.0 * (self.capacity + n))\n", SAMPLER_TESTS),
        ("the buffer never guards a write", "prioritylab/replay/buffer.py",
         "        if self.sampler.may_overflow(self.capacity):\n            self._whole_or_undone(self._write,",
         "        if False:\n            self._whole_or_undone(self._write,", REPLAY_TESTS),
        ("an undone write goes through the loader's checks", "prioritylab/replay/buffer.py",
         "            self._restore(before)\n", "            self.load_state_dict(before)\n", DIAGNOSTICS_TESTS),
        ("the diagnostics' std is a number past the float range", "prioritylab/replay/diagnostics.py",
         "        if math.isinf(self.s2):\n            return mean, math.inf\n", "", DIAGNOSTICS_TESTS),
        ("a resume keeps the files' rows over the checkpoint's", "prioritylab/deep/run.py",
         "        out.append(recorded)\n", "        out.append(on_disk if on_disk is not None else recorded)\n",
         RUN_TESTS),
    ]
]  # fmt: skip


def check_targets(mutants) -> list[str]:
    """Mutants whose target text is not found exactly once in the current sources."""
    problems = []
    for m in mutants:
        count = (ROOT / m.path).read_text().count(m.old)
        if count != 1:
            problems.append(f"{m.name}: target found {count} times in {m.path}")
    return problems


def copy_repository(dest: Path) -> None:
    ignore = shutil.ignore_patterns(".git", ".venv", "results", "__pycache__", "*.nbi", "*.nbc", "*.egg-info")
    shutil.copytree(ROOT, dest, ignore=ignore)


def run_tests(copy: Path, tests, timeout: float) -> tuple[str, str, float]:
    """(outcome, first failing test or message, seconds) of one pytest process in ``copy``."""
    with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache:
        env = {**os.environ, "PYTHONPATH": str(copy), "NUMBA_CACHE_DIR": cache, "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("HYPOTHESIS_PROFILE", None)  # the derandomized default profile
        cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-rfE", "-p", "no:cacheprovider", *tests]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "timeout", f"no result within {timeout:.0f} s", time.perf_counter() - t0
    seconds = time.perf_counter() - t0
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", proc.stdout, flags=re.M)
    if proc.returncode == 0:
        return "passed", "", seconds
    if proc.returncode == 1 and failed:
        return "failed", failed[0], seconds
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]
    return f"error (exit {proc.returncode})", failed[0] if failed else tail[0], seconds


def main(argv=None) -> int:
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", default=None, help="run only mutants whose name contains one of these")
    p.add_argument("--list", action="store_true", help="list the mutants and check their targets, run nothing")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds allowed per pytest run")
    args = p.parse_args(argv)
    if not (math.isfinite(args.timeout) and args.timeout > 0):  # nan never times out, inf waits for ever
        p.error(f"--timeout must be a finite number of seconds above 0, got {args.timeout}")
    for pattern in args.only or ():  # one that matches nothing would list nothing, or run the tests for nothing
        if not any(pattern in m.name for m in MUTANTS):
            p.error(f"--only {pattern} matches no mutant (--list names them)")
    mutants = MUTANTS if args.only is None else [m for m in MUTANTS if any(s in m.name for s in args.only)]
    problems = check_targets(MUTANTS)
    for line in problems:
        print(f"OUT OF SYNC  {line}")
    if args.list:
        for m in mutants:
            print(f"{m.name}  [{m.path}]  -> {' '.join(m.tests)}")
        return 1 if problems else 0
    if problems:
        return 1
    rows = []
    with tempfile.TemporaryDirectory(prefix="prioritylab-mutants-") as tmp:
        copy = Path(tmp) / "repo"
        copy_repository(copy)
        env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
        where = subprocess.run([sys.executable, "-c", "import prioritylab; print(prioritylab.__file__)"], cwd=copy,
                               env=env, capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        if not Path(where).resolve().is_relative_to(copy.resolve()):
            print(f"the copy's tests would import prioritylab from {where}, not from {copy}")
            return 1
        all_tests = sorted({t for m in mutants for t in m.tests})
        outcome, detail, seconds = run_tests(copy, all_tests, args.timeout)
        print(f"unmutated: {outcome} in {seconds:.0f} s {detail}", flush=True)
        if outcome != "passed":
            return 1
        for m in mutants:
            target = copy / m.path
            original = target.read_text()
            target.write_text(original.replace(m.old, m.new, 1))
            try:
                outcome, detail, seconds = run_tests(copy, m.tests, args.timeout)
            finally:
                target.write_text(original)
            status = "survived" if outcome == "passed" else "killed"
            rows.append((m.name, status, outcome, detail, seconds))
            print(f"{status:8s}  {m.name}  ({outcome}, {seconds:.0f} s)  {detail}", flush=True)
    width = max(len(r[0]) for r in rows)
    print(f"\n{'mutant'.ljust(width)}  status    killed by")
    for name, status, outcome, detail, _ in rows:
        by = detail if outcome == "failed" else f"{outcome}: {detail}"
        print(f"{name.ljust(width)}  {status:8s}  {by if status == 'killed' else ''}")
    survivors = [r for r in rows if r[1] == "survived"]
    print(f"\n{len(rows) - len(survivors)} of {len(rows)} killed")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
