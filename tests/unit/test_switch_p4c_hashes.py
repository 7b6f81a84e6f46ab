"""v1model's hash algorithms in real p4c's JSON (p4c-bm2-ss 1.2.5.16) of
tests/switch_p4/crc_custom.p4, made in tests/switch_p4/p4c/ with `p4c-bm2-ss --arch v1model -o
crc_custom.json --p4runtime-files crc_custom.p4info.txtpb ../crc_custom.p4`.  Expected values are
the CRC catalogue's check values of the input "123456789" (CRC-16/ARC 0xbb3d, CRC-32 0xcbf43926):
crc16_custom and crc32_custom start, as in bmv2, with the parameters of crc16 and crc32."""
from __future__ import annotations

from pathlib import Path

from netsum.switch.device import Device

P4C = Path(__file__).resolve().parents[1] / "switch_p4" / "p4c"


def test_crc_and_custom_crc_check_values() -> None:
    dev = Device()
    dev.install(Device.build_pipeline((P4C / "crc_custom.json").read_bytes()))
    pkt = b"123456789" + bytes(12) + b"tail"
    ((port, out),) = dev.process(0, pkt)
    want = b"123456789" + bytes.fromhex("bb3d" "bb3d" "cbf43926" "cbf43926") + b"tail"
    assert (port, out) == (1, want)
