"""Every folder that holds tests is one pytest collects: `make test` and CI run what `testpaths` names, and a
package left out would never run there."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_top_level_folder_with_tests_is_collected():
    collected = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["testpaths"])
    with_tests = {
        folder.name
        for folder in ROOT.iterdir()
        if folder.is_dir() and not folder.name.startswith(".") and any(folder.rglob("test_*.py"))
    }
    assert with_tests - collected == set()
