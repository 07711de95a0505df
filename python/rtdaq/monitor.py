"""A running rtdaq's ``/status``, and the JSON report a run leaves."""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any, Dict, Union


def status(address: str = "127.0.0.1:9464", timeout_s: float = 2.0) -> Dict[str, Any]:
    """The JSON ``/status`` of the rtdaq run whose metrics endpoint is at ``address``
    (``rtdaq run --metrics ADDRESS``; ``host:port`` or a ``http://`` URL): its counters so
    far, as a dict. Raises ``ConnectionError`` naming the address when nothing answers."""
    url = address if address.startswith("http") else f"http://{address}"
    url = url.rstrip("/")
    if not url.endswith("/status"):
        url += "/status"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            return json.loads(r.read())
    except OSError as e:
        raise ConnectionError(
            f"no rtdaq status at {url}: is a run going with --metrics {address}? ({e})"
        ) from e


def load_report(path: Union[str, "os.PathLike[str]"]) -> Dict[str, Any]:
    """The JSON report of a run (``rtdaq run --report-json PATH``), as a dict."""
    with open(path) as f:
        return json.load(f)

