"""``desim stub-llm``: serve the loopback stub of an OpenAI-compatible server."""
from __future__ import annotations

import sys

from desim.commands.core import port_number


def cmd_stub_llm(args) -> int:
    from desim.commands import UserError
    from desim.llm.stub import StubSettings, StubStats, bind, serve
    for name in ("error_rate", "garbage_rate"):
        if not 0.0 <= getattr(args, name) <= 1.0:
            raise UserError(f"--{name.replace('_', '-')} must be between 0 and 1")
    try:
        sock = bind(args.port, args.host)
    except OSError as e:
        raise UserError(f"cannot listen on {args.host}:{args.port}: {e}") from None
    settings = StubSettings(latency_ms=args.latency_ms, jitter_ms=args.jitter_ms, error_rate=args.error_rate,
                            garbage_rate=args.garbage_rate, retry_after_s=args.retry_after, seed=args.seed)
    port = sock.getsockname()[1]
    print(f"desim stub-llm listening on http://{args.host}:{port}/v1 "
          f"(latency {args.latency_ms:g} ms + up to {args.jitter_ms:g} ms, errors {args.error_rate:g}, "
          f"garbage {args.garbage_rate:g}, seed {args.seed})", flush=True)
    print(f"use it: DESIM_LLM_BASE_URL=http://{args.host}:{port}/v1 desim run STUDY", flush=True)
    serve(settings, StubStats(), sock)
    print("desim stub-llm stopped", file=sys.stderr)
    return 0


def register(sub) -> None:
    p = sub.add_parser("stub-llm", help="serve a loopback stub of an OpenAI-compatible LLM server")
    p.add_argument("--port", type=port_number, default=8000, help="port on 127.0.0.1 (0: any free port)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--latency-ms", type=float, default=0.0, help="fixed latency of every reply")
    p.add_argument("--jitter-ms", type=float, default=0.0, help="extra random latency, up to this")
    p.add_argument("--error-rate", type=float, default=0.0, help="share of requests failing with 429/500")
    p.add_argument("--garbage-rate", type=float, default=0.0, help="share of prompts answered with unusable text")
    p.add_argument("--retry-after", type=float, default=1.0, help="Retry-After seconds sent with 429")
    p.add_argument("--seed", type=int, default=0, help="seed of the replies and injected failures")
    p.set_defaults(func=cmd_stub_llm)
