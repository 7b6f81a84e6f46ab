"""workers.batch and the vectorised quantizer's options: the whole-tensor path produces the
same bytes as the worker core's per-packet path, whatever the chunking."""
from __future__ import annotations

import numpy as np
import pytest

from netsum.wire import EXP_ZERO, HEADER_BYTES, Flags, MsgType
from netsum.workers import batch, quant, wire
from netsum.workers.errors import QuantError


@pytest.mark.parametrize("length, k, slots, n", [(1000, 32, 4, 3), (64, 64, 8, 32), (5, 32, 1, 2)])
def test_encode_tensor_matches_per_packet_path(length: int, k: int, slots: int, n: int) -> None:
    rng = np.random.default_rng(length)
    x = (rng.standard_normal(length) * 10.0 ** rng.uniform(-30, 30, length)).astype(np.float32)
    props = quant.block_exponents(x, k)
    agreed = np.minimum(props.astype(int) + 1, 255).astype(np.uint8)
    agreed[props == 0] = 0
    ahead = np.roll(props, -slots)
    first = np.arange(slots) * 7 + (1 << 32) - 3     # some slots wrap around 2^32
    rec = batch.encode_tensor(x, agreed, n, k, job_id=77, num_slots=slots,
                              proposals_ahead=ahead, first_rounds=first)
    rows = quant.blocks(x, k)
    for b, packet in enumerate(wire.batch_bytes(rec)):
        slot = b % slots
        head = wire.Header(msg_type=MsgType.DATA, flags=Flags.NONE, job_id=77, slot=slot,
                           exp=int(ahead[b]), count=0,
                           round=int((first[slot] + b // slots) % (1 << 32)), offset=b * k)
        values = quant.quantize_block(rows[b], int(agreed[b]), quant.scale_shift(n))
        assert packet == wire.encode(head, None, k)[:HEADER_BYTES] + values


def test_encode_tensor_defaults() -> None:
    rec = batch.encode_tensor(np.ones(100, np.float32), np.full(4, 127, np.uint8), 2, 32, 1, 2)
    fields, _ = wire.decode_batch(wire.batch_bytes(rec), 32)
    assert list(fields["round"]) == [0, 0, 1, 1] and list(fields["slot"]) == [0, 1, 0, 1]
    assert (fields["exp"] == EXP_ZERO).all()
    with pytest.raises(QuantError, match="num_slots"):
        batch.encode_tensor(np.ones(4, np.float32), np.ones(1, np.uint8), 2, 32, 1, 0)


@pytest.mark.parametrize("chunk", [1, 3, 7, 4096])
def test_chunking_does_not_change_results(chunk: int) -> None:
    rng = np.random.default_rng(chunk)
    x = (rng.standard_normal(1000) * 1e-40).astype(np.float32)  # subnormals: split factors
    e = quant.block_exponents(x, 32)
    np.testing.assert_array_equal(quant.quantize(x, e, 4, 32, chunk=chunk),
                                  quant.quantize(x, e, 4, 32))


@pytest.mark.parametrize("out", [np.zeros((3, 32), np.int32), np.zeros((4, 32), np.float32),
                                 np.zeros((4, 32), np.int64)])
def test_quantize_out_must_fit(out: np.ndarray) -> None:
    x = np.ones(128, np.float32)
    with pytest.raises(QuantError, match="out must be an int32 array of shape"):
        quant.quantize(x, quant.block_exponents(x, 32), 2, 32, out=out)
