/* `drk run`: set the DRK_* variables, put libdrk_shim.so first in
 * LD_PRELOAD and exec the program, so its exit status and its death by a
 * signal are the program's own. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/options.h"
#include "tools/commands.h"

#define SHIM_NAME "libdrk_shim.so"

void usage_run(FILE *f)
{
    fputs("usage: drk run [--report PATH] [--disable] [--set KEY=VALUE]... [--library PATH] -- PROGRAM [ARGS...]\n"
          "\n"
          "Runs PROGRAM with " SHIM_NAME " first in LD_PRELOAD (entries already there are kept).\n"
          "The exit status is PROGRAM's; 127 if it cannot be found, 126 if it cannot be run,\n"
          "2 if drk run's own arguments are wrong (then nothing runs).\n"
          "\n"
          "  --report PATH     set DRK_REPORT: a report file (%p becomes the pid) or a directory\n"
          "                    (existing, or ending in /) for one report per process; a relative\n"
          "                    PATH is made absolute, so a program that changes directory keeps it\n"
          "  --disable         set DRK_DISABLE=1: drk hands every call to the driver\n"
          "  --set KEY=VALUE   set DRK_KEY=VALUE (KEY with or without DRK_, any case);\n"
          "                    unknown options and values drk would refuse are errors\n"
          "  --library PATH    preload this library instead of the " SHIM_NAME " installed with drk\n"
          "\n"
          "Options end at '--' or at the first argument that is not an option. See `drk options`.\n",
          f);
}

static void list_options(FILE *f)
{
    fputs("valid options:", f);
    for (int i = 0; i < DRK_OPT_COUNT; i++)
        fprintf(f, "%s %s", i ? "," : "", drk_option_table[i].name);
    fputs(" (see `drk options`)\n", f);
}

/* A DRK_* assignment to make before exec. */
typedef struct setting {
    drk_option_id id;
    const char *value;
    char *owned; /* value, when drk made it (an absolute report path) */
} setting;

static void free_settings(setting *sets, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(sets[i].owned);
    free(sets);
}

/* `value` checked by the library's own parser, so `drk run` refuses exactly
 * what the library would replace by a default. */
static int check_value(drk_option_id id, const char *value, const char *arg)
{
    static drk_option_value parsed; /* 4 KiB: not on the stack */
    char why[256];
    if (drk_option_parse(id, value, &parsed, why, sizeof why) == 0)
        return 0;
    fprintf(stderr, "drk run: %s: bad value '%s' for %s: %s\n", arg, value, drk_option_table[id].name, why);
    return -1;
}

/* KEY=VALUE from --set. */
static int parse_set(const char *arg, setting *out)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
        fprintf(stderr, "drk run: --set %s: expected KEY=VALUE\n", arg);
        return -1;
    }
    char key[64];
    size_t n = (size_t)(eq - arg);
    int id = -1;
    if (n < sizeof key) {
        for (size_t i = 0; i < n; i++)
            key[i] = (char)toupper((unsigned char)arg[i]);
        key[n] = '\0';
        id = drk_option_find(key);
    }
    if (id < 0) {
        fprintf(stderr, "drk run: --set %s: unknown option '%.*s'; ", arg, (int)n, arg);
        list_options(stderr);
        return -1;
    }
    out->id = (drk_option_id)id;
    out->value = eq + 1;
    char what[80];
    snprintf(what, sizeof what, "--set %.*s", (int)n, arg);
    return check_value(out->id, out->value, what);
}

/* A relative report path made absolute against the current directory; the
 * trailing '/' that marks a directory is kept. The result is allocated. */
static char *absolute(const char *path)
{
    if (path[0] == '/' || path[0] == '\0')
        return strdup(path);
    char *cwd = getcwd(NULL, 0);
    char *out = NULL;
    if (cwd && asprintf(&out, "%s/%s", strcmp(cwd, "/") == 0 ? "" : cwd, path) < 0)
        out = NULL;
    free(cwd);
    return out;
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The library installed with this drk: <bindir>/DRK_REL_LIBDIR (an install),
 * then <bindir>/../lib (the build tree). */
static int find_library(char *out)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        fprintf(stderr, "drk run: cannot find drk's own directory (/proc/self/exe: %s); pass --library PATH\n",
                strerror(errno));
        return -1;
    }
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    char candidates[2][PATH_MAX + 64];
    snprintf(candidates[0], sizeof candidates[0], "%s/%s/%s", exe, DRK_REL_LIBDIR, SHIM_NAME);
    snprintf(candidates[1], sizeof candidates[1], "%s/../lib/%s", exe, SHIM_NAME);
    for (int i = 0; i < 2; i++)
        if (is_file(candidates[i]) && realpath(candidates[i], out))
            return 0;
    fprintf(stderr, "drk run: cannot find " SHIM_NAME " installed with drk; looked for\n  %s\n  %s\n"
                    "pass --library PATH\n",
            candidates[0], candidates[1]);
    return -1;
}

static int resolve_library(const char *given, char *out)
{
    if (!given)
        return find_library(out);
    struct stat st;
    const char *why = NULL;
    if (stat(given, &st) != 0)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a regular file";
    else if (!realpath(given, out))
        why = strerror(errno);
    if (why) {
        fprintf(stderr, "drk run: --library %s: %s\n", given, why);
        return -1;
    }
    return 0;
}

/* LD_PRELOAD with `lib` first. The loader splits the list at spaces and
 * colons, so such a path could not be preloaded at all. */
static int prepend_preload(const char *lib)
{
    if (strpbrk(lib, " :")) {
        fprintf(stderr, "drk run: cannot preload '%s': LD_PRELOAD cannot hold a path with a space or colon\n", lib);
        return -1;
    }
    const char *old = getenv("LD_PRELOAD");
    const char *first = old ? old + strspn(old, " :") : "";
    size_t first_len = strcspn(first, " :");
    if (!*first)
        return setenv("LD_PRELOAD", lib, 1);
    if (first_len == strlen(lib) && strncmp(first, lib, first_len) == 0)
        return 0; /* already first */
    char *value;
    if (asprintf(&value, "%s:%s", lib, old) < 0)
        return -1;
    int r = setenv("LD_PRELOAD", value, 1);
    free(value);
    return r;
}

/* Options of drk run with a value: "--name VALUE" or "--name=VALUE".
 * Returns 1 with *value set, 0 when argv[*i] is another option, -1 when the
 * value is missing (said on stderr). */
static int option_value(int argc, char **argv, int *i, const char *name, const char **value)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return 0;
    if (argv[*i][n] == '=') {
        *value = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "drk run: %s needs a value\n", name);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

int cmd_run(int argc, char **argv)
{
    setting *sets = calloc((size_t)argc + 2, sizeof *sets);
    size_t nsets = 0;
    const char *library = NULL;
    int i = 1, bad = 0;
    if (!sets) {
        perror("drk run");
        return EXIT_USAGE;
    }
    for (; i < argc && !bad; i++) {
        const char *a = argv[i], *v = NULL;
        int r;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0')
            break; /* the program */
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage_run(stdout);
            free_settings(sets, nsets);
            return 0;
        }
        if (strcmp(a, "--disable") == 0) {
            sets[nsets++] = (setting){DRK_OPT_DISABLE, "1", NULL};
        } else if ((r = option_value(argc, argv, &i, "--report", &v)) != 0) {
            if (r < 0) {
                bad = 1;
                break;
            }
            setting *st = &sets[nsets++];
            *st = (setting){DRK_OPT_REPORT, NULL, absolute(v)};
            st->value = st->owned;
            if (!st->owned) {
                perror("drk run: --report");
                bad = 1;
            } else {
                bad = check_value(DRK_OPT_REPORT, st->value, "--report") != 0;
            }
        } else if ((r = option_value(argc, argv, &i, "--set", &v)) != 0) {
            bad = r < 0 || parse_set(v, &sets[nsets++]) != 0;
        } else if ((r = option_value(argc, argv, &i, "--library", &v)) != 0) {
            bad = r < 0;
            library = v;
        } else {
            fprintf(stderr, "drk run: unknown option '%s' (put '--' before the program)\n", a);
            bad = 1;
        }
    }
    if (!bad && i >= argc) {
        fprintf(stderr, "drk run: no program given\n");
        bad = 1;
    }
    if (bad) {
        fputs("usage: drk run [--report PATH] [--disable] [--set KEY=VALUE]... [--library PATH] -- PROGRAM "
              "[ARGS...]\n",
              stderr);
        free_settings(sets, nsets);
        return EXIT_USAGE;
    }

    char lib[PATH_MAX];
    if (resolve_library(library, lib) != 0 || prepend_preload(lib) != 0) {
        free_settings(sets, nsets);
        return EXIT_USAGE;
    }
    /* NVTX reaches drk through its injection variable, unless a tool (nsys)
     * took it: the library then says rounds do not come from NVTX. */
    const char *nvtx = getenv("NVTX_INJECTION64_PATH");
    if ((!nvtx || !*nvtx) && setenv("NVTX_INJECTION64_PATH", lib, 1) != 0) {
        perror("drk run: setenv");
        free_settings(sets, nsets);
        return EXIT_USAGE;
    }
    for (size_t s = 0; s < nsets; s++)
        if (setenv(drk_option_table[sets[s].id].name, sets[s].value, 1) != 0) {
            perror("drk run: setenv");
            free_settings(sets, nsets);
            return EXIT_USAGE;
        }

    execvp(argv[i], argv + i);
    /* As a shell: 127 when there is no such program, 126 when it is there
     * but cannot be run. */
    int e = errno;
    if (e == ENOENT && !strchr(argv[i], '/'))
        fprintf(stderr, "drk run: %s: command not found\n", argv[i]);
    else
        fprintf(stderr, "drk run: %s: %s\n", argv[i], strerror(e));
    free_settings(sets, nsets);
    return e == ENOENT || e == ENOTDIR ? 127 : 126;
}
