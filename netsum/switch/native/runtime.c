/* netsum-switch native backend: the program-independent runtime.
 *
 * The generator (switch/native/) writes the program's constants (NSLOTS, NREGS, ...) first,
 * then this file, then the generated parser, actions, controls and life cycle, then
 * glue.c (the Python module).  Values are kept as uint64_t holding the true value modulo
 * 2^64 (signed fields sign-extended), which is exact for every width the generator accepts
 * (at most 64 bits) and for every ring operation; operations that need the true value
 * (comparisons, right shifts, division, indices) are only emitted where the generator
 * proved the operand lies in a 64-bit window.  Everything here is reentrant per context:
 * several pipelines of one program may live in one process.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef uint64_t u64;
typedef int64_t i64;
typedef uint8_t u8;

#define MASK(w) ((w) >= 64 ? ~(u64)0 : (((u64)1 << (w)) - 1))
#define SEXT(v, w) ((w) >= 64 ? (u64)(v) : (u64)(((i64)((u64)(v) << (64 - (w)))) >> (64 - (w))))
#define SHL(a, b) ((b) < 64 ? (u64)(a) << (b) : (u64)0)
#define SHR(a, b) ((b) < 64 ? (u64)(a) >> (b) : (u64)0)
#define SAR(a, b) ((u64)((i64)(a) >> ((b) < 63 ? (b) : 63)))
#define DIVU(a, b) ((b) ? (u64)(a) / (u64)(b) : (u64)0)
#define MODU(a, b) ((b) ? (u64)(a) % (u64)(b) : (u64)0)

/* Status of a packet: anything but ST_OK stops it (the Python side maps the codes to the
 * same stats and exceptions as the reference path). */
enum { ST_OK = 0, ST_ASSERT = 1, ST_LOOP = 2, ST_PYERR = 3 };
/* Data-plane statistics kept here and folded into switch.stats.Stats on read. */
enum { S_DROPPED, S_PARSER_ERRORS, S_TRUNCATED, S_CHECKSUM_ERRORS, S_REGISTER_OOB,
       S_COUNTER_OOB, S_DIGESTS, S_COUNT };

static inline u64 divs(u64 a, u64 b) {      /* Python floor division, b != 0 checked */
    if (!b) return 0;
    __int128 x = (i64)a, y = (i64)b, q = x / y;
    if (x % y != 0 && ((x < 0) != (y < 0))) q -= 1;
    return (u64)q;
}
static inline u64 mods(u64 a, u64 b) {      /* Python modulo: the sign of the divisor */
    if (!b) return 0;
    __int128 x = (i64)a, y = (i64)b, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return (u64)r;
}
static inline u64 usat(u64 a, int w) {      /* a is exact and signed-representable */
    if ((i64)a < 0) return 0;
    return a > MASK(w) ? MASK(w) : a;
}
static inline u64 ssat(u64 a, int w) {
    i64 hi = (i64)(MASK(w) >> 1), lo = -hi - 1, v = (i64)a;
    return (u64)(v < lo ? lo : v > hi ? hi : v);
}

/* Big-endian bit access, MSB first, any alignment, width 1..64. */
static inline u64 ld_bits(const u8 *b, u64 pos, int w) {
    const u8 *s = b + (pos >> 3);
    int lead = (int)(pos & 7), nbits = lead + w, nbytes = (nbits + 7) >> 3;
    unsigned __int128 acc = 0;
    for (int i = 0; i < nbytes; i++) acc = (acc << 8) | s[i];
    acc >>= (nbytes * 8 - nbits);
    return (u64)acc & MASK(w);
}
static inline void or_bits(u8 *b, u64 pos, int w, u64 v) {   /* target bits are zero */
    u8 *s = b + (pos >> 3);
    int lead = (int)(pos & 7), nbits = lead + w, nbytes = (nbits + 7) >> 3;
    unsigned __int128 acc = (unsigned __int128)(v & MASK(w)) << (nbytes * 8 - nbits);
    for (int i = nbytes - 1; i >= 0; i--) { s[i] |= (u8)acc; acc >>= 8; }
}
static inline u64 ld8(const u8 *s) { return s[0]; }
static inline u64 ld16(const u8 *s) { return ((u64)s[0] << 8) | s[1]; }
static inline u64 ld32(const u8 *s) { return __builtin_bswap32(*(const uint32_t *)(const void *)s); }
static inline u64 ld64(const u8 *s) { return __builtin_bswap64(*(const u64 *)(const void *)s); }
static inline void st8(u8 *s, u64 v) { s[0] = (u8)v; }
static inline void st16(u8 *s, u64 v) { s[0] = (u8)(v >> 8); s[1] = (u8)v; }
static inline void st32(u8 *s, u64 v) { uint32_t x = __builtin_bswap32((uint32_t)v); memcpy(s, &x, 4); }
static inline void st64(u8 *s, u64 v) { u64 x = __builtin_bswap64(v); memcpy(s, &x, 8); }

/* -- hash algorithms over a byte string (as switch/calculations.py) ----------------------- */
static uint16_t CRC16_T[256];
static uint32_t CRC32_T[256];
static void init_crc_tables(void) {
    for (int i = 0; i < 256; i++) {
        uint32_t c16 = (uint32_t)i, c32 = (uint32_t)i;
        for (int k = 0; k < 8; k++) {
            c16 = (c16 & 1) ? (c16 >> 1) ^ 0xA001u : c16 >> 1;
            c32 = (c32 & 1) ? (c32 >> 1) ^ 0xEDB88320u : c32 >> 1;
        }
        CRC16_T[i] = (uint16_t)c16;
        CRC32_T[i] = c32;
    }
}
static u64 h_crc16(const u8 *d, Py_ssize_t n) {
    uint32_t crc = 0;
    for (Py_ssize_t i = 0; i < n; i++) crc = (crc >> 8) ^ CRC16_T[(crc ^ d[i]) & 0xFF];
    return crc & 0xFFFF;
}
static u64 h_crc32(const u8 *d, Py_ssize_t n) {
    uint32_t crc = 0xFFFFFFFFu;
    for (Py_ssize_t i = 0; i < n; i++) crc = (crc >> 8) ^ CRC32_T[(crc ^ d[i]) & 0xFF];
    return crc ^ 0xFFFFFFFFu;
}
static u64 h_csum16(const u8 *d, Py_ssize_t n) {   /* RFC 1071; 0xffff for a non-zero 0 */
    u64 sum = 0; int nonzero = 0;
    for (Py_ssize_t i = 0; i + 1 < n; i += 2) { u64 w = ((u64)d[i] << 8) | d[i + 1]; sum += w; nonzero |= w != 0; }
    if (n & 1) { sum += (u64)d[n - 1] << 8; nonzero |= d[n - 1] != 0; }
    u64 t = sum % 0xFFFF;
    if (t == 0 && nonzero) t = 0xFFFF;
    return ~t & 0xFFFF;
}
static u64 h_xor16(const u8 *d, Py_ssize_t n) {
    u64 r = 0;
    for (Py_ssize_t i = 0; i < n; i += 2) r ^= ((u64)d[i] << 8) | (i + 1 < n ? d[i + 1] : 0);
    return r;
}
static u64 h_identity(const u8 *d, Py_ssize_t n) {   /* the low 64 bits of the number */
    u64 r = 0;
    for (Py_ssize_t i = 0; i < n; i++) r = (r << 8) | d[i];
    return r;
}

/* -- state shared with Python: registers, counters ------------------------------------------ */
typedef struct { char *base; Py_ssize_t stride; Py_ssize_t size; Py_buffer view; int bound; } Reg;
typedef struct { u64 *pk, *by; Py_ssize_t size; Py_buffer v1, v2; int bound; } Ctr;

#define REG_GET(r, i, isz) ((isz) == 8 ? *(u64 *)(void *)((r)->base + (Py_ssize_t)(i) * (r)->stride) : \
    (isz) == 4 ? (u64)*(uint32_t *)(void *)((r)->base + (Py_ssize_t)(i) * (r)->stride) : \
    (isz) == 2 ? (u64)*(uint16_t *)(void *)((r)->base + (Py_ssize_t)(i) * (r)->stride) : \
    (u64)*(u8 *)((r)->base + (Py_ssize_t)(i) * (r)->stride))
#define REG_SET(r, i, isz, v) do { char *_p = (r)->base + (Py_ssize_t)(i) * (r)->stride; \
    if ((isz) == 8) *(u64 *)(void *)_p = (v); else if ((isz) == 4) *(uint32_t *)(void *)_p = (uint32_t)(v); \
    else if ((isz) == 2) *(uint16_t *)(void *)_p = (uint16_t)(v); else *(u8 *)_p = (u8)(v); } while (0)

/* -- match tables (entries come from switch.tables.Table, the one source of truth) --------- */
typedef struct { u64 *mask; int32_t *slots; Py_ssize_t cap; Py_ssize_t first, count; } Level;
typedef struct {
    int kind;             /* 0 keyless, 1 exact, 2 lpm (exact + one lpm), 3 generic */
    int nk, np, stride;   /* key fields, parameters per entry, words per entry */
    u64 *words; Py_ssize_t n;
    Level *levels; int nlevels;   /* exact: one level with all-ones masks */
    int def_act;          /* index in the table's action list, -1: nothing runs */
    u64 def_params[MAXP + 1];
} Table;

static inline u64 mix64(u64 x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
    return x;
}
static inline u64 key_hash(const u64 *k, const u64 *m, int nk) {
    u64 h = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < nk; i++) h = mix64(h ^ (k[i] & m[i])) + (u64)i;
    return h;
}
/* Entry layout: exact/lpm [key nk][act][params np]; generic [mask nk][value nk][lo nk][hi nk][act][params np] */
static const u64 *lookup(const Table *t, const u64 *k) {
    if (t->kind == 3) {
        int nk = t->nk;
        for (Py_ssize_t e = 0; e < t->n; e++) {
            const u64 *w = t->words + e * t->stride;
            int ok = 1;
            for (int i = 0; i < nk && ok; i++)
                ok = (k[i] & w[i]) == w[nk + i] && k[i] >= w[2 * nk + i] && k[i] <= w[3 * nk + i];
            if (ok) return w + 4 * nk;
        }
        return NULL;
    }
    for (int l = 0; l < t->nlevels; l++) {
        const Level *lv = &t->levels[l];
        if (!lv->cap) continue;
        u64 h = key_hash(k, lv->mask, t->nk);
        for (Py_ssize_t j = (Py_ssize_t)(h & (u64)(lv->cap - 1));; j = (j + 1) & (lv->cap - 1)) {
            int32_t s = lv->slots[j];
            if (s < 0) break;
            const u64 *w = t->words + (Py_ssize_t)s * t->stride;
            int ok = 1;
            for (int i = 0; i < t->nk && ok; i++) ok = (k[i] & lv->mask[i]) == w[i];
            if (ok) return w + t->nk;
        }
    }
    return NULL;
}
static void table_free(Table *t) {
    for (int l = 0; l < t->nlevels; l++) { PyMem_Free(t->levels[l].mask); PyMem_Free(t->levels[l].slots); }
    PyMem_Free(t->levels); PyMem_Free(t->words);
    t->levels = NULL; t->words = NULL; t->n = 0; t->nlevels = 0;
}

/* -- packet replication engine: multicast groups (from switch.replication.PRE) ----------- */
#define MAX_MGID 32767
typedef struct { int n; int32_t *pr; } Group;   /* pr: port, rid pairs */

/* -- per-pipeline context --------------------------------------------------------------- */
typedef struct {
    Reg reg[NREGS + 1];
    Ctr ctr[NCTRS + 1];
    Table tab[NTABLES + 1];
    Group *groups[MAX_MGID + 1];
    u64 stats[S_COUNT];
    u64 drop_port;
    PyObject *randint, *getrandbits, *digest;   /* callbacks into the shared Python objects */
    u8 *obuf;                                    /* deparse scratch: headers + max payload */
    NsSink *sink;        /* set while the C port loop runs a frame: outputs go there (nsio.h) */
} Ctx;

typedef struct {
    u8 Vbuf[VBYTES] __attribute__((aligned(64)));
    u8 *V;        /* vector ranges' bytes, big-endian (cvec.py): Vbuf, or a multicast copy's
                   * original's when egress never writes them */
    u64 F[NSLOTS];
    const u8 *data;
    Py_ssize_t len, off;
    int exited;
    u64 truncate;
    int digest;
} Pkt;

static int py_randint(Ctx *c, u64 lo, u64 hi, u64 *out) {   /* lo <= hi, both unsigned */
    PyObject *r = PyObject_CallFunction(c->randint, "KK", (unsigned long long)lo, (unsigned long long)hi);
    if (!r) return ST_PYERR;
    *out = PyLong_AsUnsignedLongLongMask(r);
    Py_DECREF(r);
    return PyErr_Occurred() ? ST_PYERR : ST_OK;
}
static int py_randbits(Ctx *c, u64 *out) {
    PyObject *r = PyObject_CallFunction(c->getrandbits, "i", 32);
    if (!r) return ST_PYERR;
    *out = PyLong_AsUnsignedLongLongMask(r);
    Py_DECREF(r);
    return PyErr_Occurred() ? ST_PYERR : ST_OK;
}
