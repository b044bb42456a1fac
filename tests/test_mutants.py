"""The mutation check's targets (scripts/mutants.py) stay in step with the code: each mutant's text is found
exactly once where it points, and the tests it names exist.  An edit that moves a target would otherwise stop
`make mutants` before any mutant ran."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _mutants_module():
    spec = importlib.util.spec_from_file_location("mutants_script", ROOT / "scripts" / "mutants.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_every_mutant_finds_its_target_once_and_names_existing_tests():
    m = _mutants_module()
    assert len(m.MUTANTS) >= 50
    assert m.check_targets(m.MUTANTS) == []
    for mutant in m.MUTANTS:
        assert mutant.old != mutant.new, mutant.name
        for test in mutant.tests:
            assert (ROOT / test.split("::")[0]).exists(), (mutant.name, test)
