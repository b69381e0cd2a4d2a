"""Keeping credentials out of every text the LLM layer writes.

Two credentials reach the client: the API key (``DESIM_LLM_API_KEY``, sent
as ``Authorization: Bearer``) and ``user:password@`` in an endpoint URL of
``DESIM_LLM_BASE_URL`` (sent as ``Authorization: Basic``). Neither may reach
a message, and from a message the store (``runs.error``), the live file,
stderr, reports and the dashboard. Everything the client puts into an
exception passes through :meth:`Scrubber.clean`, which removes

* the literal secrets, in every form the wire shows them: the key, the
  password (as written and percent-decoded), ``user:password`` and its
  base64 (what a server echoing its request headers sends back);
* any ``Authorization`` / ``Proxy-Authorization`` value, whoever's it is;
* any ``user:password@`` in a URL.

URLs are shown without their userinfo (:func:`desim.llm.config.shown_url`),
and HTTP libraries only ever see the bare URL, so their own error text
cannot carry it either.
"""
from __future__ import annotations

import base64
import re
from urllib.parse import unquote, urlsplit

MASK = "***"
# no \b before the names: in JSON-escaped text a header follows a literal "\r\n"
_HEADER = re.compile(r"(?i)((?:proxy-)?authorization)([\"']?\s*[:=]\s*[\"']?)([^\r\n\\\"',;}\]]*)")
_USERINFO = re.compile(r"(?i)([a-z][a-z0-9+.-]*://)[^/\s@\\\"']+@")


def userinfo(url: str) -> tuple[str, str] | None:
    """``(user, password)`` of a URL with credentials (percent-decoded), else ``None``."""
    parts = urlsplit(url.strip())
    if "@" not in parts.netloc:
        return None
    return unquote(parts.username or ""), unquote(parts.password or "")


def basic_token(user: str, password: str) -> str:
    """The value of ``Authorization: Basic <token>`` for these credentials."""
    return base64.b64encode(f"{user}:{password}".encode("utf-8")).decode("ascii")


class Scrubber:
    """Removes one run's credentials (and any credential-shaped text) from a string."""

    def __init__(self, api_key: str | None, urls: list[str]):
        secrets: set[str] = set()
        if api_key:
            secrets.add(api_key)
        for url in urls:
            creds = userinfo(url)
            if creds is None:
                continue
            user, password = creds
            raw = urlsplit(url.strip()).netloc.rsplit("@", 1)[0]
            secrets.update({raw, f"{user}:{password}", basic_token(user, password)})
            if len(password) >= 4:          # a one-letter password would mask every such letter
                secrets.update({password, raw.partition(":")[2]})
        # longest first, so a secret that contains another is masked whole
        self._secrets = sorted((s for s in secrets if s), key=len, reverse=True)

    def clean(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
        return _USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
