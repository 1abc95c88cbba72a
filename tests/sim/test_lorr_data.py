"""The LoRR instances ship in the repository, with their licence, and every instance is whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "lorr"
INSTANCES = sorted(DATA.glob("*/warehouse.domain/*.json"))


def test_licence_readme_and_the_named_instances_are_in_the_repo() -> None:
    assert "MIT License" in (DATA / "LICENSE").read_text()
    assert "MAPF-Competition/Start-Kit" in (DATA / "README.md").read_text()
    names = {f"{p.parents[1].name}/{p.stem}" for p in INSTANCES}
    assert {
        "2024/warehouse_large_5000",
        "2024/sortation_large_2000",
        "2023/warehouse_small_10",
        "2023/warehouse_small_200",
        "2023/sortation_large_400",
    } <= names
    for name in ("warehouse_small", "warehouse_large", "sortation_large", "random-64-64-10"):
        assert (DATA / "maps" / f"{name}.map").is_file()


@pytest.mark.parametrize("path", INSTANCES, ids=lambda p: f"{p.parents[1].name}/{p.stem}")
def test_every_instance_names_files_that_exist(path: Path) -> None:
    spec = json.loads(path.read_text())
    for key in ("mapFile", "agentFile", "taskFile"):
        assert (path.parent / spec[key]).is_file(), f"{path.name}: {key} {spec[key]} missing"
    agents = (path.parent / spec["agentFile"]).read_text().splitlines()
    counts = [line for line in agents if line.strip() and not line.startswith("#")]
    assert int(counts[0]) >= spec["teamSize"]
