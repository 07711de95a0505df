"""Type hints of the native module (python/src, built by maturin)."""

from typing import Dict, Optional, Tuple, TypedDict

PCAP_ROW_BYTES: int
NO_PAYLOAD: int

class PcapScan(TypedDict):
    rows: bytes
    records: int
    end: int
    linktype: int
    snaplen: int
    nanosecond: bool
    big_endian: bool

def scan_pcap(path: str, start: int = 0, max_records: Optional[int] = None) -> PcapScan: ...
def parse_dada_header(text: bytes) -> Dict[str, str]: ...

class DadaReader:
    def __init__(self, key: str, wait_s: float = 0.0) -> None: ...
    @property
    def key(self) -> str: ...
    @property
    def block_bytes(self) -> int: ...
    @property
    def blocks(self) -> int: ...
    def header(self) -> bytes: ...
    def read(self, n: int) -> Tuple[bytes, int]: ...
    def close(self) -> None: ...
