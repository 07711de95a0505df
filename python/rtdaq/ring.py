"""A PSRDADA ring's reader: its header, then numpy blocks of its data."""

from __future__ import annotations

from typing import Dict, Iterator, Optional

import numpy as np

from ._rtdaq import DadaReader
from .dada import HeaderValue, decode_samples, parse_header


class Ring:
    """The reader of the PSRDADA ring at ``key`` (hexadecimal, as ``dada_db -k`` takes it):
    what an rtdaq ``dada_ring`` stage (or any PSRDADA writer) writes.

    Waits up to ``wait_s`` for the ring to exist. ``header`` waits for the writer's header;
    iterating gives the data as uint8 arrays of ``block_bytes`` (the last one shorter) to
    the end of data, and ``samples()`` decodes a block by the header. One reader holds a
    ring at a time; ``close()`` (or leaving a ``with`` block) lets another attach. Waits
    release the GIL.

    A reader that falls behind makes the writer count ``ring_reader_behind``: rtdaq never
    waits for it, and the newest payloads are the ones lost. With ``keep_blocks=N`` the
    reader drops the *oldest* data instead: before each read that starts a block, while
    more than N whole blocks wait for it, the oldest is given back to the writer unread,
    so that the writer finds room for the newest. ``bytes_dropped`` and
    ``blocks_dropped`` count them, and ``read_offset`` says where in the writer's data the
    last read's array starts."""

    def __init__(self, key: str = "dada", wait_s: float = 30.0,
                 keep_blocks: Optional[int] = None):
        self._r = DadaReader(key, wait_s)
        self._header: Optional[Dict[str, HeaderValue]] = None
        self.header_text = b""
        self.bytes_read = 0
        self.keep_blocks = keep_blocks
        self.bytes_dropped = 0
        self.blocks_dropped = 0
        self.read_offset = 0

    @property
    def key(self) -> str:
        return self._r.key

    @property
    def block_bytes(self) -> int:
        """Bytes of one of the ring's data blocks (``dada_db -b``)."""
        return self._r.block_bytes

    @property
    def blocks(self) -> int:
        """Data blocks in the ring (``dada_db -n``)."""
        return self._r.blocks

    @property
    def header(self) -> Dict[str, HeaderValue]:
        """The writer's header (waits for it the first time)."""
        if self._header is None:
            self.header_text = self._r.header()
            self._header = parse_header(self.header_text)
        return self._header

    @property
    def behind_blocks(self) -> int:
        """Data blocks written for this reader and not read yet."""
        return self._r.behind_blocks()

    @property
    def offset(self) -> int:
        """The byte of the writer's data after the last read: the header's ``OBS_OFFSET``
        (where this reader came in), plus the bytes read and dropped."""
        obs = self.header.get("OBS_OFFSET", 0)
        return (obs if isinstance(obs, int) else 0) + self.bytes_read + self.bytes_dropped

    def read(self, nbytes: Optional[int] = None) -> np.ndarray:
        """Up to ``nbytes`` (default: one block) of data, waiting for them; fewer only at
        the end of data, an empty array after it. The array owns its memory."""
        _ = self.header  # the library reads data only after the header
        if self.keep_blocks is not None:
            dropped = self._r.drop_oldest(self.keep_blocks)
            self.bytes_dropped += dropped
            self.blocks_dropped += dropped // self.block_bytes
        self.read_offset = self.offset
        b, got = self._r.read(nbytes or self.block_bytes)
        self.bytes_read += got
        return np.frombuffer(b, np.uint8, count=got)

    def __iter__(self) -> Iterator[np.ndarray]:
        while True:
            a = self.read()
            if a.size == 0:
                return
            yield a

    def samples(self, nbytes: Optional[int] = None, decode: bool = True) -> np.ndarray:
        """The next ``nbytes`` of data as samples (see :func:`rtdaq.decode_samples`)."""
        return decode_samples(self.read(nbytes), self.header, decode)

    def close(self) -> None:
        """Unlocks and leaves the ring."""
        self._r.close()

    def __enter__(self) -> "Ring":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
