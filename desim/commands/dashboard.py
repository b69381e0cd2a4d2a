"""``desim dashboard``: serve the research dashboard over a studies folder.

The server binds 127.0.0.1 by default: the dashboard shows study data and
has no authentication, so exposing it on a network is an explicit choice
(``--host 0.0.0.0``). ``--port 0`` picks a free port; the first line printed
is always the URL, printed once the server accepts connections, so scripts
and tests can read it and connect at once.
"""
from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from desim.commands.core import port_number


def cmd_dashboard(args) -> int:
    import uvicorn

    from desim.commands import UserError
    from desim.dashboard.app import create_app
    from desim.dashboard.safety import is_loopback
    studies = Path(args.studies_dir)
    if not studies.is_dir():
        raise UserError(f"{studies} is not a folder of studies")
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as e:
        raise UserError(f"cannot listen on {args.host}:{args.port}: {e}") from None
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if ":" in args.host else args.host
    loopback = is_loopback(args.host)
    if not loopback:
        print(f"warning: listening on {args.host}: anyone who can reach this address sees the studies",
              file=sys.stderr)
    app = create_app(studies, allowed_hosts=None if loopback else ["*"])
    url = f"http://{host}:{port}/"
    if args.nice and hasattr(os, "nice"):
        os.nice(args.nice)      # a reader yields the cores to the runs it watches (bench_dashboard_load)

    class Server(uvicorn.Server):
        async def startup(self, sockets=None):
            await super().startup(sockets=sockets)
            if self.started:        # the socket accepts connections: now the URL is true
                print(f"desim dashboard on {url} serving {studies.resolve()}", flush=True)

    Server(uvicorn.Config(app, log_level="warning", access_log=False)).run(sockets=[sock])
    return 0


def register(sub) -> None:
    p = sub.add_parser("dashboard", help="serve the research dashboard over a studies folder")
    p.add_argument("studies_dir", nargs="?", default="studies", help="folder of studies (default: studies)")
    p.add_argument("--port", type=port_number, default=8787, help="port (default 8787; 0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--nice", type=int, default=19, metavar="N",
                   help="lower the server's CPU priority by N (default 19, the lowest; 0 keeps it), so that "
                        "the runs it shows keep the machine's cores while many pages poll")
    p.set_defaults(func=cmd_dashboard)
