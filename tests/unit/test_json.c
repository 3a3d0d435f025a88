/* The report's JSON writer: nesting, commas, escapes. */
#include <string.h>

#include "base/json.h"
#include "tests/unit/check.h"

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
    return CHECK_DONE();
}
