/* The JSON writer: nesting, commas, escapes; one-line and compact layouts;
 * writing out in pieces. */
#define _GNU_SOURCE /* open_memstream */
#include <stdio.h>
#include <string.h>

#include "base/json.h"
#include "tests/unit/check.h"

static int same(const drk_json *j, const char *want)
{
    if (j->failed || !j->buf || strcmp(j->buf, want) != 0) {
        fprintf(stderr, "got:\n%s\nwant:\n%s", j->buf ? j->buf : "(nothing)", want);
        return -1;
    }
    return 0;
}

/* drk report --json's grids: [x, y, z] inside the indented layout. */
static int one_line_items(void)
{
    drk_json j = {0};
    drk_json_open(&j, NULL, '{');
    drk_json_open_inline(&j, "grid", '[');
    for (int i = 1; i <= 3; i++)
        drk_json_u64(&j, NULL, (uint64_t)i);
    drk_json_close(&j, ']');
    drk_json_open_inline(&j, "none", '[');
    drk_json_close(&j, ']');
    drk_json_open_inline(&j, "o", '{');
    drk_json_str(&j, "k", "v");
    drk_json_bool(&j, "b", 1);
    drk_json_close(&j, '}');
    drk_json_u64(&j, "after", 4);
    drk_json_close(&j, '}');
    int rc = same(&j, "{\n"
                      "  \"grid\": [1, 2, 3],\n"
                      "  \"none\": [],\n"
                      "  \"o\": {\"k\": \"v\", \"b\": true},\n"
                      "  \"after\": 4\n"
                      "}\n");
    drk_json_free(&j);
    return rc;
}

/* drk inspect --json's layout: compact, with a line per item only in the
 * levels opened so, indented by those levels alone. */
static int compact_with_lines(void)
{
    drk_json j = {.compact = 1};
    drk_json_open_inline(&j, NULL, '{');
    drk_json_u64(&j, "version", 1);
    drk_json_open(&j, "files", '[');
    for (int f = 0; f < 2; f++) {
        drk_json_open_inline(&j, NULL, '{');
        drk_json_str(&j, "path", f ? "b" : "a");
        drk_json_open(&j, "kernels", '[');
        for (int k = 0; k < 2 - 2 * f; k++) {
            drk_json_open_inline(&j, NULL, '{');
            drk_json_i64(&j, "n", -k);
            drk_json_open_inline(&j, "l", '[');
            drk_json_u64(&j, NULL, 7);
            drk_json_null(&j, NULL);
            drk_json_close(&j, ']');
            drk_json_close(&j, '}');
        }
        drk_json_close(&j, ']');
        drk_json_close(&j, '}');
    }
    drk_json_close(&j, ']');
    drk_json_close(&j, '}');
    int rc = same(&j, "{\"version\":1,\"files\":[\n"
                      "  {\"path\":\"a\",\"kernels\":[\n"
                      "    {\"n\":0,\"l\":[7,null]},\n"
                      "    {\"n\":-1,\"l\":[7,null]}\n"
                      "  ]},\n"
                      "  {\"path\":\"b\",\"kernels\":[]}\n"
                      "]}\n");
    drk_json_free(&j);
    return rc;
}

/* Flushed between items, the pieces make the same document, and the buffer
 * starts again from empty. */
static int flushed_in_pieces(void)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f)
        return -1;
    drk_json j = {0};
    int rc = 0;
    drk_json_open(&j, NULL, '[');
    drk_json_str(&j, NULL, "caf\xc3\xa9\x7f");
    rc |= drk_json_flush(&j, f);
    rc |= j.len != 0 || j.buf[0] != '\0';
    drk_json_f64(&j, NULL, 0.5);
    drk_json_close(&j, ']');
    rc |= drk_json_flush(&j, f);
    rc |= drk_json_flush(&j, f); /* nothing left: writes nothing */
    drk_json_free(&j);
    fclose(f);
    if (rc || !text || strcmp(text, "[\n  \"caf\xc3\xa9\x7f\",\n  0.5\n]\n") != 0) {
        fprintf(stderr, "flushed: %s\n", text ? text : "(nothing)");
        rc = -1;
    }
    free(text);
    return rc;
}

/* Nesting past the level arrays, and more closes than opens, fail the
 * document without writing outside the writer; flushing it says so. */
static int too_deep(void)
{
    drk_json j = {0};
    for (int i = 0; i < 40; i++)
        drk_json_open(&j, NULL, '[');
    for (int i = 0; i < 45; i++)
        drk_json_close(&j, ']');
    int rc = j.failed && j.depth == 0 ? 0 : -1;
    FILE *f = fopen("/dev/null", "w");
    if (!f || drk_json_flush(&j, f) != -1)
        rc = -1;
    if (f)
        fclose(f);
    drk_json_free(&j);
    return rc;
}

int main(void)
{
    drk_json j = {0};
    drk_json_open(&j, NULL, '{');
    drk_json_str(&j, "s", "a\"b\\c\n\x01");
    drk_json_u64(&j, "u", 18446744073709551615ull);
    drk_json_i64(&j, "i", -5);
    drk_json_null(&j, "n");
    drk_json_str(&j, "z", NULL);
    drk_json_open(&j, "empty", '[');
    drk_json_close(&j, ']');
    drk_json_open(&j, "list", '[');
    drk_json_u64(&j, NULL, 1);
    drk_json_open(&j, NULL, '{');
    drk_json_close(&j, '}');
    drk_json_close(&j, ']');
    drk_json_close(&j, '}');
    const char *want = "{\n"
                       "  \"s\": \"a\\\"b\\\\c\\u000a\\u0001\",\n"
                       "  \"u\": 18446744073709551615,\n"
                       "  \"i\": -5,\n"
                       "  \"n\": null,\n"
                       "  \"z\": null,\n"
                       "  \"empty\": [],\n"
                       "  \"list\": [\n"
                       "    1,\n"
                       "    {}\n"
                       "  ]\n"
                       "}\n";
    CHECK(!j.failed);
    CHECK(j.buf && strcmp(j.buf, want) == 0);
    if (j.buf && strcmp(j.buf, want) != 0)
        fprintf(stderr, "got:\n%s", j.buf);
    drk_json_free(&j);

    CHECK(one_line_items() == 0);
    CHECK(compact_with_lines() == 0);
    CHECK(flushed_in_pieces() == 0);
    CHECK(too_deep() == 0);
    return CHECK_DONE();
}
