"""Resolve folder names given by a browser to folders under the dashboard's root, safely.

The dashboard serves only what lies under its configured root. A name from a request is a
relative, ``/``-separated path; it is refused when it is absolute, names a parent (``..``), holds a
backslash, a NUL or a drive letter, or when the folder it resolves to (symbolic links followed)
lies outside the root.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from fleetmind.errors import FleetmindError


class FolderError(FleetmindError):
    """A requested folder is refused or missing.

    Attributes:
        status: the HTTP status that fits (400 refused name, 404 missing, 422 not a run folder).
    """

    def __init__(self, message: str, *, status: int = 404) -> None:
        super().__init__(message)
        self.status = status


def resolve_folder(root: Path, name: str) -> Path:
    """The folder ``name`` under ``root``, refusing anything that escapes the root.

    Args:
        root: the dashboard's root folder.
        name: a relative path with ``/`` separators (``""`` or ``"."`` is the root itself).

    Returns:
        The resolved (absolute, links followed) folder path.

    Raises:
        FolderError: status 400 for a refused name, 404 for a folder that does not exist.
    """
    if any(ch in name for ch in ("\x00", "\\")):
        raise FolderError(f"folder {name!r}: backslashes and NUL are not allowed", status=400)
    pure = PurePosixPath(name)
    if pure.is_absolute() or (len(name) > 1 and name[1] == ":"):
        raise FolderError(
            f"folder {name!r}: give a path relative to the dashboard root, not an absolute one",
            status=400,
        )
    if ".." in pure.parts:
        raise FolderError(f"folder {name!r}: '..' is not allowed", status=400)
    base = root.resolve()
    target = (base / Path(*pure.parts)).resolve() if pure.parts else base
    if not target.is_relative_to(base):
        # A symbolic link under the root that points outside it.
        raise FolderError(f"folder {name!r}: leads outside the dashboard root", status=400)
    if not target.is_dir():
        raise FolderError(f"folder {name!r}: no such folder under the dashboard root", status=404)
    return target


def relative_name(root: Path, folder: Path) -> str:
    """The ``/``-separated name of ``folder`` relative to ``root`` (``"."`` for the root)."""
    rel = folder.resolve().relative_to(root.resolve())
    return rel.as_posix() if rel.parts else "."
