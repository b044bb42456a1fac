"""Shared test settings: Hypothesis profiles, and the report's bootstrap size.

* ``ci`` (default): 40 examples per property, derandomized, so every run (and CI) checks the same
  examples and a failure reproduces exactly.
* ``dev`` (``HYPOTHESIS_PROFILE=dev``): 2,000 examples per property from a random seed, to search
  further; Hypothesis prints the seed and the failing example of any failure.

``prioritylab report`` draws 50,000 stratified-bootstrap replications per interval (2,000 for the performance
profiles); its tests draw 100 (20): they check what the report computes from which runs, and that it is
reproducible, not the precision of an interval, and the bootstrap was most of their time.  For the same reason
the report's figures are built in every test but rendered to PNG only in those marked ``figures`` (one or more for
each kind of figure).

Stable-Baselines3's ``learn()`` makes a log folder for every call, in the system's temporary folder unless
``SB3_LOGDIR`` names one: the suite points it into pytest's own temporary folder, which pytest prunes.

``make test`` runs the suite on every core (pytest-xdist, ``--dist loadgroup``). A module- or session-wide
fixture is built once per worker that needs it, so the tests sharing one (the quick demo, a trained run) are kept
on one worker: :func:`pytest_collection_modifyitems` puts them in an ``xdist_group`` named after the fixture.
"""

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
settings.register_profile("dev", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups on each worker
def pytest_collection_modifyitems(items):
    """Group each test by the first shared fixture of the suite's own (module or session scope, not autouse) it
    asks for; pytest's own fixtures (baseid "") are not the suite's."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        for name in getattr(info, "names_closure", ()):
            defs = info.name2fixturedefs.get(name) or ()
            shared = defs and defs[-1].baseid and defs[-1].scope in ("module", "session")
            if shared and not getattr(defs[-1], "_autouse", False):
                owner = "" if defs[-1].scope == "session" else item.module.__name__ + "."
                item.add_marker(pytest.mark.xdist_group(owner + name))
                break


@pytest.fixture(autouse=True)
def _report_figures_drawn_only_where_asked(request, monkeypatch):
    """Rendering a report's PNG files (matplotlib's draw, twice for the tight bounding box) was most of the report
    tests' time.  A test marked ``figures`` saves them as the report does; every other test still builds each
    figure, but writes a short placeholder in place of its PNG (the file, its name and the manifest's list stay)."""
    if request.node.get_closest_marker("figures"):
        return
    from prioritylab.harness.report import plots

    def placeholder(fig, path):
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"figure built, not rendered: see tests/conftest.py")

    monkeypatch.setattr(plots, "save_figure", placeholder)


@pytest.fixture(autouse=True)
def _small_report_bootstrap(monkeypatch):
    from prioritylab.harness.report import plots, stats

    monkeypatch.setattr(stats, "BOOTSTRAP_REPS", 100)
    monkeypatch.setattr(plots, "PROFILE_REPS", 20)


@pytest.fixture(autouse=True, scope="session")
def _sb3_logs_in_the_tests_own_folder(tmp_path_factory):
    previous = os.environ.get("SB3_LOGDIR")
    os.environ["SB3_LOGDIR"] = str(tmp_path_factory.mktemp("sb3-logs"))
    yield
    if previous is None:
        os.environ.pop("SB3_LOGDIR", None)
    else:
        os.environ["SB3_LOGDIR"] = previous


class QuickDemo:
    """``make demo``'s smoke run, ``python -m prioritylab.demo --quick``: its folder, printed output and exit code."""

    def __init__(self, out, text: str, code: int):
        self.out, self.text, self.code = out, text, code

    def printed(self, script: str) -> str:
        """What ``script`` (``per_fig1.py``) printed, as the demo relays it whole."""
        return self.text.split(f"[demo] ---- {script} ----\n", 1)[1].split("\n[demo] ", 1)[0]


@pytest.fixture(scope="session")
def quick_demo(tmp_path_factory) -> QuickDemo:
    """The demo's smoke run, once a session: every theory script's ``--quick`` run (each in a process of its own)
    beside the deep half.  The demo's test and the scripts' ``--quick`` tests read their results from it, so
    that no script runs its smoke settings twice in a session."""
    import contextlib
    import io

    from prioritylab import demo

    out, text = tmp_path_factory.mktemp("quick-demo"), io.StringIO()
    with contextlib.redirect_stdout(text):
        code = demo.main(["--out", str(out), "--quick"])
    return QuickDemo(out, text.getvalue(), code)
