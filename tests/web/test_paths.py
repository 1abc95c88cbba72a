"""Folder names from the browser never lead outside the dashboard root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetmind.web.paths import FolderError, relative_name, resolve_folder


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.json").write_text("{}")
    os.symlink(tmp_path / "outside", root / "escape")
    os.symlink(root / "a" / "b", root / "inner")
    (root / "file.txt").write_text("x")
    return root


def test_plain_names_resolve_under_the_root(tree: Path) -> None:
    assert resolve_folder(tree, "a/b") == (tree / "a" / "b").resolve()
    assert resolve_folder(tree, "") == tree.resolve()
    assert resolve_folder(tree, ".") == tree.resolve()
    assert relative_name(tree, tree / "a" / "b") == "a/b"
    assert relative_name(tree, tree) == "."


def test_a_link_that_stays_inside_is_followed(tree: Path) -> None:
    assert resolve_folder(tree, "inner") == (tree / "a" / "b").resolve()


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("..", "'..' is not allowed"),
        ("../outside", "'..' is not allowed"),
        ("a/../../outside", "'..' is not allowed"),
        ("a/b/../..", "'..' is not allowed"),
        ("/etc", "not an absolute one"),
        ("//etc/passwd", "not an absolute one"),
        ("C:/Windows", "not an absolute one"),
        ("a\\..\\..", "backslashes"),
        ("a\x00b", "NUL"),
        ("escape", "outside the dashboard root"),
        ("escape/", "outside the dashboard root"),
    ],
)
def test_escapes_are_refused_with_400(tree: Path, name: str, needle: str) -> None:
    with pytest.raises(FolderError, match=needle) as info:
        resolve_folder(tree, name)
    assert info.value.status == 400


def test_an_absolute_path_to_the_root_itself_is_refused(tree: Path) -> None:
    with pytest.raises(FolderError) as info:
        resolve_folder(tree, str(tree / "a"))
    assert info.value.status == 400


@pytest.mark.parametrize("name", ["missing", "a/missing", "file.txt"])
def test_missing_folders_are_404(tree: Path, name: str) -> None:
    with pytest.raises(FolderError, match="no such folder") as info:
        resolve_folder(tree, name)
    assert info.value.status == 404


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.lists(
        st.sampled_from(["..", ".", "a", "b", "escape", "inner", "/", "", "x"]), max_size=6
    ).map("/".join)
    | st.text(max_size=20)
)
def test_whatever_the_name_the_result_stays_under_the_root(tree: Path, name: str) -> None:
    try:
        found = resolve_folder(tree, name)
    except FolderError as exc:
        status = exc.status
    else:
        status = 200
        assert found.is_relative_to(tree.resolve())
        assert found.is_dir()
    assert status in (200, 400, 404)


def test_a_very_long_name_is_a_clear_400(tree: Path) -> None:
    for name in ("a" * 5000, "x" * 300, "a/" * 600):
        with pytest.raises(FolderError, match=r"too long|cannot be opened") as info:
            resolve_folder(tree, name)
        assert info.value.status == 400


def test_inside_refuses_a_file_link_out_of_the_root(tree: Path) -> None:
    from fleetmind.web.paths import inside

    os.symlink(tree.parent / "outside" / "secret.json", tree / "a" / "metrics.json")
    with pytest.raises(FolderError, match="outside the dashboard root") as info:
        inside(tree, tree / "a" / "metrics.json")
    assert info.value.status == 403
    assert inside(tree, tree / "a" / "b") == (tree / "a" / "b").resolve()
