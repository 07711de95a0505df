"""Fixtures of the rtdaq Python package's tests: rtdaq itself records and streams what the
tests read (no mock); a missing binary or peer fails the test (scripts/test.sh runs them).

Binaries: ``RTDAQ_BIN`` (default target/release/rtdaq, the default socket build) and
``RTDAQ_DADA_BIN`` (default target/engines/rtdaq-socket-dada, ``--features dada``)."""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
from typing import Any, Dict, Optional, Sequence, Tuple

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _binary(env: str, default: str, how: str) -> pathlib.Path:
    p = pathlib.Path(os.environ.get(env, str(ROOT / default)))
    if not p.exists():
        pytest.fail(f"{p} is missing: {how}")
    return p


@pytest.fixture(scope="session")
def rtdaq_bin() -> pathlib.Path:
    return _binary("RTDAQ_BIN", "target/release/rtdaq", "cargo build --release builds it")


@pytest.fixture(scope="session")
def rtdaq_dada_bin() -> pathlib.Path:
    return _binary(
        "RTDAQ_DADA_BIN",
        "target/engines/rtdaq-socket-dada",
        "scripts/test.sh builds it (cargo build --features dada)",
    )


def free_port(kind: int = socket.SOCK_DGRAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def edited_config(name: str, out_dir: pathlib.Path, edits: Sequence[Tuple[str, str]]) -> pathlib.Path:
    """configs/NAME with each (old, new) replaced (old must be there) and the loopback port
    5000 moved to a free one, written into ``out_dir``."""
    text = (ROOT / "configs" / name).read_text()
    port = free_port()
    edits = list(edits) + [("udp://127.0.0.1:5000", f"udp://127.0.0.1:{port}")]
    for old, new in edits:
        assert old in text, f"{old!r} not in configs/{name}"
        text = text.replace(old, new)
    p = out_dir / name
    p.write_text(text)
    return p


def _run_args(binary: pathlib.Path, config: pathlib.Path, out_dir: pathlib.Path, secs: float,
              record: bool) -> list:
    args = [str(binary), "run", "--config", str(config), "--duration", str(secs),
            "--report-json", str(out_dir / "report.json")]
    # --output-dir is refused (exit 2) by a config without recorders.
    return args + ["--output-dir", str(out_dir / "out")] if record else args


def run_rtdaq(
    binary: pathlib.Path,
    config: pathlib.Path,
    out_dir: pathlib.Path,
    secs: float,
    extra: Sequence[str] = (),
    record: bool = True,
) -> Tuple[subprocess.CompletedProcess, Optional[Dict[str, Any]]]:
    """``rtdaq run`` for ``secs`` (with ``record``, its recordings in ``out_dir/out``): the
    process and its JSON report."""
    report = out_dir / "report.json"
    p = subprocess.run(
        _run_args(binary, config, out_dir, secs, record) + list(extra),
        capture_output=True, text=True, timeout=120,
    )
    r = json.loads(report.read_text()) if report.exists() and report.stat().st_size else None
    return p, r


def start_rtdaq(binary: pathlib.Path, config: pathlib.Path, out_dir: pathlib.Path, secs: float,
                extra: Sequence[str] = (), record: bool = True) -> subprocess.Popen:
    """As :func:`run_rtdaq`, but returns at once with the process running."""
    return subprocess.Popen(
        _run_args(binary, config, out_dir, secs, record) + list(extra),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


RAW_RECORDER = '\n[[recorders]]\nname = "raw"\nformat = "raw"\n\n[generator]'


@pytest.fixture(scope="module")
def recorded(rtdaq_bin: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    """One 1 s run of configs/host-udp-record.toml recording every datagram to pcap, DADA
    and raw: the files and the report."""
    d = tmp_path_factory.mktemp("recorded")
    cfg = edited_config(
        "host-udp-record.toml",
        d,
        [('record = ["pcap", "dada"]', 'record = ["pcap", "dada", "raw"]'),
         ("\n[generator]", RAW_RECORDER)],
    )
    p, r = run_rtdaq(rtdaq_bin, cfg, d, 1)
    assert p.returncode == 0 and r is not None, p.stdout + p.stderr
    files = {f.suffix[1:]: f for f in (d / "out").iterdir() if not f.name.endswith(".json")}
    assert set(files) == {"pcap", "dada", "raw"}, files
    return {"files": files, "report": r, "dir": d}
