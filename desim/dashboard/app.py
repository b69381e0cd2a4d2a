"""The research dashboard: a Starlette app serving a one-page app and a JSON API over ``studies/``.

How it stays out of a running study's way
-----------------------------------------
DuckDB lets one process open a database file for writing, and while it does,
no other process can open that file at all, not even read-only. A ``desim
run`` holds its study's store only for a moment at its start and its end (and
a sweep for each merge), but a request may land in that moment. So the dashboard

* opens a store read-only for each request and closes it before answering
  (``data.reading``), never keeping a connection: an idle dashboard can
  therefore never stop a run from starting;
* gives up after a few 50 ms retries when the store is locked, and then
  answers from what it can read without the database: the run's live
  progress file ``<study>/runs/live/<run_id>.json`` (status, step and metrics
  so far, replaced atomically by the run after every stored step) and
  the last answer it read from that store before the lock (kept in memory),
  marked ``busy`` so the page says "run in progress" instead of an error;
* polls only those live files while a run goes (``/api/live``,
  ``/api/studies/{id}/live``): the curves of a running study grow step by
  step, each run on its own step axis, without a single DuckDB open. A live
  file says ``"phase": "finishing"`` while its run stores its data (the store
  is held then); when it says the run ended, the page reads the store again in
  place, drawing the run's curves from its live file and saying what it is
  still reading until the store answers (reading a run of millions of rows
  takes seconds), never a blank section.

Nothing here writes to a store. Two things the dashboard can cause to be written, both under
the study's ``runs/`` and neither in the database: a network's layout and communities
(``runs/layouts/<key>.parquet``, derived from the stored edges alone, computed on the first
request of a network view and reused by every later view, report and branch of that network),
and the diffusion player of ``desim.report.diffusion`` (an HTML file), only on a POST from the
page's button.

Safety: files are served only from the package's ``static`` folder and from
inside the studies folder (``safety.safe_file``); paths with encoded dots or
slashes are refused before routing; every id and number from a request is
validated (``safety``) and bound as a SQL parameter; only loopback ``Host``
headers are accepted unless the server is deliberately exposed; the POST is
refused unless it comes from the dashboard's own page (``Origin`` check and a
custom header, see ``Guard``).
"""
from __future__ import annotations

import json
import math
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from desim.dashboard import data, grid
from desim.dashboard.safety import (
    BadRequest,
    NotFound,
    check_id,
    check_study_name,
    check_state_key,
    check_text,
    host_name,
    int_param,
    is_loopback,
    optional_text,
    raw_path_suspicious,
    refuse_cross_site,
    safe_file,
)
from desim.experiments.comparisons import version_changes
from desim.store import StoreBusyError, StudyLayout
from desim.study.files import StudyConfigError, is_study_folder, study_file_or_none

STATIC = Path(__file__).resolve().parent / "static"
RUN_IN_PROGRESS = ("run in progress: a desim run is writing this study's store, which cannot be read "
                   "until it finishes; live progress comes from its progress file")
MAX_STEP = 10_000_000


def _clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become null (browsers reject them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


class JSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        return json.dumps(_clean(content), default=str, separators=(",", ":")).encode("utf-8")

    def __init__(self, content: Any, status_code: int = 200):
        super().__init__(content, status_code, headers={"Cache-Control": "no-store"})


BROKEN_RETRIES = (0.2, 0.5)     # seconds before reading again a store that failed a read


def _read(fn: Callable[[Request], Any], request: Request) -> Any:
    """``fn(request)``, read again after a pause when the store failed a read: a sweep merging its runs can
    make a healthy store fail a read in passing, and a damaged one fails every time."""
    for pause in BROKEN_RETRIES:
        try:
            return fn(request)
        except data.BrokenStore:
            time.sleep(pause)
    return fn(request)


def api(fn: Callable[[Request], Any], studies_dir: Path | None = None) -> Callable[[Request], Response]:
    """Turn a handler's exceptions into JSON errors with the right status. A folder or file the server may not
    read (an ``OSError``: permissions, a disk error) is a 422 naming it relative to ``studies_dir``, never a bare
    500 nor an absolute path."""

    def endpoint(request: Request) -> Response:
        try:
            return JSON(_read(fn, request))
        except BadRequest as e:
            return JSON({"error": str(e)}, 400)
        except (NotFound, data.NoStore) as e:
            return JSON({"error": str(e)}, 404)
        except StoreBusyError:
            return JSON({"busy": True, "message": RUN_IN_PROGRESS})
        except (StudyConfigError, data.BrokenStore) as e:
            return JSON({"error": str(e)}, 422)
        except OSError as e:
            return JSON({"error": data.unreadable(e, studies_dir)}, 422)

    endpoint.__name__ = fn.__name__
    return endpoint


class Guard:
    """ASGI middleware in front of every route.

    * 400 for request paths with ``%2e``, ``%2f``, ``..`` and the like;
    * 400 for a ``Host`` header that is not a loopback name (``localhost``,
      127.0.0.0/8, ``::1``) unless the server is deliberately exposed, so a
      web page elsewhere cannot read the dashboard through DNS rebinding;
    * 403 for a POST from another origin or without the page's header
      (:func:`safety.refuse_cross_site`).
    """

    def __init__(self, app, allowed_hosts: list[str] | None):
        self.app = app
        self.any_host = bool(allowed_hosts) and "*" in allowed_hosts
        self.hosts = {h.lower() for h in allowed_hosts or []}

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            raw = scope.get("raw_path") or scope["path"].encode()
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            host = host_name(headers.get("host", ""))
            refusal = None
            if raw_path_suspicious(raw.split(b"?")[0]):
                refusal = JSON({"error": "path refused"}, 400)
            elif not (self.any_host or is_loopback(host) or host.lower() in self.hosts):
                refusal = JSON({"error": f"Host header {host[:80]!r} refused: the dashboard answers loopback "
                                         "names only (start it with --host to expose it)"}, 400)
            else:
                reason = refuse_cross_site(scope["method"], headers)
                if reason:
                    refusal = JSON({"error": reason}, 403)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


class LastGood:
    """A small LRU of answers: the last read from each store, served (marked stale) while a run locks it."""

    def __init__(self, size: int = 256):
        self.size = size
        self.items: OrderedDict[tuple, Any] = OrderedDict()
        self.lock = threading.Lock()    # handlers run in a thread pool

    def put(self, key: tuple, value: Any) -> None:
        with self.lock:
            self.items[key] = value
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)

    def get(self, key: tuple) -> Any:
        with self.lock:
            return self.items.get(key)


class Dashboard:
    """The handlers, bound to one studies folder."""

    def __init__(self, studies_dir: str | Path):
        self.served = Path(studies_dir).resolve()
        # `desim dashboard <a study>`: the folder given is itself a study, so that one study is served, named
        # and read as it would be in a folder of studies (its parent)
        self.only = self.served.name if _is_study(self.served) else None
        self.studies_dir = self.served.parent if self.only else self.served
        self.last_good = LastGood()

    # --- helpers ------------------------------------------------------------------
    def roots(self) -> list[Path]:
        """The study folders served: those of the studies folder, or the one study given."""
        return [self.served] if self.only else data.study_dirs(self.studies_dir)

    def study_root(self, request: Request) -> Path:
        """The study a request names by its folder's name (the id the study list gives), found among the
        folders served, never a path made from the request (``safety.check_study_name``). A folder the server
        may not look into raises its ``OSError`` (a 422 saying so, see :func:`api`)."""
        name = check_study_name(request.path_params["study"])
        if self.only:
            if name != self.only:
                raise NotFound(f"no study '{name}': this dashboard serves the study {self.only}/ alone")
            root = self.served
        else:
            root = data.find_study(self.studies_dir, name)
        if not is_study_folder(root):
            raise NotFound(f"no study '{name}' in {self.studies_dir.name}/")
        return root

    @staticmethod
    def run_param(request: Request) -> str:
        return check_id(request.query_params.get("run"), "run")

    # --- list ---------------------------------------------------------------------
    def studies(self, request: Request) -> dict:
        return {"studies_dir": str(self.served), "studies": [data.study_summary(root) for root in self.roots()]}

    def live_all(self, request: Request) -> dict:
        return {"live": {root.name: data.running_summaries(root) for root in self.roots()}}

    # --- one study ----------------------------------------------------------------
    def study(self, request: Request) -> dict:
        """The study page: config (always), store (or its last good copy while a run writes), live runs."""
        root = self.study_root(request)
        out: dict[str, Any] = {"id": root.name, "error": None, "store_error": None, "busy": False, "stale": False}
        try:
            config = data.study_config(root)
        except StudyConfigError as e:
            out["error"] = str(e).replace(str(self.studies_dir) + "/", "")
            return out
        personas = config.pop("_personas")
        out.update(config)
        live = data.live_runs(root)
        try:
            store = data.study_store(root)
            self.last_good.put((root.name, "store"), store)
        except StoreBusyError:
            store = self.last_good.get((root.name, "store"))
            out["busy"], out["stale"] = True, store is not None
        except (data.NoStore, data.BrokenStore) as e:
            out["store_error"] = str(e)
            store = None
        store = dict(store or {"runs": [], "versions": [], "metric_names": [], "population": {}, "events": [],
                               "events_run": None})
        store["runs"] = merge_live_runs(store["runs"], live, busy=out["busy"])
        out["store"] = store
        out["live"] = [data.live_summary(r) for r in live]
        out["diffusion_player"] = diffusion_player_fn() is not None
        card = out["population"]
        stored = store["population"]
        card["size"] = stored.get("size") or card["size"]
        card["n_edges"] = stored.get("n_edges")
        card["positioned"] = bool(stored.get("positioned"))    # the latest run's agents have x and y: a grid
        if stored.get("distributions"):
            card["distributions"], card["distributions_from"] = stored["distributions"], \
                f"initial states of run {stored['run_id']} ({stored['sampled']} agents)"
        elif personas:
            card["distributions"], card["distributions_from"] = data.distributions(personas), "personas"
        else:
            card["distributions"], card["distributions_from"] = [], None
        missing = [m for m in out["study"].get("display_metrics", []) if store["metric_names"]
                   and m not in store["metric_names"]]
        if missing:
            out["warnings"].append(f"display_metrics {missing} are not produced by the collector "
                                   f"(stored metrics: {store['metric_names']})")
        return out

    def study_live(self, request: Request) -> dict:
        """Live files of one study; running ones with their metric series so far, and those named in ``metrics``
        (comma-separated run ids: runs the page follows, whose last steps it reads once they have ended)."""
        root = self.study_root(request)
        wanted = {check_id(r, "run") for r in (request.query_params.get("metrics") or "").split(",") if r}
        runs = []
        for r in data.live_runs(root):
            item = data.live_summary(r)
            if r.get("status") == "running" or r["run_id"] in wanted:
                item["metrics"] = data.live_metrics(r)
            runs.append(item)
        return {"runs": runs}

    def metrics(self, request: Request) -> dict:
        root = self.study_root(request)
        run_ids = [check_id(r, "run") for r in request.query_params.getlist("run")]
        if not run_ids or len(run_ids) > 20:
            raise BadRequest("give 1 to 20 run parameters")
        with_events = request.query_params.get("events") == "1"     # the runs' fired events too, in one read
        live = {r["run_id"]: r for r in data.live_runs(root)}
        busy, events = False, None
        try:
            series, events = data.metrics_and_events(root, run_ids, events=with_events)
            for rid in run_ids:
                self.last_good.put((root.name, "metrics", rid), series[rid])
        except StoreBusyError:
            busy = True
            series = {rid: self.last_good.get((root.name, "metrics", rid)) or {} for rid in run_ids}
        sources = {}
        for rid in run_ids:
            sources[rid] = "store"
            if rid in live and (busy or not series[rid]):
                series[rid], sources[rid] = data.live_metrics(live[rid]), "live"
        out = {"series": series, "sources": sources, "busy": busy}
        if with_events and not busy:
            out["events"] = events
        return out

    def events(self, request: Request) -> dict:
        root = self.study_root(request)
        return {"events": data.run_events(root, self.run_param(request))}

    def panel(self, request: Request) -> dict:
        root = self.study_root(request)
        q = request.query_params
        return data.panel_page(
            root, self.run_param(request),
            step=int_param(q.get("step"), "step", 0, MAX_STEP),
            agent_id=optional_text(q.get("agent_id"), "agent_id"),
            action_kind=optional_text(q.get("action_kind"), "action_kind"),
            page=int_param(q.get("page"), "page", 0, 1_000_000, 0),
            page_size=int_param(q.get("page_size"), "page_size", 1, 500, 50))

    def agent(self, request: Request) -> dict:
        """One agent; its id is a query parameter, so ids with any characters (``/``, dots, spaces) work."""
        root = self.study_root(request)
        agent_id = check_text(request.query_params.get("agent_id"), "agent_id")
        return data.agent_trajectory(root, self.run_param(request), agent_id)

    def messages(self, request: Request) -> dict:
        root = self.study_root(request)
        step = int_param(request.query_params.get("step"), "step", 0, MAX_STEP)
        if step is None:
            raise BadRequest("step is required")
        return data.step_messages(root, self.run_param(request), step)

    def states(self, request: Request) -> dict:
        root = self.study_root(request)
        return data.state_series(root, self.run_param(request), check_state_key(request.query_params.get("state")))

    def version_diff(self, request: Request) -> dict:
        """What changed in a version since its parent: its settings and a unified diff of each file."""
        root = self.study_root(request)
        version = check_id(request.path_params["version"], "version")
        if not StudyLayout(root).db.exists():
            raise data.NoStore(f"study '{root.name}' has not run yet")
        try:
            return version_changes(root, version)
        except ValueError as e:     # paths as the page names them: relative to the studies folder
            said = str(e).replace(str(self.studies_dir.resolve()) + "/", "").replace(str(self.studies_dir) + "/", "")
            # a store that cannot be read (StoreBroken is a ValueError too) is a 422, not an unknown version
            raise (data.BrokenStore if isinstance(e, data.BrokenStore) else NotFound)(said) from None

    def grid(self, request: Request) -> dict:
        """One step of a positioned run (agents with ``x`` and ``y``) on its grid, coloured by a state field."""
        root = self.study_root(request)
        q = request.query_params
        step = int_param(q.get("step"), "step", 0, MAX_STEP, 0)
        return grid.grid_step(root, study_file_or_none(root), self.run_param(request), check_state_key(q.get("state")),
                              step, data.reading)

    def network(self, request: Request) -> dict:
        """One view of the run's network pictures; the layout is the network's stored one (computed and
        stored under the study's ``runs/layouts/`` on first need, never in the page)."""
        root = self.study_root(request)
        q = request.query_params
        view = q.get("view") or None
        if view is not None and view not in data.NETWORK_VIEWS:
            raise BadRequest(f"view must be one of {', '.join(data.NETWORK_VIEWS)}")
        return data.network(root, self.run_param(request), check_state_key(q.get("state")), view)

    def diffusion(self, request: Request) -> dict:
        """The report's full diffusion player (``desim.report.network_picture.diffusion_player``)."""
        root = self.study_root(request)
        run_id = self.run_param(request)
        state = check_state_key(request.query_params.get("state"))
        player = diffusion_player_fn()
        if player is None:
            raise NotFound("the report's diffusion player is not available")
        try:
            result = player(root, state, run_id=run_id)
        except StoreBusyError:
            raise
        except OSError as e:    # the player's file cannot be written there (a read-only study): a 422
            raise data.BrokenStore(data.unreadable(e, self.studies_dir, "written")) from None
        except Exception as e:  # noqa: BLE001 - the report's own errors name the problem
            raise BadRequest(f"the diffusion player could not be built: {e}") from None
        html = Path(result["html"]) if isinstance(result, dict) else None
        if html is None or not html.is_file():
            raise NotFound("the diffusion player produced no HTML file")
        return {"url": file_url(root, html)}

    def netview_js(self, request: Request) -> Response:
        """The network renderer the report's player inlines (``desim.report.netview``), as a script."""
        from desim.report.netview import NETVIEW_CSS, NETVIEW_JS
        css = json.dumps(NETVIEW_CSS)
        script = (NETVIEW_JS + "\n(function () { const s = document.createElement('style'); "
                  f"s.textContent = {css}; document.head.append(s); }})();\n")
        return Response(script, media_type="text/javascript", headers={"Cache-Control": "no-cache"})

    # --- files --------------------------------------------------------------------
    def study_file(self, request: Request) -> Response:
        try:
            root = self.study_root(request)
            return FileResponse(safe_file(root, request.path_params["path"]))
        except BadRequest as e:
            return JSON({"error": str(e)}, 400)
        except NotFound as e:
            return JSON({"error": str(e)}, 404)
        except OSError as e:
            return JSON({"error": data.unreadable(e, self.studies_dir)}, 422)

    def static(self, request: Request) -> Response:
        try:
            path = safe_file(STATIC, request.path_params["path"])
        except BadRequest as e:
            return JSON({"error": str(e)}, 400)
        except NotFound as e:
            return JSON({"error": str(e)}, 404)
        return FileResponse(path, headers={"Cache-Control": "no-cache"})

    def index(self, request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


def file_url(root: Path, path: Path) -> str:
    """The ``/files/`` URL of ``path`` inside the study folder ``root``, percent-encoded: a folder's name may hold
    spaces, '%', '#' or '?'."""
    rel = path.resolve().relative_to(root.resolve()).as_posix()
    return f"/files/{quote(root.name, safe='')}/{quote(rel)}"


def _is_study(folder: Path) -> bool:
    """Whether ``folder`` is itself a study; one the server may not look into is not (its listing then says
    why it cannot be read)."""
    try:
        return is_study_folder(folder)
    except OSError:
        return False


def diffusion_player_fn() -> Callable | None:
    """``desim.report.network_picture.diffusion_player`` (the picture, then the report draws it) if it imports
    cleanly, else None: the page then offers its own views only."""
    try:
        from desim.report.network_picture import diffusion_player
    except Exception:  # noqa: BLE001 - any import failure means "not available"
        return None
    return diffusion_player


def merge_live_runs(runs: list[dict], live: list[dict], *, busy: bool) -> list[dict]:
    """Store runs, updated from live files while the store is locked, plus live runs it lacks."""
    by_id = {r["run_id"]: dict(r) for r in runs}
    for lv in live:
        rid = lv["run_id"]
        if rid not in by_id:
            by_id[rid] = {"run_id": rid, "kind": lv.get("kind") or "run", "status": lv.get("status"),
                          "last_step": lv.get("step"), "n_steps": lv.get("n_steps"), "parent_run_id": None,
                          "fork_step": None, "started_at": None, "live": True, "stalled": False}
        elif busy or (by_id[rid].get("status") == "running" and not by_id[rid].get("stalled")):
            by_id[rid].update(status=lv.get("status"), last_step=lv.get("step"), live=True, stalled=False)
    return list(by_id.values())


def create_app(studies_dir: str | Path, allowed_hosts: list[str] | None = None) -> Starlette:
    """The dashboard over ``studies_dir``.

    ``allowed_hosts`` are ``Host`` names accepted besides the loopback ones
    (``localhost``, 127.0.0.0/8, ``::1``); pass ``["*"]`` when serving on a
    network address. See :class:`Guard`.
    """
    d = Dashboard(studies_dir)

    def json_api(fn: Callable[[Request], Any]) -> Callable[[Request], Response]:
        return api(fn, d.studies_dir)

    routes = [
        Route("/", d.index),
        Route("/static/netview.js", d.netview_js),
        Route("/static/{path:path}", d.static),
        Route("/files/{study}/{path:path}", d.study_file),
        Route("/api/studies", json_api(d.studies)),
        Route("/api/live", json_api(d.live_all)),
        Route("/api/studies/{study}", json_api(d.study)),
        Route("/api/studies/{study}/live", json_api(d.study_live)),
        Route("/api/studies/{study}/metrics", json_api(d.metrics)),
        Route("/api/studies/{study}/events", json_api(d.events)),
        Route("/api/studies/{study}/panel", json_api(d.panel)),
        Route("/api/studies/{study}/agent", json_api(d.agent)),
        Route("/api/studies/{study}/states", json_api(d.states)),
        Route("/api/studies/{study}/messages", json_api(d.messages)),
        Route("/api/studies/{study}/network", json_api(d.network)),
        Route("/api/studies/{study}/grid", json_api(d.grid)),
        Route("/api/studies/{study}/versions/{version}/diff", json_api(d.version_diff)),
        Route("/api/studies/{study}/diffusion", json_api(d.diffusion), methods=["POST"]),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(Guard, allowed_hosts=allowed_hosts)
    return app
