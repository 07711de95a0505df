#!/usr/bin/env python3
"""eCPRI peer for rtdaq's tests: eCPRI-over-Ethernet frames built with scapy (PyPI).

  ecpri_peer.py write PCAP --dst-mac MAC --src-mac MAC [--pc-ids N] [--messages M]
                [--skip-pc P --skip-every K] [--iq-bytes B]
      scapy builds M IQ-data messages (eCPRI message type 0, revision 1, E bit set) for
      each of N PC_IDs (0x0100, 0x0101, ...), interleaved, each in one Ethernet frame of
      EtherType 0xAEFE with B bytes of IQ samples; SEQ_ID counts 0, 1, ... per PC_ID and
      wraps at 256. The messages k ≡ K − 1 (mod K) of PC_ID index P are left out (not
      written), and so is no other. scapy writes the frames to PCAP (for tcpreplay). Prints
      JSON {"frames": n, "skipped": s, "pc_ids": [...], "per_pc": {pc: written}}.
"""
import argparse
import json
import struct

from scapy.layers.l2 import Ether
from scapy.packet import Raw
from scapy.utils import wrpcap

ETHERTYPE_ECPRI = 0xAEFE


def message(pc_id, seq, iq_bytes):
    body = struct.pack("!HBB", pc_id, seq & 0xFF, 0x80) + bytes((seq + i) & 0xFF for i in range(iq_bytes))
    # Common header: revision 1 (bits 7..4), C = 0; type 0 (IQ data); payload size.
    return struct.pack("!BBH", 0x10, 0, len(body)) + body


def write(a):
    pcs = [0x0100 + i for i in range(a.pc_ids)]
    frames, skipped, per_pc = [], 0, {str(pc): 0 for pc in pcs}
    for k in range(a.messages):
        for i, pc in enumerate(pcs):
            if i == a.skip_pc and a.skip_every and k % a.skip_every == a.skip_every - 1:
                skipped += 1
                continue
            frames.append(Ether(dst=a.dst_mac, src=a.src_mac, type=ETHERTYPE_ECPRI)
                          / Raw(message(pc, k, a.iq_bytes)))
            per_pc[str(pc)] += 1
    wrpcap(a.pcap, frames)
    print(json.dumps({"frames": len(frames), "skipped": skipped, "pc_ids": pcs, "per_pc": per_pc}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("pcap")
    w.add_argument("--dst-mac", required=True)
    w.add_argument("--src-mac", required=True)
    w.add_argument("--pc-ids", type=int, default=4)
    w.add_argument("--messages", type=int, default=600)
    w.add_argument("--skip-pc", type=int, default=-1)
    w.add_argument("--skip-every", type=int, default=0)
    w.add_argument("--iq-bytes", type=int, default=256)
    a = p.parse_args()
    {"write": write}[a.cmd](a)


if __name__ == "__main__":
    main()
