"""Resolve folder names given by a browser to folders under the dashboard's root, safely.

The dashboard serves only what lies under its configured root. A name from a request is a
relative, ``/``-separated path; it is refused when it is absolute, names a parent (``..``), holds a
backslash, a NUL or a drive letter, is longer than :data:`MAX_NAME` characters, or when the folder
it resolves to (symbolic links followed) lies outside the root. Every file read inside a folder
goes through :func:`inside` too, so a link in a run folder (``metrics.json`` pointing elsewhere) is
refused with 403, never followed out of the root.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from fleetmind.errors import FleetmindError

MAX_NAME = 1024  # characters of a folder name from a request (a path on disk is at most 4096)


class FolderError(FleetmindError):
    """A requested folder is refused or missing.

    Attributes:
        status: the HTTP status that fits (400 refused name, 403 a link out of the root, 404
            missing, 422 not a run folder).
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
    if len(name) > MAX_NAME:
        raise FolderError(
            f"folder name of {len(name)} characters: too long (at most {MAX_NAME})", status=400
        )
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
    try:
        target = (base / Path(*pure.parts)).resolve() if pure.parts else base
        is_dir = target.is_dir()
    except OSError as exc:  # a part too long for the file system, a loop of links, ...
        raise FolderError(
            f"folder {name!r}: cannot be opened ({exc.strerror})", status=400
        ) from None
    if not target.is_relative_to(base):
        # A symbolic link under the root that points outside it.
        raise FolderError(f"folder {name!r}: leads outside the dashboard root", status=400)
    if not is_dir:
        raise FolderError(f"folder {name!r}: no such folder under the dashboard root", status=404)
    return target


def inside(root: Path, path: Path) -> Path:
    """``path`` with its links resolved, refused when that lands outside ``root``.

    Args:
        root: the dashboard's root folder.
        path: a file or folder found under the root (it need not exist).

    Returns:
        The resolved path.

    Raises:
        FolderError: status 403 when the path (a symbolic link, or one inside a linked folder)
            resolves outside the root; 422 when it cannot be resolved.
    """
    base = root.resolve()
    try:
        target = path.resolve()
    except OSError as exc:
        raise FolderError(f"{path.name}: cannot be opened ({exc.strerror})", status=422) from None
    if not target.is_relative_to(base):
        raise FolderError(
            f"{path.name}: a link leading outside the dashboard root (refused)", status=403
        )
    return target


def relative_name(root: Path, folder: Path) -> str:
    """The ``/``-separated name of ``folder`` relative to ``root`` (``"."`` for the root)."""
    rel = folder.resolve().relative_to(root.resolve())
    return rel.as_posix() if rel.parts else "."
