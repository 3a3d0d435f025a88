/* A fragmenting allocation pattern whose live set always fits (-lcuda,
 * cuMemAlloc/cuMemFree only). Sized from the device's memory, so it means
 * the same on an H200 and on a small GPU.
 *
 * Four cycles. Each fills a region of 53% of device memory with groups of
 * [pin][odd-sized block][g big blocks], all sizes but the odd ones multiples
 * of 2 MiB, then frees the big and odd blocks: the pins stay, so the freed
 * memory is holes of at most g big blocks between pins. The next cycle asks
 * only for blocks larger than any such hole. Pins live two cycles more; a
 * short-lived odd block comes and goes in every group. The live set peaks
 * near 56% of device memory, yet a pool that reuses freed memory only in
 * place (pages stay where first mapped, as in a caching allocator that
 * cannot stitch) needs 53% + 53% of device memory by the second cycle and
 * runs out; the driver's cuMemAlloc, or a pool that maps free pages into new
 * ranges, completes.
 *
 * Every block is written in full (cuMemsetD8, its own byte) and its first,
 * middle and last bytes read back when allocated and again when freed, so a
 * wrong or overlapping pointer, or a page moved under live data, is caught.
 *
 * Exit status: 0 completed; 3 cuMemAlloc returned CUDA_ERROR_OUT_OF_MEMORY;
 * 4 a block did not hold its bytes; 1 any other failure. The last stdout
 * line is JSON: {"alloc_frag": "completed" | "out_of_memory", ...} with the
 * live bytes the program itself counted (sizes as asked). Writes
 * {"workload", "pid"} to $DRK_TEST_COUNTS, if set, before anything else. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CU_CHECK_PROGRAM "alloc_frag"
#include "tests/gpu/programs/cu_check.h"
#include "tests/gpu/programs/test_counts.h"

enum { EXIT_OOM = 3, EXIT_BYTES = 4, CYCLES = 4 };
#define PAGE ((size_t)2 << 20)

typedef struct {
    CUdeviceptr p;
    size_t size;
    unsigned char byte;
    int cycle, pin;
} blk;

static blk *blocks; /* every block ever allocated; p == 0 once freed */
static size_t nblocks, cap_blocks;
static size_t total_mem, live_bytes, peak_live, live_blocks, peak_blocks, n_allocs, n_frees;
static uint32_t lcg = 20240613u;
static int cur_cycle;
static struct timespec t0;

static uint32_t rnd(void)
{
    lcg = lcg * 1664525u + 1013904223u;
    return lcg >> 8;
}

static double since_start(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
}

/* The first, middle and last bytes hold the block's byte. */
static void probe(const blk *b, const char *when)
{
    const size_t at[3] = {0, b->size / 2, b->size - 1};
    for (int i = 0; i < 3; i++) {
        unsigned char got = 0;
        CU_CHECK(cuMemcpyDtoH(&got, b->p + at[i], 1));
        if (got != b->byte) {
            fprintf(stderr,
                    "alloc_frag: %s: block of %zu bytes at 0x%llx (cycle %d%s) holds 0x%02x at +%zu, expected 0x%02x\n",
                    when, b->size, (unsigned long long)b->p, b->cycle, b->pin ? ", pin" : "", got, at[i], b->byte);
            exit(EXIT_BYTES);
        }
    }
}

static blk *alloc_block(size_t size, int pin)
{
    if (nblocks == cap_blocks) {
        cap_blocks = cap_blocks ? 2 * cap_blocks : 4096;
        blk *nb = realloc(blocks, cap_blocks * sizeof *nb);
        if (!nb) {
            fprintf(stderr, "alloc_frag: out of host memory\n");
            exit(1);
        }
        blocks = nb;
    }
    blk *b = &blocks[nblocks];
    CUresult r = cuMemAlloc(&b->p, size);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        fprintf(stderr, "alloc_frag: cuMemAlloc(%zu) in cycle %d: %s with %zu bytes live (%.1f%% of %zu) after %.1f s\n",
                size, cur_cycle, cu_error_name(r), live_bytes, 100.0 * (double)live_bytes / (double)total_mem,
                total_mem, since_start());
        printf("{\"alloc_frag\": \"out_of_memory\", \"cycle\": %d, \"request_bytes\": %zu, \"live_bytes\": %zu, "
               "\"live_blocks\": %zu, \"total_bytes\": %zu, \"peak_live_bytes\": %zu, \"allocs\": %zu, "
               "\"frees\": %zu}\n",
               cur_cycle, size, live_bytes, live_blocks, total_mem, peak_live, n_allocs, n_frees);
        fflush(stdout);
        exit(EXIT_OOM);
    }
    CU_CHECK(r);
    nblocks++;
    b->size = size;
    b->byte = (unsigned char)(1 + n_allocs % 251); /* never 0: fresh memory is often zero */
    b->cycle = cur_cycle;
    b->pin = pin;
    CU_CHECK(cuMemsetD8(b->p, b->byte, size));
    probe(b, "after cuMemsetD8");
    n_allocs++;
    live_bytes += size;
    live_blocks++;
    if (live_bytes > peak_live)
        peak_live = live_bytes;
    if (live_blocks > peak_blocks)
        peak_blocks = live_blocks;
    return b;
}

static void free_block(blk *b)
{
    probe(b, "before cuMemFree");
    CU_CHECK(cuMemFree(b->p));
    b->p = 0;
    n_frees++;
    live_bytes -= b->size;
    live_blocks--;
}

/* An odd size: anything from 1 byte to just under 3 MiB. */
static size_t odd_size(void)
{
    return 1 + rnd() % (3u << 20);
}

int main(void)
{
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* Written first: an out-of-memory exit must still name the process. */
    if (write_test_counts("{\"workload\": \"alloc_frag\", \"pid\": %d}\n", (int)getpid()) != 0)
        return 1;
    CUdevice dev;
    CUcontext ctx;
    CU_CHECK(cuInit(0));
    CU_CHECK(cuDeviceGet(&dev, 0));
    CU_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU_CHECK(cuCtxSetCurrent(ctx));
    size_t free0 = 0, total_info = 0;
    CU_CHECK(cuDeviceTotalMem(&total_mem, dev));
    CU_CHECK(cuMemGetInfo(&free0, &total_info));

    /* Device memory sizes everything, so that runs agree; a GPU others use
     * (under 95% free) is sized from what is free instead. */
    size_t basis = total_mem;
    if (free0 < total_mem / 100 * 95) {
        basis = free0;
        fprintf(stderr, "alloc_frag: only %zu of %zu bytes free; sizing from the free memory\n", free0, total_mem);
    }
    const size_t region = basis / 100 * 53;
    size_t unit = region / PAGE / 800; /* L, in pages: cycle 4 still has ~9 blocks */
    if (unit < 1)
        unit = 1;
    const size_t pin_pages = unit / 2 ? unit / 2 : 1;

    /* Cycle k: g big blocks a group, sizes in [lo, hi] pages; lo of the next
     * cycle is past the largest hole this one leaves (g bigs and an odd
     * block, under 2 pages, coalesced between two pins). */
    const size_t g[CYCLES] = {7, 3, 1, 1};
    size_t lo[CYCLES], hi[CYCLES];
    lo[0] = unit, hi[0] = 2 * unit;
    for (int k = 1; k < CYCLES; k++) {
        lo[k] = g[k - 1] * hi[k - 1] + 2;
        hi[k] = lo[k] + lo[k] / 4 + 1;
    }
    fprintf(stderr, "alloc_frag: %zu bytes of device memory (%zu free), region %zu bytes, unit %zu pages\n",
            total_mem, free0, region, unit);

    for (cur_cycle = 1; cur_cycle <= CYCLES; cur_cycle++) {
        const int k = cur_cycle - 1;
        /* Pins of two cycles ago go: their region becomes one hole. */
        for (size_t i = 0; i < nblocks; i++)
            if (blocks[i].p && blocks[i].pin && blocks[i].cycle <= cur_cycle - 3)
                free_block(&blocks[i]);
        /* Filled up to the region, never past it: the last big block takes
         * what is left if that is at least lo. */
        size_t filled = 0, first = nblocks;
        int full = 0;
        while (!full && filled + (pin_pages + 2 + lo[k]) * PAGE <= region) {
            filled += alloc_block(pin_pages * PAGE, 1)->size;
            filled += alloc_block(odd_size(), 0)->size;
            for (size_t j = 0; j < g[k] && !full; j++) {
                size_t pages = lo[k] + rnd() % (hi[k] - lo[k] + 1), left = (region - filled) / PAGE;
                if (pages > left) {
                    pages = left;
                    full = 1;
                }
                if (pages >= lo[k])
                    filled += alloc_block(pages * PAGE, 0)->size;
            }
            free_block(alloc_block(odd_size(), 0)); /* short-lived */
        }
        /* Every block of this cycle but the pins is freed: holes between pins. */
        for (size_t i = first; i < nblocks; i++)
            if (blocks[i].p && !blocks[i].pin)
                free_block(&blocks[i]);
        for (size_t i = 0; i < nblocks; i++)
            if (blocks[i].p)
                probe(&blocks[i], "at the end of a cycle");
        fprintf(stderr, "alloc_frag: cycle %d: %zu blocks, sizes %zu-%zu pages, %zu bytes live, peak %zu, %.1f s\n",
                cur_cycle, nblocks - first, lo[k], hi[k], live_bytes, peak_live, since_start());
    }
    for (size_t i = 0; i < nblocks; i++)
        if (blocks[i].p)
            free_block(&blocks[i]);
    CU_CHECK(cuDevicePrimaryCtxRelease(dev));

    printf("{\"alloc_frag\": \"completed\", \"cycles\": %d, \"total_bytes\": %zu, \"region_bytes\": %zu, "
           "\"unit_pages\": %zu, \"allocs\": %zu, \"frees\": %zu, \"peak_live_bytes\": %zu, "
           "\"peak_live_blocks\": %zu}\n",
           CYCLES, total_mem, region, unit, n_allocs, n_frees, peak_live, peak_blocks);
    free(blocks);
    return 0;
}
