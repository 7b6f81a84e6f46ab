/* netsum core library: the declarations every P4_16 program may use (P4_16 spec, "core library").
   Written for netsum's compiler from the language specification. */
/* The guard macro is the one programs test (#ifdef _CORE_P4_) to know core.p4 was included. */
#ifndef _CORE_P4_
#define _CORE_P4_

/* Error codes in the order the specification lists them; BMv2 numbers them from 0. */
error {
    NoError,
    PacketTooShort,
    NoMatch,
    StackOutOfBounds,
    HeaderTooShort,
    ParserTimeout,
    ParserInvalidArgument
}

extern packet_in {
    void extract<T>(out T hdr);
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    T lookahead<T>();
    void advance(in bit<32> sizeInBits);
    bit<32> length();
}

extern packet_out {
    void emit<T>(in T hdr);
}

extern void verify(in bool check, in error toSignal);
// Checked at compile time (netsum.p4c.static_assert): true, or an error when check is false.
extern bool static_assert(bool check, string message);
extern bool static_assert(bool check);

@noWarn("unused")
action NoAction() {}

match_kind {
    exact,
    ternary,
    lpm
}

#endif
