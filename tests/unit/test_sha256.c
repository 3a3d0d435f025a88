/* SHA-256 against FIPS 180-4's vectors and digests Python's hashlib gave
 * for patterned buffers around the block and padding boundaries; both
 * implementations (SHA extensions where the CPU has them, and portable);
 * updates in any chunking equal one call; the throughput of each, printed. */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "base/sha256.h"
#include "tests/unit/check.h"

static void hex(const unsigned char d[32], char out[65])
{
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static int digest_is(const void *data, size_t len, const char *want)
{
    unsigned char d[32];
    char h[65];
    drk_sha256(data, len, d);
    hex(d, h);
    if (strcmp(h, want) != 0) {
        fprintf(stderr, "sha256 (%s) of %zu bytes: %s, want %s\n", drk_sha256_impl(), len, h, want);
        return 0;
    }
    return 1;
}

static unsigned char *pattern(size_t n)
{
    unsigned char *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(i * 131 + 7);
    return b;
}

static double mb_per_s(const unsigned char *buf, size_t n)
{
    unsigned char d[32];
    struct timespec t0, t1;
    int reps = 16;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < reps; i++)
        drk_sha256(buf, n, d);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    return (double)n * reps / s / 1e6;
}

static void vectors(void)
{
    static const struct {
        const char *msg, *digest;
    } fips[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnop"
         "qrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    for (size_t i = 0; i < sizeof fips / sizeof *fips; i++)
        CHECK(digest_is(fips[i].msg, strlen(fips[i].msg), fips[i].digest));
    unsigned char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    CHECK(digest_is(a, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
    free(a);
    /* hashlib.sha256(bytes((i*131+7)&255 for i in range(n))) */
    static const struct {
        size_t n;
        const char *digest;
    } pat[] = {
        {55, "16ed9c4697ca11d5f6fb25ea7900252dd4cb97215d7f6d0b2bb3e2a86ac0ec72"},
        {56, "939ada93b2fe1e9c596d767bb408567c83e253667f0b25e5be8e16f35f2cbac9"},
        {63, "6073f83b09ae82016cdbe24c18996c48f0eaa08ca675d0f6b90b807fc29e0149"},
        {64, "b337ba9b0c69c391364e985fdcb23a889887e59800832c92fbfa22b8a3c40304"},
        {65, "9d6a3fb113b586b4ab97bc11c993a27bd9b7bbcb756e0646083dc47a679600e6"},
        {119, "9773fbac8194c3d789af101b49b6a26073076895ef6e0f658432849dd477a43f"},
        {120, "070a538f085dd94821d4dc197c5c8b791051891d4fa2a1bf25d3c275236676f7"},
        {262157, "0b804728c860303171b376eeb3231b18b73528c605b6e9f0114b6902f1bedb66"},
    };
    for (size_t i = 0; i < sizeof pat / sizeof *pat; i++) {
        unsigned char *b = pattern(pat[i].n);
        CHECK(digest_is(b, pat[i].n, pat[i].digest));
        free(b);
    }
}

int main(void)
{
    const char *accel = drk_sha256_impl();
    printf("sha256: this CPU uses %s\n", accel);
    vectors();
    drk_sha256_force_portable(1);
    CHECK(strcmp(drk_sha256_impl(), "portable") == 0);
    vectors();
    drk_sha256_force_portable(0);
    CHECK(strcmp(drk_sha256_impl(), accel) == 0);

    /* Both implementations agree on every length to 600 bytes; chunked
     * updates (1 to 97 bytes at a time) equal the one-shot digest. */
    unsigned char *buf = pattern(600);
    uint32_t rng = 12345;
    for (size_t n = 0; n <= 600; n++) {
        unsigned char one[32], port[32], chunked[32];
        drk_sha256(buf, n, one);
        drk_sha256_force_portable(1);
        drk_sha256(buf, n, port);
        drk_sha256_force_portable(0);
        drk_sha256_ctx s;
        drk_sha256_init(&s);
        for (size_t off = 0; off < n;) {
            rng = rng * 1103515245 + 12345;
            size_t take = 1 + (rng >> 16) % 97;
            if (take > n - off)
                take = n - off;
            drk_sha256_update(&s, buf + off, take);
            off += take;
        }
        drk_sha256_final(&s, chunked);
        CHECK(memcmp(one, port, 32) == 0);
        CHECK(memcmp(one, chunked, 32) == 0);
    }
    free(buf);

    size_t n = 4 << 20;
    unsigned char *big = pattern(n);
    double fast = mb_per_s(big, n);
    drk_sha256_force_portable(1);
    double slow = mb_per_s(big, n);
    drk_sha256_force_portable(0);
    printf("sha256 throughput: %s %.0f MB/s, portable %.0f MB/s\n", accel, fast, slow);
    free(big);
    return CHECK_DONE();
}
