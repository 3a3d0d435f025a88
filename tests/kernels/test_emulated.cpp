// drk's kernels (kernels/*.cu, the very source nvcc builds) run on the CPU
// under tests/kernels/emulate.h, held against tests/kernels/reference.h:
// compare, hash and poison on many lengths and offsets, each launch shape
// of the list (one thread, partial warps, 2-D and 3-D blocks and grids,
// grids larger than the work), results equal to the reference, hashes
// equal across shapes and alignments, poison exact inside its range. Each
// buffer is its own allocation ending where the range ends, and under
// AddressSanitizer the bytes before the range are poisoned, so a kernel
// that touches a byte outside its range is caught in the sanitizer build.
// No GPU needed: this is the kernels' logic, not the hardware's behaviour
// (the GPU suite's kernels_check is that).
#include "tests/kernels/emulate.h"

#include "kernels/kernels.cu"

#include <string.h>

#include "tests/kernels/reference.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

typedef unsigned long long u64;

static long failures, checks;

#define EXPECT(cond, ...)                                                                                              \
    do {                                                                                                               \
        checks++;                                                                                                      \
        if (!(cond) && failures++ < 20) {                                                                              \
            fprintf(stderr, "test_emulated: line %d: %s: ", __LINE__, #cond);                                         \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fprintf(stderr, "\n");                                                                                     \
        }                                                                                                              \
    } while (0)

// Small blocks: every emulated thread is an OS thread, and each shuffle two
// barriers.
static const emu_shape shapes[] = {
    {1, 1, 1, 1, 1, 1}, {1, 1, 1, 32, 1, 1}, {2, 1, 1, 33, 1, 1}, {2, 1, 1, 64, 1, 1},
    {1, 1, 1, 8, 4, 2}, {1, 2, 1, 5, 3, 3},  {3, 1, 1, 40, 1, 1}, {2, 2, 2, 7, 1, 1},
};
static const unsigned nshapes = sizeof shapes / sizeof shapes[0];
static unsigned launches;

static emu_shape next_shape()
{
    return shapes[launches++ % nshapes];
}

static u64 blocks_of(emu_shape s)
{
    return (u64)s.gx * s.gy * s.gz;
}

static u64 rng = 0x9e3779b97f4a7c15ull;
static unsigned char next_byte()
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned char)(rng >> 24);
}

// A buffer of off + n bytes whose range [off, off + n) ends the allocation;
// the bytes before it are poisoned (where ASan's 8-byte granules allow).
struct buffer {
    unsigned char *base, *p;
    u64 off;
};

static buffer make(u64 off, u64 n)
{
    buffer b;
    b.base = (unsigned char *)malloc(off + n ? off + n : 1);
    if (!b.base) {
        fprintf(stderr, "test_emulated: out of memory\n");
        exit(1);
    }
    b.p = b.base + off;
    b.off = off;
    return b;
}

static void seal(buffer &b)
{
    POISON(b.base, b.off);
}

static void release(buffer &b)
{
    UNPOISON(b.base, b.off);
    free(b.base);
}

static drk_compare_result compare(const unsigned char *a, const unsigned char *b, u64 n, emu_shape s)
{
    drk_compare_result r;
    memset(&r, 0, sizeof r);
    emu_launch(s, [&] { drk_compare(a, b, n, &r); });
    return r;
}

static drk_hash_result hash(const unsigned char *p, u64 n, emu_shape s)
{
    drk_hash_result r;
    memset(&r, 0, sizeof r);
    emu_launch(s, [&] { drk_hash(p, n, &r); });
    return r;
}

static const u64 lengths[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 47, 64, 257, 1000};
static const unsigned nlengths = sizeof lengths / sizeof lengths[0];
static const unsigned offsets[] = {0, 1, 7, 8, 9, 15};
static const unsigned noffsets = sizeof offsets / sizeof offsets[0];

static void compare_cases()
{
    for (unsigned li = 0; li < nlengths; li++)
        for (unsigned ai = 0; ai < noffsets; ai++)
            for (unsigned bi = 0; bi < noffsets; bi += 2) {
                u64 n = lengths[li];
                unsigned oa = offsets[ai], ob = offsets[(ai + bi) % noffsets];
                buffer a = make(oa, n), b = make(ob, n);
                for (u64 i = 0; i < n; i++)
                    a.p[i] = b.p[i] = next_byte();
                seal(a), seal(b);
                for (int pattern = 0; pattern < 3; pattern++) {
                    if (pattern == 1 && n) // a few bytes, the first and last among them sometimes
                        for (int k = 0; k < 3; k++)
                            b.p[(k == 0 && li % 2) ? 0 : (k == 1 && li % 3) ? n - 1 : next_byte() % n] ^= 0x10;
                    if (pattern == 2)
                        for (u64 i = 0; i < n; i++)
                            b.p[i] = (unsigned char)~a.p[i];
                    ref_diff want = ref_compare(a.p, b.p, n);
                    emu_shape s = next_shape();
                    drk_compare_result r = compare(a.p, b.p, n, s);
                    EXPECT(r.done == 1 && r.blocks == blocks_of(s) && r.ndiff == want.ndiff &&
                               r.first == want.first && r.last == want.last,
                           "compare n %llu a+%u b+%u pattern %d shape %ux%ux%u/%ux%ux%u: done %u blocks %llu ndiff "
                           "%llu first %llu last %llu, expected %llu %llu %llu",
                           n, oa, ob, pattern, s.gx, s.gy, s.gz, s.bx, s.by, s.bz, r.done, r.blocks, r.ndiff, r.first,
                           r.last, want.ndiff, want.first, want.last);
                }
                release(a), release(b);
            }
}

static void hash_cases()
{
    for (unsigned li = 0; li < nlengths; li++) {
        u64 n = lengths[li];
        unsigned char *bytes = (unsigned char *)malloc(n + 1);
        for (u64 i = 0; i < n; i++)
            bytes[i] = next_byte();
        u64 want = ref_hash(bytes, n);
        for (unsigned off = 0; off < 16; off++) {
            buffer b = make(off, n);
            memcpy(b.p, bytes, n);
            seal(b);
            emu_shape s = next_shape();
            drk_hash_result r = hash(b.p, n, s);
            EXPECT(r.done == 1 && r.hash == want && r.n == n && r.blocks == blocks_of(s),
                   "hash n %llu +%u shape %ux%ux%u/%ux%ux%u: done %u hash %016llx, expected %016llx", n, off, s.gx,
                   s.gy, s.gz, s.bx, s.by, s.bz, r.done, r.hash, want);
            release(b);
        }
        // A change anywhere changes it.
        if (n) {
            bytes[next_byte() % n] ^= 1;
            drk_hash_result r = hash(bytes, n, next_shape());
            EXPECT(r.done == 1 && r.hash != want && r.hash == ref_hash(bytes, n), "hash n %llu after a flip", n);
        }
        free(bytes);
    }
}

static void poison_cases()
{
    static const u64 patterns[] = {0x0123456789abcdefull, 0xa5a5a5a5a5a5a5a5ull};
    for (unsigned li = 0; li < nlengths; li++)
        for (unsigned off = 0; off < 16; off++) {
            u64 n = lengths[li], pat = patterns[(li + off) % 2];
            buffer b = make(off, n);
            memset(b.p, 0x33, n);
            seal(b);
            emu_shape s = next_shape();
            emu_launch(s, [&] { drk_poison(b.p, n, pat); });
            u64 bad = ~0ull;
            for (u64 i = 0; i < n && bad == ~0ull; i++)
                if (b.p[i] != ref_poison_byte(pat, i))
                    bad = i;
            EXPECT(bad == ~0ull, "poison n %llu +%u shape %ux%ux%u/%ux%ux%u: byte %llu", n, off, s.gx, s.gy, s.gz, s.bx,
                   s.by, s.bz, bad);
            release(b);
        }
}

int main()
{
    compare_cases();
    hash_cases();
    poison_cases();
    // The shape a GPU run would use, once: a 256-thread block.
    buffer a = make(5, 70000), b = make(3, 70000);
    for (u64 i = 0; i < 70000; i++)
        a.p[i] = b.p[i] = next_byte();
    b.p[69999] ^= 4;
    drk_compare_result r = compare(a.p, b.p, 70000, emu_shape{2, 1, 1, DRK_KERNELS_BLOCK, 1, 1});
    EXPECT(r.done == 1 && r.ndiff == 1 && r.first == 69999 && r.last == 69999, "256-thread compare: ndiff %llu",
           r.ndiff);
    release(a), release(b);
    printf("test_emulated: %ld checks in %u emulated launches, %ld failed\n", checks, launches, failures);
    return failures ? 1 : 0;
}
