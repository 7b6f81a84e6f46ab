"""The STF parser: every command form, numbers with don't-care digits, and positioned errors."""
from __future__ import annotations

import pytest

from netsum.tools.stf.syntax import (ActionCall, Add, CheckCounter, CounterWrite, Expect, KeyMatch,
                               McGroupCreate, McNodeAssociate, McNodeCreate, McNodeUpdate,
                               MeterSetRates, MirroringAdd, MirroringAddMc, MirroringDelete,
                               NoPacket, Number, Packet, ReadOnly, RegisterReset, RegisterWrite,
                               RemoveAll, SetDefault, StfError, Wait, parse_stf)


def one(text: str) -> object:
    cmds = parse_stf(text)
    assert len(cmds) == 1
    return cmds[0]


def test_add_with_priority_keys_action_and_id() -> None:
    cmd = one("add test1 503 data.f1:0x****0202 hdr.x[1].y:7 ingress.setb1(val:7, port:0x3) = A")
    assert cmd == Add(1, "test1", 503,
                      (KeyMatch("data.f1", Number("0x****0202")),
                       KeyMatch("hdr.x[1].y", Number("7"))),
                      ActionCall("ingress.setb1", (("val", Number("7")), ("port", Number("0x3")))),
                      "A")


def test_add_without_priority_lpm_prefix_and_dollar_names() -> None:
    cmd = one("ADD ipv4_lpm ipv4.dst:0x0a000000/8 extra$0.h:0b1*01 route()")
    assert isinstance(cmd, Add)
    assert cmd.priority is None
    assert cmd.keys == (KeyMatch("ipv4.dst", Number("0x0a000000"), 8),
                        KeyMatch("extra$0.h", Number("0b1*01")))
    assert cmd.action == ActionCall("route", ())


def test_packet_and_expect_data() -> None:
    cmds = parse_stf("packet 0 0102 03 # comment\n"
                     "expect 2 01** 03 $\n"
                     "expect 5\n"
                     "  EXPECT 1 ab\n")
    assert cmds == (Packet(1, 0, b"\x01\x02\x03"), Expect(2, 2, "01**03", True),
                    Expect(3, 5, None), Expect(4, 1, "AB", False))


def test_other_commands() -> None:
    text = """
        setdefault t a(x:1)
        remove all
        wait
        no_packet
        check_counter c(3) bytes >= 100
        check_counter d($A)
        mirroring_add 5 2
        mirroring_add_mc 6 7
        mirroring_delete 5
        mirroring_get 5
        mc_mgrp_create 1
        mc_node_create 400 6 7
        mc_node_update 0 8
        mc_node_associate 1 0
        counter_write c 1 2 3
        counter_read c 1
        register_write r 2 0x10
        register_reset r
        meter_set_rates m 1 0.5:10 1:20
        meter_array_set_rates m 2:1 3:4
    """
    cmds = parse_stf(text)
    assert cmds == (
        SetDefault(2, "t", ActionCall("a", (("x", Number("1")),))),
        RemoveAll(3), Wait(4), NoPacket(5),
        CheckCounter(6, "c", "3", "bytes", ">=", 100),
        CheckCounter(7, "d", "$A", None, "==", 0),
        MirroringAdd(8, 5, 2), MirroringAddMc(9, 6, 7), MirroringDelete(10, 5),
        ReadOnly(11, "mirroring_get"), McGroupCreate(12, 1), McNodeCreate(13, 400, (6, 7)),
        McNodeUpdate(14, 0, (8,)), McNodeAssociate(15, 1, 0), CounterWrite(16, "c", 1, 2, 3),
        ReadOnly(17, "counter_read"), RegisterWrite(18, "r", 2, 16), RegisterReset(19, "r"),
        MeterSetRates(20, "m", 1, ((0.5, 10), (1.0, 20))),
        MeterSetRates(21, "m", None, ((2.0, 1), (3.0, 4))))


@pytest.mark.parametrize("text,mask,value", [
    ("0x****0101", 0x0000FFFF, 0x0101),
    ("0x25**", 0xFF00, 0x2500),
    ("0b1*0", 0b101, 0b100),
    ("0xAb", 0xFF, 0xAB),
])
def test_number_digit_masks(text: str, mask: int, value: int) -> None:
    n = Number(text)
    assert n.digit_mask() == mask
    assert n.value() == value


def test_decimal_number_has_no_digit_mask() -> None:
    assert Number("300").digit_mask() is None
    assert Number("300").value() == 300


@pytest.mark.parametrize("text,fragment", [
    ("packet 0 123", "whole number of bytes"),
    ("packet x 12", "expected a port number"),
    ("packet 0 12zz", "bad packet data character 'z'"),
    ("expect 1 12$34", "bad packet data character '$'"),
    ("add t k:1 a(x:1", "expected ',', found end of line"),
    ("add t k:1", "expected an action name"),
    ("frobnicate 1", "unknown command 'frobnicate'"),
    ("remove t", "only 'remove all'"),
    ("mirroring_add 1 0x*1", "may not have '*' digits"),
    ("check_counter c(1) pkts == 1", "'packets' or 'bytes'"),
    ("setdefault t a() extra", "unexpected 'extra'"),
    ("add t k:1 a() @", "unexpected character '@'"),
])
def test_errors_name_the_line(text: str, fragment: str) -> None:
    with pytest.raises(StfError) as info:
        parse_stf("# first line\n" + text, "x.stf")
    assert str(info.value).startswith("x.stf:2: ")
    assert fragment in str(info.value)
