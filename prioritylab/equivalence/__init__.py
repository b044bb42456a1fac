"""Numerical checks of the loss <-> sampling equivalence (Fujimoto, Meger & Precup, 2020).

The maths behind ``theory/lap_equivalence.py`` and the equivalence tests, one
module per kind of check:

* :mod:`.common`: the :class:`Check` record, deviations and their tolerance
  (how they are measured is argued there), data sets of TD errors, exact
  expectations under prioritylab's own PER and LAP samplers;
* :mod:`.exact`: Theorems 1-3, Corollaries 1-3, Observations 1-4 and identity
  cases, exactly (every item summed, no sampling noise) on one data set;
* :mod:`.monte_carlo`: sample means of the real samplers' draws against the exact
  expectations (Bernstein radius, ``1/sqrt(M)`` rate);
* :mod:`.gradients`: parameter gradients of a small torch Q-network (torch is
  imported inside its functions only, so this package imports without torch);
* :mod:`.cliffwalk_steps`: expected tabular updates at every step of a Blind
  Cliffwalk run;
* :mod:`.chain`: a stochastic final reward on the Blind Cliffwalk and the fixed
  points of each method's expected-update dynamics.

Every public name is re-exported here: ``from prioritylab import equivalence as
eq; eq.check_theorem1(...)``.
"""

from .chain import (
    CHAIN_TOL,
    LAP_HUBER,
    METHOD_NAMES,
    PER_POWER,
    UNIFORM_L1,
    UNIFORM_MSE,
    UNIFORM_PAL,
    UNIFORM_PER_EQ,
    ChainExperiment,
    ChainRun,
    certified_radius,
    chain_experiment,
    chain_prediction,
    chain_run,
    expected_coefficients,
    pair_gradient,
    run_expected_dynamics,
    skewed_rewards,
    stochastic_chain,
)
from .cliffwalk_steps import cliffwalk_stepwise, td_errors_table
from .common import (
    EXACT_TOL,
    UNIT_ROUNDOFF,
    Check,
    compare,
    deviation,
    filled_sampler,
    lap_probabilities,
    largest,
    merge_by_claim,
    per_distribution,
    per_expectation,
    random_td_errors,
    uniform_expectation,
    weighted_expectation,
    worst,
)
from .exact import (
    VariancePair,
    check_corollary1,
    check_corollary2,
    check_corollary3,
    check_lap_small,
    check_observation2,
    check_observation3,
    check_observation4,
    check_pal_alpha0,
    check_per_alpha0,
    check_theorem1,
    check_theorem2,
    check_theorem3,
    corollary1,
    corollary2_priority,
    exact_case,
    first_losses,
    gradient_variance,
    prioritised_pair,
    priority_lambda,
    theorem1_sides,
    variance_alternatives,
)
from .gradients import TorchProblem, param_grad, q_jacobian, torch_parameter_checks, torch_problem, torch_td_errors
from .monte_carlo import (
    MC_FAIL_PROB,
    PARTS,
    MonteCarloSetup,
    bernstein_radius,
    monte_carlo_convergence,
    monte_carlo_rate,
    monte_carlo_setup,
)

__all__ = [
    "CHAIN_TOL",
    "EXACT_TOL",
    "LAP_HUBER",
    "MC_FAIL_PROB",
    "METHOD_NAMES",
    "PER_POWER",
    "UNIFORM_L1",
    "UNIFORM_MSE",
    "UNIFORM_PAL",
    "UNIFORM_PER_EQ",
    "UNIT_ROUNDOFF",
    "ChainExperiment",
    "ChainRun",
    "Check",
    "MonteCarloSetup",
    "PARTS",
    "TorchProblem",
    "VariancePair",
    "bernstein_radius",
    "certified_radius",
    "chain_experiment",
    "chain_prediction",
    "chain_run",
    "check_corollary1",
    "check_corollary2",
    "check_corollary3",
    "check_lap_small",
    "check_observation2",
    "check_observation3",
    "check_observation4",
    "check_pal_alpha0",
    "check_per_alpha0",
    "check_theorem1",
    "check_theorem2",
    "check_theorem3",
    "cliffwalk_stepwise",
    "compare",
    "corollary1",
    "corollary2_priority",
    "deviation",
    "exact_case",
    "expected_coefficients",
    "filled_sampler",
    "first_losses",
    "gradient_variance",
    "lap_probabilities",
    "largest",
    "merge_by_claim",
    "monte_carlo_convergence",
    "monte_carlo_rate",
    "monte_carlo_setup",
    "pair_gradient",
    "param_grad",
    "per_distribution",
    "per_expectation",
    "prioritised_pair",
    "priority_lambda",
    "q_jacobian",
    "random_td_errors",
    "run_expected_dynamics",
    "skewed_rewards",
    "stochastic_chain",
    "td_errors_table",
    "theorem1_sides",
    "torch_parameter_checks",
    "torch_problem",
    "torch_td_errors",
    "uniform_expectation",
    "variance_alternatives",
    "weighted_expectation",
    "worst",
]
