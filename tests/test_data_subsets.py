"""The suite needs nothing outside the repository: its data is tests/data, with licences and origins.

A clone has no ``../shared`` beside it; a test that reads one passes on the team's machines and
fails (or skips) for everyone else. These checks keep it that way.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.data.make_subsets import CUTS
from tests.shared_data import TEST_DATA, data_dir, data_rows

TESTS = Path(__file__).resolve().parent
#: What reaching outside the repository looks like in a test's code (a path in a string, not prose).
OUTSIDE = re.compile(r"shared_path\(|shared_dir\(|[\"']/work/shared|[\"']\.\./shared|VENTANA_SHARED")


def test_tests_read_the_subsets_in_the_repository() -> None:
    assert data_dir() == TEST_DATA


def test_every_subset_is_there_with_its_licence_and_its_origin() -> None:
    readme = (TEST_DATA / "README.md").read_text(encoding="utf-8")
    for name, _cut, licences in CUTS:
        assert data_rows(name), name
        assert f"`{name}`" in readme, f"{name} has no line in tests/data/README.md"
        for licence in licences:
            assert (TEST_DATA / licence).is_file(), licence
    assert (TEST_DATA / "specs" / "openai-openapi.json").is_file()
    assert (TEST_DATA / "specs" / "openai-openapi.LICENSE").is_file()


def test_no_test_reads_the_shared_folder() -> None:
    allowed = {TESTS / "shared_data.py", TESTS / "data" / "make_subsets.py", Path(__file__).resolve()}
    offenders = [
        f"{path.relative_to(TESTS)}:{n}"
        for path in sorted(TESTS.rglob("*.py"))
        if path not in allowed
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if OUTSIDE.search(line)
    ]
    assert offenders == [], "tests must read tests/data (tests.shared_data.data_rows / data_path), not shared/"
