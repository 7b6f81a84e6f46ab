/* netsum-switch native backend: the interface between a generated pipeline module and the
 * daemon's C port loop (ioloop.c), two separately built extension modules.
 *
 * The pipeline module hands out an NsPipe (in a capsule named "netsum.native.pipe"); the
 * loop calls `process` once per received frame, with the GIL and the Device lock held, and
 * gets every output frame through `sink->emit` instead of a Python list.  Both sides check
 * NS_ABI, so a module built from an older source is never called with a different layout.
 */
#ifndef NETSUM_NSIO_H
#define NETSUM_NSIO_H
#include <stdint.h>

#define NS_ABI 1

typedef struct NsSink NsSink;
struct NsSink {
    /* Copy one output frame; 0 on success, -1 with a Python exception set. */
    int (*emit)(NsSink *sink, uint64_t port, const uint8_t *frame, Py_ssize_t len);
};

typedef struct {
    int abi;                  /* NS_ABI */
    void *ctx;                /* the pipeline's context (kept alive by the capsule) */
    /* Run one frame; the status codes of runtime.c (0 ok, 1 assert, 2 loop limit,
     * 3 Python exception set). */
    int (*process)(void *ctx, uint64_t port, const uint8_t *data, Py_ssize_t len,
                   uint64_t now, NsSink *sink);
} NsPipe;
#endif
