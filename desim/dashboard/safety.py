"""Input checks for the dashboard: every id, number and file path a request
carries passes through here before it reaches the disk or a SQL query.

Values are only ever bound as SQL parameters; these checks exist so that a
malformed request gets a clear 400 instead of an empty result, and so that
file paths cannot leave the folder they are served from.
"""
from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from urllib.parse import urlsplit

ID = re.compile(r"[A-Za-z0-9_\-]{1,128}")                  # the whole value (fullmatch: '$' lets a newline end it)
STATE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
# percent-escapes that decode to '.', '/', '\' or NUL: a path that needs them is an attack
ENCODED = re.compile(rb"%(2e|2f|5c|00|25)", re.IGNORECASE)
# the study's segment of ``/api/studies/<name>/...`` and ``/files/<name>/...``: a folder's name, which may hold a
# '%' (sent as %25); it is only ever compared with the names the studies folder lists (``data.find_study``),
# never decoded again nor joined to a path, so there %25 is a percent sign, not double encoding
STUDY_SEGMENT = re.compile(rb"/(?:api/studies|files)/([^/]*)")
ENCODED_IN_NAME = re.compile(rb"%(2e|2f|5c|00)", re.IGNORECASE)


class BadRequest(ValueError):
    """A request parameter is malformed (HTTP 400)."""


class NotFound(LookupError):
    """The study, run, agent or file does not exist (HTTP 404)."""


def check_id(value: str | None, name: str) -> str:
    if value is None or not ID.fullmatch(value):
        raise BadRequest(f"{name} must match ^[A-Za-z0-9_-]+$ (1-128 characters), got {value!r:.80}")
    return value


def name_problem(name: str) -> str | None:
    """Why a folder's name cannot be a study id in a URL, or None: any name the studies folder lists can (spaces,
    accents, Chinese, emoji, quotes, '%'), but for a backslash (refused in every request path), a control
    character or bytes that are not UTF-8 (a browser cannot send such a name back)."""
    if "\\" in name:
        return "holds a backslash"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "holds a control character"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "is not UTF-8"
    return None


def check_study_name(value: str | None) -> str:
    """A study id from a request path: its folder's name, as the study list gives it (the router has decoded
    it once). It is never joined to a path, only compared with the names the studies folder lists; what
    could name another folder (``..``, ``/``, NUL, an absolute path) is refused here all the same."""
    if (not value or value in (".", "..") or "/" in value or len(value) > 255
            or name_problem(value) is not None):
        raise BadRequest(f"study id must be the name of a study folder in the studies folder (as the study list "
                         f"gives it), got {value!r:.80}")
    return value


def check_text(value: str | None, name: str, limit: int = 256) -> str:
    """Free text such as an agent id: any characters but control characters, at most ``limit`` long.

    The engine accepts any string as an agent id, so the dashboard must too;
    the value is only ever a bound SQL parameter.
    """
    if not value or len(value) > limit or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise BadRequest(f"{name} must be 1-{limit} characters without control characters, got {value!r:.80}")
    return value


def optional_text(value: str | None, name: str) -> str | None:
    return None if value in (None, "") else check_text(value, name)


def check_state_key(value: str | None, name: str = "state") -> str:
    if value is None or not STATE_KEY.fullmatch(value):
        raise BadRequest(f"{name} must be an identifier (letters, digits, _), got {value!r:.80}")
    return value


def int_param(value: str | None, name: str, lo: int, hi: int, default: int | None = None) -> int | None:
    """An integer query parameter within ``[lo, hi]``; ``default`` when absent or empty."""
    if value is None or value == "":
        return default
    if not re.fullmatch(r"-?[0-9]{1,9}", value):
        raise BadRequest(f"{name} must be an integer, got {value!r:.80}")
    number = int(value)
    if not lo <= number <= hi:
        raise BadRequest(f"{name} must be between {lo} and {hi}, got {number}")
    return number


def raw_path_suspicious(raw_path: bytes) -> bool:
    """True for a request path with encoded dots/slashes or ``..`` segments.

    The router sees the decoded path, so ``%2e%2e%2f`` would otherwise become
    ``../`` after the checks that look at the raw text. A study's name may hold a
    '%' (``STUDY_SEGMENT``); its segment refuses the other escapes all the same.
    """
    if b"\\" in raw_path or any(seg in (b"..", b".") for seg in raw_path.split(b"/")):
        return True
    rest = raw_path
    study = STUDY_SEGMENT.match(raw_path)
    if study is not None:
        if ENCODED_IN_NAME.search(study.group(1)):
            return True
        rest = raw_path[:study.start(1)] + raw_path[study.end(1):]      # the rest keeps the strict rule
    return ENCODED.search(rest) is not None


def safe_file(base: Path, relative: str) -> Path:
    """``base / relative`` if it is an existing file inside ``base``; otherwise an error.

    Rejects absolute paths, ``..`` and ``.`` segments, backslashes, NUL and
    left-over percent signs (double encoding), then resolves symlinks and
    checks the result is still under ``base``.
    """
    if (not relative or relative.startswith(("/", "~")) or "\\" in relative or "\x00" in relative
            or "%" in relative or ":" in relative):
        raise BadRequest(f"bad file path {relative!r:.80}")
    parts = relative.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise BadRequest(f"bad file path {relative!r:.80}")
    root = base.resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root):
        raise BadRequest(f"bad file path {relative!r:.80}")
    if not target.is_file():
        raise NotFound(f"no file {relative}")
    return target


def host_name(host_header: str) -> str:
    """The host part of a ``Host`` header: ``[::1]:8787`` -> ``::1``, ``127.0.0.2:80`` -> ``127.0.0.2``."""
    host = host_header.strip()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host[1:]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback(host: str) -> bool:
    """``localhost`` or any loopback address (all of 127.0.0.0/8, ``::1``)."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


WRITE_HEADER = "x-desim-request"   # the page sends it on every POST; a cross-site form cannot


def refuse_cross_site(method: str, headers: dict[str, str]) -> str | None:
    """Why a state-changing request is refused, or ``None`` to let it through.

    A POST must come from a page of this dashboard: its ``Origin`` (or, when
    a browser sends none, its ``Referer``) must name the same host and port
    as the ``Host`` header, and it must carry the ``X-Desim-Request`` header,
    which a cross-site form cannot send and a cross-site script can only send
    after a CORS preflight that this server never grants.
    """
    if method in ("GET", "HEAD", "OPTIONS"):
        return None
    host = headers.get("host", "")
    origin = headers.get("origin") or headers.get("referer")
    if not origin:
        return "cross-origin check: request refused, it has neither an Origin nor a Referer header"
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or parts.netloc.lower() != host.lower():
        return f"cross-origin request refused: origin {origin[:80]!r} is not this dashboard ({host[:80]})"
    if headers.get(WRITE_HEADER) != "1":
        return f"request refused: the {WRITE_HEADER} header is missing"
    return None
