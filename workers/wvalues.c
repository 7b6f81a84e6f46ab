/* The per-value loops of the compiled worker core (workers/native.py compiles this file
 * before workers/wcore.c, into one module): a block quantized into its big-endian int32
 * values, and a block's big-endian sums dequantized into float32, 4 lanes at a time in GCC's
 * vector extensions, which the baseline x86-64 (SSE2) runs as SIMD -- the auto-vectoriser
 * leaves these loops scalar there, for want of a vector byte swap -- and any other target as
 * plain code.  Why the float32 arithmetic gives the reference's values: wcore.c's quantize()
 * and dequantize(), which call these where it does. */
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef uint32_t u32x4 __attribute__((vector_size(16)));
typedef int32_t i32x4 __attribute__((vector_size(16)));
typedef float f32x4 __attribute__((vector_size(16)));
#define TWO23 8388608.0f                /* 2^23: float32's integers begin here */
#define F32_MAX_EXP 127                 /* the largest power of two float32 holds */

static inline u32x4 swap4(u32x4 q) {    /* each lane's bytes reversed: big-endian <-> host */
    const u32x4 m = {0xff00u, 0xff00u, 0xff00u, 0xff00u};
    return (q << 24) | ((q & m) << 8) | ((q >> 8) & m) | (q >> 24);
}

/* rint(y) of a float32: from 2^23 on every float32 is an integer; below, |y| + 2^23 lies
 * in [2^23, 2^24], where float32's spacing is 1, so the addition rounds |y| to an integer,
 * ties to even (2^23 is even), and the subtraction is exact; the sign is put back */
static inline float rint_f32(float y) {
    float a = fabsf(y);
    return a < TWO23 ? copysignf((a + TWO23) - TWO23, y) : y;
}

/* k values rint(x * f) as big-endian int32 at v (f a power of two, |x * f| <= 2^30) */
static void quantize_f32(uint8_t *restrict v, const float *restrict x, float f, int64_t k) {
    int64_t j = 0;
    for (; j + 4 <= k; j += 4) {
        f32x4 y;
        memcpy(&y, x + j, 16);
        y *= f;
        const u32x4 sign = (u32x4)y & 0x80000000u;
        const f32x4 a = (f32x4)((u32x4)y & 0x7fffffffu);
        const u32x4 small = (u32x4)(a < TWO23);          /* rint_f32, lane by lane */
        const u32x4 r = ((u32x4)((a + TWO23) - TWO23) & small) | ((u32x4)a & ~small);
        u32x4 q = swap4((u32x4)__builtin_convertvector((f32x4)(r | sign), i32x4));
        memcpy(v + 4 * j, &q, 16);
    }
    for (; j < k; j++) {
        uint32_t q = __builtin_bswap32((uint32_t)(int32_t)rint_f32(x[j] * f));
        memcpy(v + 4 * j, &q, 4);
    }
}

/* n big-endian int32 at v times f (a power of two) into float32 at out; whether any came
 * out +-Inf */
static int dequantize_f32(float *restrict out, const uint8_t *restrict v, float f, int64_t n) {
    int64_t j = 0;
    i32x4 inf = {0, 0, 0, 0};
    for (; j + 4 <= n; j += 4) {
        u32x4 q;
        memcpy(&q, v + 4 * j, 16);
        f32x4 y = __builtin_convertvector((i32x4)swap4(q), f32x4) * f;
        memcpy(out + j, &y, 16);
        inf |= ((u32x4)y & 0x7fffffffu) == 0x7f800000u;
    }
    int big = (inf[0] | inf[1] | inf[2] | inf[3]) != 0;
    for (; j < n; j++) {
        uint32_t q;
        memcpy(&q, v + 4 * j, 4);
        out[j] = (float)(int32_t)__builtin_bswap32(q) * f;
        big |= isinf(out[j]);
    }
    return big;
}
