"""Run the dashboard with uvicorn (the engine behind ``fleetmind serve``)."""

from __future__ import annotations

import ipaddress
import logging
import secrets
import socket
from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Access:
    """Who may reach the dashboard: the ``Host`` values it answers and the live-control token.

    Attributes:
        hosts: ``Host`` header values accepted (never "any").
        token: the token the live controls require, or None (loopback without ``--token``).
        generated: the token was made up at start (print it: nobody else knows it).
    """

    hosts: tuple[str, ...]
    token: str | None
    generated: bool

    def url(self, host: str, port: int) -> str:
        """The address to open (with the token in its query when there is one)."""
        shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
        return f"http://{shown}:{port}/" + (f"?token={self.token}" if self.token else "")


def machine_hosts() -> list[str]:
    """This machine's names and the addresses they resolve to (for a non-loopback bind)."""
    names = {socket.gethostname(), socket.getfqdn()}
    found = set(names)
    for name in names:
        try:
            infos = socket.getaddrinfo(name, None)
        except OSError:
            continue
        for info in infos:
            addr = str(info[4][0])
            found.update({addr, f"[{addr}]"} if ":" in addr else {addr})
    return sorted(h for h in found if h)


def access(host: str, *, token: str | None = None, allowed_hosts: Sequence[str] = ()) -> Access:
    """The Host check and token for a dashboard bound to ``host``.

    On loopback the loopback names are accepted and the token is optional. Elsewhere the Host
    check stays on (the loopback names, the bound address unless it is a wildcard, this
    machine's names and addresses, and ``allowed_hosts``), and the live controls need a token:
    ``token`` when given, else a new random one.

    Raises:
        ConfigError: an empty ``--token``.
    """
    if token is not None and not token.strip():
        raise ConfigError("--token: empty (give a token, or leave it out to get a generated one)")
    hosts = [*LOCAL_HOSTS, *allowed_hosts]
    generated = False
    if not is_loopback(host):
        wildcard = host.strip("[]") in ("0.0.0.0", "::", "")
        hosts += ([] if wildcard else [host]) + machine_hosts()
        if token is None:
            token, generated = secrets.token_urlsafe(18), True
    return Access(hosts=tuple(dict.fromkeys(hosts)), token=token, generated=generated)


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
    grant: Access | None = None,
) -> None:
    """Serve the dashboard until interrupted.

    Args:
        root: folder whose run and comparison folders are served.
        host: interface to bind (loopback by default).
        port: TCP port.
        live: the live simulation's run config, or None for replay only.
        record_live: record live episodes under ``root/live/``.
        speed: live ticks per second at start.
        log_level: uvicorn's log level.
        grant: the Host check and token (:func:`access` of ``host`` when None).
    """
    import uvicorn

    check_root(root, create=live is not None and record_live)
    grant = grant if grant is not None else access(host)
    if not is_loopback(host):
        logger.warning(
            "dashboard bound to %s: anyone who can reach it can read %s (Host must be one of %s; "
            "the live controls need the token)",
            host,
            root,
            ", ".join(grant.hosts),
        )
    app = create_app(
        root,
        live=live,
        record_live=record_live,
        speed=speed,
        allowed_hosts=grant.hosts,
        token=grant.token,
    )
    uvicorn.run(app, host=host, port=port, log_level=log_level)
