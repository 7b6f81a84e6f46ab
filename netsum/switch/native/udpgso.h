/* UDP GSO/GRO for netsum's C port loops: the switch's (ioloop.c) and the workers'
 * (workers/wgso.c) are compiled with this text in front of them, so both read a coalesced
 * buffer's segment size and hold a GSO send to the same limits (netsum/udpgso.py has the
 * rules in Python). */
#include <netinet/udp.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif
#define GSO_SEGS 64              /* datagrams per GSO send (UDP_MAX_SEGMENTS: 64, 128 since 6.9) */
#define GSO_BYTES 65507          /* UDP payload of one IPv4 datagram, the most one send holds */

/* The segment size of a received buffer that arrived coalesced (its UDP_GRO cmsg: an int, or
 * a 16-bit value on kernels that wrote one), else 0: one datagram. */
static inline int64_t udp_gro_size(struct msghdr *h) {
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(h); cm; cm = CMSG_NXTHDR(h, cm)) {
        if (cm->cmsg_level != SOL_UDP || cm->cmsg_type != UDP_GRO) continue;
        if (cm->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int v; memcpy(&v, CMSG_DATA(cm), sizeof v); return v;
        }
        if (cm->cmsg_len >= CMSG_LEN(sizeof(uint16_t))) {
            uint16_t v; memcpy(&v, CMSG_DATA(cm), sizeof v); return v;
        }
    }
    return 0;
}
