"""PSRDADA headers and samples, shared by DADA files and rings."""

from __future__ import annotations

from typing import Any, Dict, Union

import numpy as np

from ._rtdaq import parse_dada_header

HeaderValue = Union[int, float, str]


def _typed(v: str) -> HeaderValue:
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return v


def parse_header(text: bytes) -> Dict[str, HeaderValue]:
    """A PSRDADA ASCII header as a dict, in order; values that are whole numbers become
    ``int``, other numbers ``float``, the rest stay ``str`` (``UTC_START``, ``SOURCE``)."""
    return {k: _typed(v) for k, v in parse_dada_header(bytes(text)).items()}


def header_size(header: Dict[str, Any], path: str) -> int:
    """The header's ``HDR_SIZE`` (4096 when absent); anything but a byte count is a
    ``ValueError`` naming ``path``."""
    n = header.get("HDR_SIZE", 4096)
    if not isinstance(n, int) or n <= 0:
        raise ValueError(f"{path}: HDR_SIZE {n!r} is not a byte count: is it a DADA file?")
    return n


_SAMPLE_TYPES = {8: np.int8, 16: np.int16, 32: np.float32}


def decode_samples(raw: np.ndarray, header: Dict[str, Any], decode: bool = True) -> np.ndarray:
    """The samples in ``raw`` (bytes of DADA data) as the header describes them.

    Shape ``(nsample, npol, nchan)`` as baseband gives it (``baseband.dada``), channel
    fastest; complex for ``NDIM 2``. ``NBIT`` 8 and 16 are signed integers, 32 is float32.
    ``decode=True`` gives float32 (complex64) values, a new array, as baseband does;
    ``decode=False`` a view of ``raw`` in its integer type (no copy; complex data keep a
    last axis of 2: real, imaginary). A trailing partial sample is left out.
    """
    nbit, ndim = int(header.get("NBIT", 8)), int(header.get("NDIM", 1))
    npol, nchan = int(header.get("NPOL", 1)), int(header.get("NCHAN", 1))
    if nbit not in _SAMPLE_TYPES:
        raise ValueError(
            f"NBIT {nbit}: rtdaq.decode_samples reads 8, 16 and 32-bit samples; read the "
            "bytes (recording.data) and unpack them yourself"
        )
    if ndim not in (1, 2):
        raise ValueError(f"NDIM {ndim}: 1 (real) or 2 (complex)")
    t = np.dtype(_SAMPLE_TYPES[nbit])
    per_sample = npol * nchan * ndim * t.itemsize
    raw = np.asarray(raw).view(np.uint8).reshape(-1)
    n = raw.size // per_sample
    v = raw[: n * per_sample].view(t)
    v = v.reshape((n, npol, nchan, 2) if ndim == 2 else (n, npol, nchan))
    if not decode:
        return v
    if ndim == 2:
        out = np.empty((n, npol, nchan), np.complex64)
        out.real = v[..., 0]
        out.imag = v[..., 1]
        return out
    return v.astype(np.float32)
