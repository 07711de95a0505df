"""rtdaq: read what rtdaq records and streams, from Python.

- ``rtdaq.open(path)`` opens a pcap, raw or DADA recording that rtdaq wrote, memory-mapped
  (no copy), with its index (``FILE.index.json``) and header; iterate it for its packets.
- ``rtdaq.follow(path)`` yields the records of a file while rtdaq is still writing it.
- ``rtdaq.Ring(key)`` attaches to a PSRDADA ring (an rtdaq ``dada_ring`` stage, or any
  PSRDADA writer) as its reader and yields numpy blocks.
- ``rtdaq.status(address)`` reads a running rtdaq's ``/status``; ``rtdaq.load_report(path)``
  its JSON report.

See docs/python.md in the rtdaq repository.
"""

from ._rtdaq import parse_dada_header, scan_pcap
from .monitor import load_report, status
from .recording import (
    PCAP_ROW,
    DadaRecording,
    Packet,
    PcapRecording,
    RawRecording,
    Recording,
    follow,
    open,
    read_index,
)
from .dada import decode_samples, parse_header
from .ring import Ring

__all__ = [
    "PCAP_ROW",
    "DadaRecording",
    "Packet",
    "PcapRecording",
    "RawRecording",
    "Recording",
    "Ring",
    "decode_samples",
    "follow",
    "load_report",
    "open",
    "parse_dada_header",
    "parse_header",
    "read_index",
    "scan_pcap",
    "status",
]
