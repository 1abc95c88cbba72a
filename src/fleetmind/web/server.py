"""Run the dashboard with uvicorn (the engine behind ``fleetmind serve``)."""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path

from fleetmind.errors import ConfigError
from fleetmind.eval.runner import RunConfig
from fleetmind.web.app import LOCAL_HOSTS, create_app

logger = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``127.0.0.1``, ``::1``, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_root(root: Path, *, create: bool) -> Path:
    """The dashboard root, created if asked to (for live recordings).

    Raises:
        ConfigError: the root is missing (and not to be created) or is not a folder.
    """
    if root.exists() and not root.is_dir():
        raise ConfigError(f"--root {root}: not a folder")
    if not root.exists():
        if not create:
            raise ConfigError(f"--root {root}: no such folder (record a run with `fleetmind run`)")
        try:
            root.mkdir(parents=True)
        except OSError as exc:
            raise ConfigError(f"--root {root}: cannot create it ({exc.strerror})") from None
    return root


def serve(
    root: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    live: RunConfig | None = None,
    record_live: bool = True,
    speed: float = 10.0,
    log_level: str = "warning",
) -> None:
    """Serve the dashboard until interrupted.

    Args:
        root: folder whose run and comparison folders are served.
        host: interface to bind (loopback by default; any other host accepts any ``Host``).
        port: TCP port.
        live: the live simulation's run config, or None for replay only.
        record_live: record live episodes under ``root/live/``.
        speed: live ticks per second at start.
        log_level: uvicorn's log level.
    """
    import uvicorn

    check_root(root, create=live is not None and record_live)
    loopback = is_loopback(host)
    if not loopback:
        logger.warning("dashboard bound to %s: anyone who can reach it can read %s", host, root)
    app = create_app(
        root,
        live=live,
        record_live=record_live,
        speed=speed,
        allowed_hosts=LOCAL_HOSTS if loopback else None,
    )
    uvicorn.run(app, host=host, port=port, log_level=log_level)
