"""No module under ``src/fleetmind`` is there for the tests alone.

Every module must be reached from what users run: the entry points of ``pyproject.toml``
(``[project.scripts]`` and ``[project.entry-points]``), the package itself (``gymnasium.make``
imports it), ``python -m`` modules (``__main__.py``) and ``fleetmind.testing`` (public checkers
and fakes). A module is reached when a reached module imports it: at the top, lazily inside a
function, under ``TYPE_CHECKING``, or by name through ``importlib`` (a string literal naming the
module, or an f-string such as ``f"fleetmind.bench.{name}"`` completed by a string literal of
the same file). A module that only tests import, or nothing, is dead code.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module(path: Path, src: Path) -> str:
    rel = path.relative_to(src).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(("fleetmind", *parts))


def _imported(path: Path, package: str, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that the file at ``path`` (in ``package``) imports."""
    names: set[str] = set()
    strings: set[str] = set()
    prefixes: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{a.name}" for a in node.names)  # a submodule by name
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.add(node.value)
        elif isinstance(node, ast.JoinedStr) and node.values:
            head = node.values[0]
            if isinstance(head, ast.Constant) and isinstance(head.value, str):
                prefixes.append(head.value)
    names.update(s for s in strings if s in modules)
    for prefix in prefixes:
        names.update(m for m in modules if m.startswith(prefix) and m[len(prefix) :] in strings)
    # Importing a.b.c runs a and a.b first.
    found = set()
    for name in names:
        parts = name.split(".")
        found.update(".".join(parts[:k]) for k in range(1, len(parts) + 1))
    return found & modules


def _entry_modules(root: Path) -> set[str]:
    """The modules that ``pyproject.toml``'s scripts and entry points name."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    groups = [project.get("scripts", {}), *project.get("entry-points", {}).values()]
    return {target.split(":")[0].strip() for group in groups for target in group.values()}


def _unreached(root: Path = ROOT) -> list[str]:
    """Modules under ``src/fleetmind`` that no entry point reaches, each with who imports it."""
    src = root / "src" / "fleetmind"
    paths = {_module(p, src): p for p in sorted(src.rglob("*.py"))}
    modules = set(paths)

    def package(name: str) -> str:
        return name if paths[name].name == "__init__.py" else name.rpartition(".")[0]

    graph = {name: _imported(path, package(name), modules) - {name} for name, path in paths.items()}
    todo = [
        name
        for name in modules
        if name == "fleetmind"
        or name in _entry_modules(root)
        or name.startswith("fleetmind.testing")
        or name.endswith(".__main__")
    ]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph[name])
    by_tests: set[str] = set()
    for test in sorted((root / "tests").rglob("*.py")):
        by_tests |= _imported(test, "tests", modules)
    return [
        f"{name}: {'imported only by tests' if name in by_tests else 'reached from no entry point'}"
        for name in sorted(modules - seen)
    ]


def test_every_module_is_reached_from_an_entry_point() -> None:
    assert _unreached() == []


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def test_checker_finds_modules_only_tests_import(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pyproject.toml": '[project]\n[project.scripts]\nx = "fleetmind.cli:main"\n',
            "src/fleetmind/__init__.py": "",
            "src/fleetmind/cli/__init__.py": (
                "import importlib\nfrom fleetmind.sim import used\n\n"
                "def main():\n    from fleetmind import lazy\n"
                '    importlib.import_module(f"fleetmind.bench.{NAME}")\n\n'
                'NAME = "speed"\n'
            ),
            "src/fleetmind/sim/__init__.py": "",
            "src/fleetmind/sim/used.py": "from . import helper\n",
            "src/fleetmind/sim/helper.py": "",
            "src/fleetmind/lazy.py": "",
            "src/fleetmind/bench/__init__.py": "",
            "src/fleetmind/bench/speed.py": "",
            "src/fleetmind/bench/other.py": "",
            "src/fleetmind/testing/__init__.py": "from fleetmind.sim import fixture\n",
            "src/fleetmind/sim/fixture.py": "",
            "src/fleetmind/sim/for_tests.py": "from fleetmind.sim import chain\n",
            "src/fleetmind/sim/chain.py": "",
            "tests/test_x.py": "from fleetmind.sim.for_tests import x\n",
        },
    )
    assert _unreached(tmp_path) == [
        "fleetmind.bench.other: reached from no entry point",
        "fleetmind.sim.chain: reached from no entry point",
        "fleetmind.sim.for_tests: imported only by tests",
    ]
