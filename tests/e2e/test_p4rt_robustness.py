"""Bad input of every kind gets a clear error and loses nothing: random Read requests, mangled
device configs and garbage StreamChannel messages against a live server.  None may produce an
INTERNAL/UNKNOWN status (a server bug) or disturb the committed pipeline."""
from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import text_format
from google.protobuf.message import DecodeError
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from helpers import p4rt_client  # noqa: E402
from netsum.p4rt.client import Stream, SwitchClient  # noqa: E402
from netsum.p4rt.errors import ClientError  # noqa: E402
from netsum.switch.device import Device  # noqa: E402
from netsum.switch.p4rt import P4RuntimeServer  # noqa: E402

EXAMPLES = int(os.environ.get("NETSUM_FUZZ_EXAMPLES", "800")) // 4
CLIENT_ERRORS = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                 grpc.StatusCode.OUT_OF_RANGE, grpc.StatusCode.UNIMPLEMENTED,
                 grpc.StatusCode.FAILED_PRECONDITION}
DMAC = 36472220
COOKIE = 4242


@pytest.fixture(scope="module")
def live(request: pytest.FixtureRequest) -> Iterator[tuple[SwitchClient, p4info_pb2.P4Info, dict]]:
    fixtures: Path = request.getfixturevalue("p4c_fixtures")
    srv = P4RuntimeServer(Device(device_id=0), "127.0.0.1:0").start()
    c = p4rt_client(f"127.0.0.1:{srv.port}", 0, election_id=1)
    info = text_format.Parse((fixtures / "l2_mcast.p4info.txtpb").read_text(), p4info_pb2.P4Info())
    doc = json.loads((fixtures / "l2_mcast.json").read_text())
    try:
        c.connect()
        c.set_pipeline(info, json.dumps(doc).encode(), cookie=COOKIE)
        yield c, info, doc
    finally:
        c.close()
        srv.stop(None)


settings_ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                     suppress_health_check=list(HealthCheck))


@st.composite
def entity(draw: st.DrawFn) -> pb.Entity:
    e = pb.Entity()
    try:
        e.MergeFromString(draw(st.binary(max_size=48)))
    except DecodeError:
        pass
    if draw(st.booleans()):
        te = e.table_entry
        te.table_id = draw(st.sampled_from([0, DMAC, 43605182, 7]))
        if draw(st.booleans()):
            te.match.add(field_id=draw(st.integers(0, 4))).exact.value = draw(st.binary(max_size=8))
        te.is_default_action = draw(st.booleans())
    return e


@settings_
@given(entities=st.lists(entity(), max_size=4))
def test_random_reads_answer_cleanly(live: tuple, entities: list[pb.Entity]) -> None:
    c = live[0]
    try:
        c.read(entities)
    except ClientError as exc:
        assert grpc.StatusCode[exc.code] in CLIENT_ERRORS, (exc.code, exc.detail)
        assert exc.detail


JUNK = st.one_of(st.none(), st.integers(-3, 70000), st.text(max_size=5), st.just([]),
                 st.just({}), st.just([["x", 1, False]]), st.booleans())


@st.composite
def mangled(draw: st.DrawFn, doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` with one node replaced by junk or deleted, anywhere in the tree."""
    out = copy.deepcopy(doc)
    node: Any = out
    for _ in range(draw(st.integers(1, 6))):
        if isinstance(node, dict) and node:
            key = draw(st.sampled_from(sorted(node)))
        elif isinstance(node, list) and node:
            key = draw(st.integers(0, len(node) - 1))
        else:
            break
        if not isinstance(node[key], (dict, list)) or draw(st.integers(0, 3)) == 0:
            if isinstance(node, dict) and draw(st.booleans()):
                del node[key]
            else:
                node[key] = draw(JUNK)
            return out
        node = node[key]
    return out


def test_mangled_device_configs_are_refused_cleanly(live: tuple) -> None:
    c, info, doc = live
    outcomes = {"accepted": 0, "refused": 0}

    @settings_
    @given(bad=mangled(doc))
    def one(bad: dict[str, Any]) -> None:
        try:
            c.set_pipeline(info, json.dumps(bad).encode(),
                           action=pb.SetForwardingPipelineConfigRequest.VERIFY)
        except ClientError as exc:
            assert exc.code == "INVALID_ARGUMENT", (exc.code, exc.detail)
            assert exc.detail
            outcomes["refused"] += 1
        else:
            outcomes["accepted"] += 1
        # VERIFY never changes the running pipeline.
        assert c.get_config().cookie.cookie == COOKIE

    one()
    # Many mutations hit fields the switch ignores (source_info, ...): both outcomes must occur.
    assert outcomes["refused"] > EXAMPLES // 10 and outcomes["accepted"], outcomes


def test_garbage_stream_messages_do_not_hurt_the_server(live: tuple) -> None:
    c = live[0]

    @settings_
    @given(raw=st.lists(st.binary(max_size=40), min_size=1, max_size=5))
    def one(raw: list[bytes]) -> None:
        s = Stream(c.stub)
        try:
            for data in raw:
                msg = pb.StreamMessageRequest()
                try:
                    msg.MergeFromString(data)
                except DecodeError:
                    continue
                if msg.HasField("arbitration"):
                    # Below the test client's id 1: never steal the primary seat.
                    msg.arbitration.election_id.high = msg.arbitration.election_id.low = 0
                s.send(msg)
        finally:
            s.close()
        # The primary is still primary and the server still answers.
        e = pb.Entity()
        e.table_entry.table_id = DMAC
        c.read([e])
        c.stub.Write(c.stamp(pb.WriteRequest()))      # an empty batch: the primary may still write

    one()
