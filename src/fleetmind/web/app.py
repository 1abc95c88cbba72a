"""The dashboard's web application (FastAPI): JSON API, live WebSocket and the static page.

Routes (every error is JSON ``{"error": "..."}`` with a fitting status, never a traceback)::

    GET  /                               the page (static/index.html)
    GET  /static/...                     its script and style sheet
    GET  /api/folders                    run and comparison folders under the root
    GET  /api/run/meta?run=NAME          config, metrics, map rows, ticks, robot ids
    GET  /api/run/frames?run=&start=&stop=   robot states per tick (replay)
    GET  /api/run/series?run=&points=    per-robot cumulative reward, throughput over time
    GET  /api/run/decisions?run=         planner decisions and LLM call groups
    GET  /api/run/decision?run=&tick=    one decision with its LLM call log
    GET  /api/compare?folder=NAME        the comparison table of a compare folder
    GET  /api/live/status                the live simulation's state (404 without --live)
    POST /api/live/control               {"cmd": play|pause|step|speed|reset, "value": n}
    WS   /api/live/ws                    status, init (map) and frames; accepts the same commands

Folder names are relative to the root given to :func:`create_app`; see
:mod:`fleetmind.web.paths` for what is refused.

Access: the ``Host`` header must be one of ``allowed_hosts`` (a guard against DNS rebinding;
``fleetmind serve`` allows the loopback names, plus this machine's names and addresses when bound
elsewhere). With a ``token`` (required by ``fleetmind serve`` off loopback) the live controls
need it: ``Authorization: Bearer TOKEN`` on ``POST /api/live/control``, ``?token=TOKEN`` on the
WebSocket (without it the socket streams but refuses commands). The page takes the token from its
own URL (``/?token=TOKEN``). A WebSocket frame that is not a JSON command (binary, not JSON, a
wrong shape) is answered with an error message and the socket stays open.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from fleetmind.errors import FleetmindError
from fleetmind.eval.runner import RunConfig
from fleetmind.web.live import LiveSession
from fleetmind.web.paths import FolderError, resolve_folder
from fleetmind.web.runs import MAX_FRAMES, RunCache, comparison, find_folders

logger = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
MAX_COMMAND = 4096  # bytes of one WebSocket command frame
FRAME_INTERVAL_S = 1 / 30


class Control(BaseModel):
    """A live-view command from the page."""

    model_config = ConfigDict(extra="forbid")

    cmd: str
    value: float | None = None


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def create_app(
    root: Path,
    *,
    live: RunConfig | None,
    record_live: bool = True,
    speed: float = 10.0,
    autoplay: bool = True,
    allowed_hosts: Sequence[str] | None = LOCAL_HOSTS,
    token: str | None = None,
) -> FastAPI:
    """The dashboard application.

    Args:
        root: the folder whose run and comparison folders are served (nothing outside it).
        live: the run to simulate live, or None for replay only.
        record_live: record live episodes as run folders under ``root/live/``.
        speed: live ticks per second at start.
        autoplay: start the live simulation playing.
        allowed_hosts: ``Host`` header values accepted (DNS-rebinding guard); None accepts any.
            Tests using Starlette's TestClient add its ``testserver`` here.
        token: when given, the live controls require it (see the module docstring).

    Returns:
        The FastAPI app; the live simulation starts and stops with the app's lifespan.
    """
    root = Path(root)
    session = (
        LiveSession(live, root, record=record_live, speed=speed, autoplay=autoplay)
        if live is not None
        else None
    )
    cache = RunCache()

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if session is not None:
            session.start()
        try:
            yield
        finally:
            if session is not None:
                await asyncio.to_thread(session.stop)

    app = FastAPI(title="fleetmind dashboard", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.root = root
    app.state.live = session
    if allowed_hosts is not None:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))

    # ------------------------------------------------------------------ errors as JSON
    @app.exception_handler(FolderError)
    async def _folder_error(_: Request, exc: FolderError) -> JSONResponse:
        return _error(exc.status, str(exc))

    @app.exception_handler(FleetmindError)
    async def _fleetmind_error(_: Request, exc: FleetmindError) -> JSONResponse:
        return _error(400, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err.get("loc", ()) if x not in ("query", "body"))
            parts.append(f"{loc}: {err.get('msg')}")
        return _error(422, "; ".join(parts) or "bad request")

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def _bug(_: Request, exc: Exception) -> JSONResponse:
        logger.exception("dashboard request failed")
        return _error(500, f"internal error ({type(exc).__name__}); see the server log")

    # ------------------------------------------------------------------ page
    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    # ------------------------------------------------------------------ recorded folders
    def run_folder(name: str) -> Any:
        return cache.get(root, resolve_folder(root, name))

    @app.get("/api/folders")
    async def folders() -> dict[str, Any]:
        found = await asyncio.to_thread(find_folders, root)
        return {"root": root.resolve().name, "folders": found, "live": session is not None}

    @app.get("/api/run/meta")
    def run_meta(run: str = Query(..., description="run folder, relative to the root")) -> Any:
        return run_folder(run).meta()

    @app.get("/api/run/frames")
    def run_frames(
        run: str = Query(...),
        start: int = Query(0, ge=0),
        stop: int = Query(MAX_FRAMES, ge=0),
    ) -> Any:
        return run_folder(run).frames(start, stop)

    @app.get("/api/run/series")
    def run_series(run: str = Query(...), points: int = Query(400, ge=2, le=5000)) -> Any:
        return run_folder(run).series(points)

    @app.get("/api/run/decisions")
    def run_decisions(run: str = Query(...)) -> Any:
        rf = run_folder(run)
        return {"name": rf.name, "decisions": rf.decisions(), "problems": rf.problems}

    @app.get("/api/run/decision")
    def run_decision(run: str = Query(...), tick: int = Query(..., ge=0)) -> Any:
        return run_folder(run).decision(tick)

    @app.get("/api/compare")
    def compare(folder: str = Query(...)) -> Any:
        path = resolve_folder(root, folder)
        return {"name": folder, **comparison(root, path)}

    # ------------------------------------------------------------------ live
    def live_session() -> LiveSession:
        if session is None:
            raise FolderError(
                "the live view is off (start the server with `fleetmind serve --live`)",
                status=404,
            )
        return session

    @app.get("/api/live/status")
    async def live_status() -> Any:
        return live_session().status()

    def token_ok(given: str | None) -> bool:
        return token is None or (given is not None and secrets.compare_digest(given, token))

    @app.post("/api/live/control")
    async def live_control(body: Control, request: Request) -> Any:
        auth = request.headers.get("authorization", "")
        bearer = auth.lower().startswith("bearer ")
        given = auth[7:] if bearer else request.query_params.get("token")
        if not token_ok(given):
            return _error(401, NEEDS_TOKEN)
        return live_session().control(body.cmd, body.value)

    @app.websocket("/api/live/ws")
    async def live_ws(ws: WebSocket) -> None:
        origin = ws.headers.get("origin")
        host = ws.headers.get("host", "")
        if origin and urlsplit(origin).netloc != host:
            await ws.close(code=1008, reason="cross-origin connection refused")
            return
        given = ws.query_params.get("token")
        if given is not None and not token_ok(given):
            await ws.close(code=1008, reason="wrong dashboard token")
            return
        await ws.accept()
        if session is None:
            await ws.send_json({"type": "error", "error": "the live view is off"})
            await ws.close()
            return
        reader = asyncio.create_task(_read_commands(ws, session, controls=token_ok(given)))
        try:
            await _send_frames(ws, session, reader)
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader

    return app


NEEDS_TOKEN = (
    "the live controls need the dashboard token: open the address `fleetmind serve` printed "
    "(/?token=...), or send Authorization: Bearer TOKEN"
)


async def _read_commands(ws: WebSocket, session: LiveSession, *, controls: bool) -> None:
    """Apply commands the page sends; answer each with the new status (or an error).

    A frame that is not a JSON command gets an error message; the socket stays open.
    """
    while True:
        message = await ws.receive()
        if message["type"] == "websocket.disconnect":
            raise WebSocketDisconnect(message.get("code", 1000))
        text = message.get("text")
        if text is None:
            await ws.send_json({"type": "error", "error": "expected a JSON text frame, not binary"})
            continue
        try:
            if len(text) > MAX_COMMAND:
                raise ValueError(f"command of {len(text)} characters (at most {MAX_COMMAND})")
            body = Control.model_validate(json.loads(text))
            if not controls:
                raise ValueError(NEEDS_TOKEN)
            status = session.control(body.cmd, body.value)
        except json.JSONDecodeError as exc:
            await ws.send_json({"type": "error", "error": f"not valid JSON ({exc.msg})"})
            continue
        except (FleetmindError, ValueError) as exc:
            await ws.send_json({"type": "error", "error": str(exc)})
            continue
        await ws.send_json({"type": "status", **status})


async def _send_frames(ws: WebSocket, session: LiveSession, reader: asyncio.Task[None]) -> None:
    """Send status changes, the map of each new episode, and each new frame (at most 30/s)."""
    last_status: dict[str, Any] | None = None
    last_init: dict[str, Any] | None = None
    last_frame: dict[str, Any] | None = None
    while not reader.done():
        status = session.status()
        status.pop("config", None)
        status.pop("tick", None)
        if status != last_status:
            last_status = status
            await ws.send_json({"type": "status", **status})
        init = session.init_message()
        if init is not None and init is not last_init:
            last_init = init
            last_frame = None
            await ws.send_json({"type": "init", **init})
            history = session.history()
            await ws.send_json(
                {"type": "history", "episode": init["episode"], "points": history[:-1]}
            )
        frame = session.frame()
        if frame is not None and frame is not last_frame and last_init is not None:
            last_frame = frame
            await ws.send_json({"type": "frame", **frame})
        await asyncio.sleep(FRAME_INTERVAL_S)
    exc = reader.exception()
    if exc is not None and not isinstance(exc, WebSocketDisconnect):
        raise exc
