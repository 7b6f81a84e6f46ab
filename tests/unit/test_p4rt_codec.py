"""P4Runtime byte-string codec (spec §8.4): padded and short forms accepted, canonical replies."""
from __future__ import annotations

import pytest

from netsum.switch.errors import Code
from netsum.switch.p4rt.codec import decode_uint, encode_uint, nbytes
from netsum.switch.p4rt.errors import P4RTError


@pytest.mark.parametrize("data,width,value", [
    (b"\x01", 9, 1),
    (b"\x00\x01", 9, 1),            # zero-padded to the field's byte width
    (b"\x00\x00\x00\x00\x01", 9, 1),  # longer than the field but value fits: accepted
    (b"\x01\xff", 9, 511),
    (b"\x00", 1, 0),
    (b"\x0a\x00\x00\x01", 32, 0x0A000001),
    (b"\xff" * 6, 48, (1 << 48) - 1),
])
def test_decode_accepts_value_that_fits(data: bytes, width: int, value: int) -> None:
    assert decode_uint(data, width, "f") == value


@pytest.mark.parametrize("data,width", [
    (b"\x02\x00", 9),     # 512 needs 10 bits
    (b"\x02", 1),
    (b"\x01\x00\x00\x00\x00", 32),
    (b"", 8),             # empty byte string is never valid
])
def test_decode_rejects_with_invalid_argument(data: bytes, width: int) -> None:
    with pytest.raises(P4RTError) as err:
        decode_uint(data, width, "hdr.x")
    assert err.value.code == Code.INVALID_ARGUMENT
    assert "hdr.x" in err.value.message


@pytest.mark.parametrize("value,data", [
    (0, b"\x00"), (1, b"\x01"), (255, b"\xff"), (256, b"\x01\x00"), (0x0A000001, b"\x0a\x00\x00\x01"),
])
def test_encode_is_canonical(value: int, data: bytes) -> None:
    assert encode_uint(value) == data


def test_encode_refuses_value_wider_than_field() -> None:
    with pytest.raises(ValueError):
        encode_uint(512, 9)


@pytest.mark.parametrize("width,n", [(1, 1), (8, 1), (9, 2), (16, 2), (48, 6), (128, 16)])
def test_nbytes(width: int, n: int) -> None:
    assert nbytes(width) == n
