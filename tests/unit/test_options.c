/* The option parser: every type, good and bad values, names with and
 * without the prefix. */
#include <string.h>

#include "base/log.h"
#include "base/options.h"
#include "tests/unit/check.h"

static int parses(drk_option_id id, const char *text, long *num, char *canon)
{
    drk_option_value v;
    char why[96];
    if (drk_option_parse(id, text, &v, why, sizeof why) != 0) {
        CHECK(why[0] != '\0');
        return 0;
    }
    if (num)
        *num = v.num;
    if (canon)
        strcpy(canon, v.text);
    return 1;
}

int main(void)
{
    long n;
    char t[DRK_OPTION_PATH_MAX];
    static const char *const yes[] = {"1", "true", "TRUE", "yes", "On"};
    static const char *const no[] = {"0", "false", "no", "OFF"};
    for (int i = 0; i < 5; i++)
        CHECK(parses(DRK_OPT_DISABLE, yes[i], &n, t) && n == 1 && strcmp(t, "1") == 0);
    for (int i = 0; i < 4; i++)
        CHECK(parses(DRK_OPT_DISABLE, no[i], &n, NULL) && n == 0);
    CHECK(!parses(DRK_OPT_DISABLE, "2", NULL, NULL));
    CHECK(!parses(DRK_OPT_DISABLE, "", NULL, NULL));
    CHECK(!parses(DRK_OPT_OBSERVE, "maybe", NULL, NULL));

    CHECK(parses(DRK_OPT_LOG_LEVEL, "debug", &n, t) && n == DRK_LOG_DEBUG && strcmp(t, "debug") == 0);
    CHECK(parses(DRK_OPT_LOG_LEVEL, "ERROR", &n, t) && n == DRK_LOG_ERROR && strcmp(t, "error") == 0);
    CHECK(parses(DRK_OPT_LOG_LEVEL, "2", &n, t) && n == DRK_LOG_INFO && strcmp(t, "info") == 0);
    CHECK(!parses(DRK_OPT_LOG_LEVEL, "loud", NULL, NULL));
    CHECK(!parses(DRK_OPT_LOG_LEVEL, "4", NULL, NULL));

    CHECK(parses(DRK_OPT_REPORT, "/tmp/r/", NULL, t) && strcmp(t, "/tmp/r/") == 0);
    /* 0 turns off the files drk writes, not a file named 0; other paths keep it. */
    CHECK(parses(DRK_OPT_REPORT, "0", NULL, t) && strcmp(t, "") == 0);
    CHECK(parses(DRK_OPT_LOG_FILE, "0", NULL, t) && strcmp(t, "") == 0);
    CHECK(parses(DRK_OPT_ALLOC_TRACE, "0", NULL, t) && strcmp(t, "") == 0);
    CHECK(parses(DRK_OPT_REPORT, "./0", NULL, t) && strcmp(t, "./0") == 0);
    CHECK(parses(DRK_OPT_EVOLVE_ONLY, "0", NULL, t) && strcmp(t, "0") == 0);
    char longpath[DRK_OPTION_PATH_MAX + 10];
    memset(longpath, 'a', sizeof longpath - 1);
    longpath[sizeof longpath - 1] = '\0';
    CHECK(!parses(DRK_OPT_REPORT, longpath, NULL, NULL));

    /* Amounts: bytes with a binary suffix, or a share kept as basis points. */
    CHECK(parses(DRK_OPT_STREAM_RESERVE, "5%", &n, t) && n == -500 && strcmp(t, "5%") == 0);
    CHECK(drk_option_amount(n, 1000000) == 50000);
    CHECK(parses(DRK_OPT_STREAM_RESERVE, "12.25%", &n, NULL) && n == -1225);
    CHECK(parses(DRK_OPT_STREAM_RESERVE, "2G", &n, t) && n == 2L << 30 && strcmp(t, "2147483648") == 0);
    CHECK(drk_option_amount(n, 1) == (size_t)2 << 30);
    CHECK(parses(DRK_OPT_STREAM_RESERVE, "512MiB", &n, NULL) && n == 512L << 20);
    CHECK(parses(DRK_OPT_STREAM_RESERVE, "512MB", &n, NULL) && n == 512L << 20);
    CHECK(!parses(DRK_OPT_STREAM_RESERVE, "512B", NULL, NULL)); /* a suffix needs its unit */
    CHECK(parses(DRK_OPT_STREAM_RESERVE, "0", &n, NULL) && n == 0);
    CHECK(parses(DRK_OPT_STREAM_RESERVE, "1.5k", &n, NULL) && n == 1536);
    CHECK(!parses(DRK_OPT_STREAM_RESERVE, "101%", NULL, NULL));
    CHECK(!parses(DRK_OPT_STREAM_RESERVE, "-1", NULL, NULL));
    CHECK(!parses(DRK_OPT_STREAM_RESERVE, "lots", NULL, NULL));
    CHECK(!parses(DRK_OPT_STREAM_RESERVE, "4X", NULL, NULL));
    CHECK(!parses(DRK_OPT_STREAM_RESERVE, "", NULL, NULL));
    /* Percentages: with or without the sign, 0 to 100. */
    CHECK(parses(DRK_OPT_DEFRAG_THRESHOLD, "10%", &n, t) && n == 1000 && strcmp(t, "10%") == 0);
    CHECK(parses(DRK_OPT_DEFRAG_THRESHOLD, "2.5", &n, NULL) && n == 250);
    CHECK(!parses(DRK_OPT_DEFRAG_THRESHOLD, "150", NULL, NULL));
    CHECK(!parses(DRK_OPT_DEFRAG_THRESHOLD, "1G", NULL, NULL));
    /* Durations: seconds by default, or s, ms, min; kept in milliseconds. */
    CHECK(parses(DRK_OPT_ROUND_SECONDS, "10", &n, t) && n == 10000 && strcmp(t, "10s") == 0);
    CHECK(parses(DRK_OPT_ROUND_SECONDS, "2.5s", &n, t) && n == 2500 && strcmp(t, "2500ms") == 0);
    CHECK(parses(DRK_OPT_ROUND_SECONDS, "250ms", &n, NULL) && n == 250);
    CHECK(parses(DRK_OPT_ROUND_SECONDS, "5min", &n, t) && n == 300000 && strcmp(t, "300s") == 0);
    CHECK(parses(DRK_OPT_ROUND_SECONDS, "0", &n, NULL) && n == 0);
    CHECK(!parses(DRK_OPT_ROUND_SECONDS, "-1", NULL, NULL));
    CHECK(!parses(DRK_OPT_ROUND_SECONDS, "10h", NULL, NULL));
    CHECK(!parses(DRK_OPT_ROUND_SECONDS, "soon", NULL, NULL));
    /* Counts: whole numbers, 1 to a million. */
    CHECK(parses(DRK_OPT_EVOLVE_TURN, "10", &n, t) && n == 10 && strcmp(t, "10") == 0);
    CHECK(parses(DRK_OPT_EVOLVE_TURN, "1", &n, NULL) && n == 1);
    CHECK(!parses(DRK_OPT_EVOLVE_TURN, "0", NULL, NULL));
    CHECK(!parses(DRK_OPT_EVOLVE_TURN, "2.5", NULL, NULL));
    CHECK(!parses(DRK_OPT_EVOLVE_TURN, "-3", NULL, NULL));
    CHECK(!parses(DRK_OPT_EVOLVE_TURN, "1000001", NULL, NULL));
    CHECK(!parses(DRK_OPT_EVOLVE_TURN, "ten", NULL, NULL));

    /* Every default parses, and every option has a name and a doc. */
    for (int i = 0; i < DRK_OPT_COUNT; i++) {
        CHECK(parses((drk_option_id)i, drk_option_table[i].fallback, NULL, NULL));
        CHECK(strncmp(drk_option_table[i].name, "DRK_", 4) == 0 && strlen(drk_option_table[i].doc) > 10);
        CHECK(drk_option_find(drk_option_table[i].name) == i);
        CHECK(drk_option_find(drk_option_table[i].name + 4) == i);
    }
    CHECK(drk_option_find("DRK_NOPE") == -1 && drk_option_find("") == -1 && drk_option_find("DRK_") == -1);
    return CHECK_DONE();
}
