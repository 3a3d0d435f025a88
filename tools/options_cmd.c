/* `drk options`: the library's option table, and what this environment
 * sets, judged by the library's own parser. */
#include <stdlib.h>
#include <string.h>

#include "base/options.h"
#include "tools/commands.h"
#include "tools/table.h"

extern char **environ;

/* Docs wrap at this many characters: the table stays near 100 columns. */
#define DOC_WIDTH 68

void usage_options(FILE *f)
{
    fputs("usage: drk options\n"
          "\n"
          "Lists every DRK_* option libdrk_shim.so reads (name, type, default, what it does),\n"
          "then each one set in this environment, its value, and whether drk accepts it.\n"
          "drk replaces a value it refuses by the default, and says so once in its log.\n",
          f);
}

static const char *type_name(drk_option_type t)
{
    switch (t) {
    case DRK_OPTION_BOOL: return "bool";
    case DRK_OPTION_LEVEL: return "level";
    case DRK_OPTION_PATH: return "path";
    case DRK_OPTION_AMOUNT: return "amount";
    case DRK_OPTION_PERCENT: return "percent";
    case DRK_OPTION_SECONDS: return "seconds";
    case DRK_OPTION_PROFILE: return "profile";
    case DRK_OPTION_COUNT: return "count";
    }
    return "?";
}

/* One row per line of the doc, broken at spaces. */
static void add_option_rows(table *t, const drk_option_desc *d)
{
    const char *doc = d->doc;
    int first = 1;
    while (*doc || first) {
        size_t len = strlen(doc);
        if (len > DOC_WIDTH) {
            len = DOC_WIDTH;
            while (len > 0 && doc[len] != ' ')
                len--;
            if (len == 0)
                len = DOC_WIDTH;
        }
        char line[DOC_WIDTH + 1];
        snprintf(line, sizeof line, "%.*s", (int)len, doc);
        if (first)
            table_row(t, (const char *const[]){d->name, type_name(d->type), *d->fallback ? d->fallback : "(empty)",
                                                line});
        else
            table_row(t, (const char *const[]){"", "", "", line});
        first = 0;
        doc += len;
        while (*doc == ' ')
            doc++;
    }
}

static void print_set(FILE *f)
{
    static drk_option_value parsed; /* 4 KiB: not on the stack */
    int any = 0;
    fputs("\nset in this environment:\n", f);
    for (int i = 0; i < DRK_OPT_COUNT; i++) {
        const drk_option_desc *d = &drk_option_table[i];
        const char *v = getenv(d->name);
        if (!v)
            continue;
        any = 1;
        char why[256];
        fprintf(f, "  %s=%s\n    ", d->name, v);
        if (drk_option_parse((drk_option_id)i, v, &parsed, why, sizeof why) != 0)
            fprintf(f, "refused: %s; drk uses the default '%s'\n", why, d->fallback);
        else if (d->type == DRK_OPTION_PATH && !*v)
            fprintf(f, "accepted: empty, the same as unset\n");
        else if (strcmp(parsed.text, v) != 0)
            fprintf(f, "accepted, as %s\n", parsed.text);
        else
            fprintf(f, "accepted\n");
    }
    /* A misspelt option is silently ignored by the library: point it out. */
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "DRK_", 4) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        size_t n = eq ? (size_t)(eq - *e) : strlen(*e);
        char name[128];
        if (n >= sizeof name)
            n = sizeof name - 1;
        memcpy(name, *e, n);
        name[n] = '\0';
        int id = drk_option_find(name);
        if (id >= 0 && strcmp(drk_option_table[id].name, name) == 0)
            continue;
        any = 1;
        fprintf(f, "  %s\n    unknown: not a drk option, drk ignores it\n", *e);
    }
    if (!any)
        fputs("  (no DRK_* variables)\n", f);
}

int cmd_options(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage_options(stdout);
            return 0;
        }
        fprintf(stderr, "drk options: unexpected argument '%s'\n", argv[i]);
        usage_options(stderr);
        return EXIT_USAGE;
    }
    table t;
    table_init(&t, "llll");
    table_row(&t, (const char *const[]){"option", "type", "default", "what it does"});
    for (int i = 0; i < DRK_OPT_COUNT; i++)
        add_option_rows(&t, &drk_option_table[i]);
    table_print(&t, stdout, "");
    table_free(&t);
    print_set(stdout);
    return 0;
}
