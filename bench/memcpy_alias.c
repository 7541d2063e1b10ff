/* The probe behind core/src/copy.rs: glibc's memcpy bandwidth for 64 KiB against the distance
 * of the destination past the source modulo 4 KiB, beside a loop of 16-byte loads and stores.
 * On AMD Zen with glibc 2.36 (rep movsb from 4 KiB on) distances 1-31 run ~15x slower.
 *
 *   gcc -O2 bench/memcpy_alias.c -o /tmp/memcpy_alias && /tmp/memcpy_alias
 */
#include <emmintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void copy_by_16(char *dst, const char *src, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm_storeu_si128((__m128i *)(dst + i), _mm_loadu_si128((const __m128i *)(src + i)));
    memcpy(dst + i, src + i, n - i);
}

/* Best of 100 copies, in GB/s. */
static double best_gbs(void (*copy)(char *, const char *, size_t), char *dst, const char *src, size_t n) {
    double best = 1e30;
    for (int r = 0; r < 100; r++) {
        double t = now_ns();
        copy(dst, src, n);
        double e = now_ns() - t;
        if (e < best) best = e;
    }
    return n / best;
}

static void by_memcpy(char *dst, const char *src, size_t n) { memcpy(dst, src, n); }

int main(void) {
    const size_t n = 64 << 10;
    char *src = aligned_alloc(4096, n + 8192), *dst = aligned_alloc(4096, n + 8192);
    memset(src, 0x3c, n + 8192);
    memset(dst, 0, n + 8192);
    const int distances[] = {0, 1, 8, 16, 31, 32, 48, 64, 2048, 4080};
    printf("# 64 KiB copies, page-aligned source; distance = (dst - src) mod 4096\n");
    printf("# distance  memcpy GB/s  16-byte loop GB/s\n");
    for (size_t i = 0; i < sizeof distances / sizeof *distances; i++) {
        int d = distances[i];
        printf("%10d %12.1f %18.1f\n", d, best_gbs(by_memcpy, dst + d, src, n), best_gbs(copy_by_16, dst + d, src, n));
    }
    free(src);
    free(dst);
    return 0;
}
