/* The allocation trace reader and writer (alloc/trace.c): a round trip of
 * every op form and extreme values, dense slots, long traces across read
 * chunks, the header writer's bounds, and the reader's refusals. */
#include <string.h>

#include "alloc/trace.h"
#include "tests/unit/check.h"

/* `text` as a readable FILE (a temporary file: fmemopen has no fileno
 * semantics we rely on, but tmpfile is the plainest). */
static FILE *file_of(const char *text, size_t len)
{
    FILE *f = tmpfile();
    if (!f || fwrite(text, 1, len, f) != len || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "tmpfile failed\n");
        exit(1);
    }
    return f;
}

/* Reads `text` to the end; returns the error line (0: none) and copies the
 * error message. */
static unsigned long long read_all(const char *text, char *msg, size_t msglen)
{
    FILE *f = file_of(text, strlen(text));
    drk_trace_reader r;
    int got = drk_trace_open(&r, f);
    drk_trace_op op;
    if (got == 0)
        while ((got = drk_trace_next(&r, &op)) > 0)
            ;
    unsigned long long line = got < 0 ? r.line : 0;
    snprintf(msg, msglen, "%s", got < 0 ? r.error : "");
    drk_trace_close(&r);
    fclose(f);
    return line;
}

static void test_round_trip(void)
{
    drk_trace_header h = {.page_size = 2097152, .device_bytes = 150ULL << 30};
    snprintf(h.program, sizeof h.program, "python\ttrain.py\n--x");
    snprintf(h.recorded_by, sizeof h.recorded_by, "drk 0.1.0");
    const drk_trace_op ops[] = {
        {.t_ns = 0, .kind = 'a', .id = 1, .size = 1, .stream = 5 /* ignored: 'a' has none */},
        {.t_ns = 10, .kind = 'A', .id = UINT64_MAX, .size = UINT64_MAX, .stream = DRK_TRACE_MAX_STREAM},
        {.t_ns = 10, .kind = 'A', .id = 0, .size = 512, .stream = 0},
        {.t_ns = 11, .kind = 'F', .id = UINT64_MAX, .stream = 3},
        {.t_ns = 12, .kind = 'a', .id = 7, .size = 4096, .stream = DRK_TRACE_NO_STREAM},
        {.t_ns = 13, .kind = 'f', .id = 1, .stream = DRK_TRACE_NO_STREAM},
        {.t_ns = 14, .kind = 'A', .id = 1, .size = 100, .stream = 2}, /* an id reused after its free */
        {.t_ns = UINT64_MAX, .kind = 'F', .id = 0, .stream = 1},
    };
    size_t n = sizeof ops / sizeof *ops;
    char text[4096];
    size_t len = drk_trace_format_header(text, sizeof text, &h);
    CHECK(len < sizeof text && strlen(text) == len);
    CHECK(strstr(text, "# drk-alloc-trace 1\n# page_size 2097152\n# device_bytes 161061273600\n"
                       "# program python?train.py?--x\n# recorded_by drk 0.1.0\n") == text);
    for (size_t i = 0; i < n; i++) {
        char line[DRK_TRACE_LINE_MAX];
        size_t k = drk_trace_format_op(line, &ops[i]);
        CHECK(k == strlen(line) && k < DRK_TRACE_LINE_MAX && line[k - 1] == '\n');
        memcpy(text + len, line, k + 1);
        len += k;
    }
    CHECK(strstr(text, "0 a 1 1 -\n10 A 18446744073709551615 18446744073709551615 65535\n") != NULL);
    CHECK(strstr(text, "11 F 18446744073709551615 3\n12 a 7 4096 -\n13 f 1 -\n") != NULL);

    FILE *f = file_of(text, len);
    drk_trace_reader r;
    CHECK(drk_trace_open(&r, f) == 0);
    CHECK(r.header.page_size == 2097152 && r.header.device_bytes == 150ULL << 30);
    CHECK(strcmp(r.header.program, "python?train.py?--x") == 0 && strcmp(r.header.recorded_by, "drk 0.1.0") == 0);
    /* slots: dense, reused after a free */
    static const size_t want_slot[] = {0, 1, 2, 1, 1, 0, 0, 2};
    static const uint64_t want_free_size[] = {0, 0, 0, UINT64_MAX, 0, 1, 0, 512};
    drk_trace_op op;
    for (size_t i = 0; i < n; i++) {
        CHECK(drk_trace_next(&r, &op) == 1);
        CHECK(op.t_ns == ops[i].t_ns && op.kind == ops[i].kind && op.id == ops[i].id);
        CHECK(op.slot == want_slot[i]);
        if (drk_trace_is_alloc(op.kind))
            CHECK(op.size == ops[i].size);
        else
            CHECK(op.size == want_free_size[i]);
        uint32_t stream = op.kind == 'a' || op.kind == 'f' ? DRK_TRACE_NO_STREAM : ops[i].stream;
        CHECK(op.stream == stream);
    }
    CHECK(drk_trace_next(&r, &op) == 0);
    CHECK(r.ops == n && r.max_live == 3 && r.live == 2);
    drk_trace_close(&r);
    fclose(f);
}

/* Many ops: lines cross the reader's 64 KiB chunks. */
static void test_long(void)
{
    FILE *f = tmpfile();
    CHECK(f && drk_trace_write_header(f, NULL) == 0);
    const uint64_t count = 200000;
    for (uint64_t i = 0; i < count; i++) {
        drk_trace_op a = {.t_ns = 2 * i, .kind = 'A', .id = i % 1000 + 1000000007ULL * (i / 1000),
                          .size = 512 + i, .stream = (uint32_t)(i % 7)};
        drk_trace_op fr = {.t_ns = 2 * i + 1, .kind = 'F', .id = a.id, .stream = 1};
        CHECK(drk_trace_write_op(f, &a) == 0 && drk_trace_write_op(f, &fr) == 0);
    }
    CHECK(fseek(f, 0, SEEK_SET) == 0);
    drk_trace_reader r;
    CHECK(drk_trace_open(&r, f) == 0);
    drk_trace_op op;
    uint64_t i = 0, bad = 0;
    int got;
    while ((got = drk_trace_next(&r, &op)) == 1) {
        uint64_t k = i / 2;
        if (op.t_ns != i || op.slot != 0 || op.size != 512 + k || (i % 2 == 0 && op.stream != k % 7))
            bad++;
        i++;
    }
    CHECK(got == 0 && i == 2 * count && bad == 0 && r.line == 2 * count + 1 && r.max_live == 1);
    drk_trace_close(&r);
    fclose(f);
}

static void test_header_bounds(void)
{
    drk_trace_header h = {.page_size = 4096};
    char small[8], full[128];
    size_t need = drk_trace_format_header(full, sizeof full, &h);
    CHECK(need == strlen("# drk-alloc-trace 1\n# page_size 4096\n") && strcmp(full, "# drk-alloc-trace 1\n# page_size 4096\n") == 0);
    CHECK(drk_trace_format_header(small, sizeof small, &h) == need && strlen(small) == sizeof small - 1);
    CHECK(drk_trace_format_header(NULL, 0, NULL) == strlen("# drk-alloc-trace 1\n"));
}

static void test_errors(void)
{
    static const struct {
        const char *text;
        unsigned long long line;
        const char *words;
    } cases[] = {
        {"", 1, "not a drk allocation trace"},
        {"# drk-alloc-trace 1", 1, "truncated"},
        {"# drk-alloc-trace x\n", 1, "bad header line"},
        {"# drk-alloc-trace 3\n", 1, "version 3"},
        {"# drk-alloc-trace 1\n# device_bytes 12k\n", 2, "device_bytes"},
        {"# drk-alloc-trace 1\n1 a 1 10 -\n2 f 2 -\n", 3, "id 2 is not live"},
        {"# drk-alloc-trace 1\n1 a 1 10 -\n2 A 1 10 0\n", 3, "allocated again"},
        {"# drk-alloc-trace 1\n1 f 1 10 -\n", 2, "expected '-'"},
        {"# drk-alloc-trace 1\n1 F 1\n", 2, "expected ' ' after the id"},
        {"# drk-alloc-trace 1\n1 a 1 10 -\n\n", 3, "empty line"},
        {"# drk-alloc-trace 1\n18446744073709551616 a 1 10 -\n", 2, "time"},
        {"# drk-alloc-trace 1\n1 a 1 10 -\n0 f 1 -\n", 3, "time order"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char msg[256];
        unsigned long long line = read_all(cases[i].text, msg, sizeof msg);
        char want[32];
        snprintf(want, sizeof want, "line %llu: ", cases[i].line);
        int ok = line == cases[i].line && strncmp(msg, want, strlen(want)) == 0 && strstr(msg, cases[i].words);
        if (!ok)
            fprintf(stderr, "case %zu: line %llu, '%s'\n", i, line, msg);
        CHECK(ok);
    }
    /* a line too long to be an op */
    char big[6000];
    memset(big, '9', sizeof big);
    memcpy(big, "# drk-alloc-trace 1\n", 20);
    big[sizeof big - 2] = '\n', big[sizeof big - 1] = '\0';
    char msg[256];
    CHECK(read_all(big, msg, sizeof msg) == 2 && strstr(msg, "longer than"));
    /* after an error, the reader stays failed */
    FILE *f = file_of("# drk-alloc-trace 1\nx\n1 a 1 1 -\n", 30);
    drk_trace_reader r;
    drk_trace_op op;
    CHECK(drk_trace_open(&r, f) == 0 && drk_trace_next(&r, &op) == -1 && drk_trace_next(&r, &op) == -1);
    drk_trace_close(&r);
    fclose(f);
}

int main(void)
{
    test_round_trip();
    test_long();
    test_header_bounds();
    test_errors();
    return CHECK_DONE();
}
