/* drk: run a program under libdrk_shim.so, read its reports, list options,
 * inspect device images, replay allocation traces, look after the cache. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tools/commands.h"

int usage_fail(const char *command, const char *synopsis, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "drk %s: ", command);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n%s", synopsis);
    return EXIT_USAGE;
}

static void usage(FILE *f)
{
    fputs("usage: drk <command> [arguments]\n"
          "\n"
          "commands:\n"
          "  run [--report PATH] [--disable] [--set KEY=VALUE]... [--library PATH] -- PROGRAM [ARGS...]\n"
          "                 run PROGRAM with libdrk_shim.so preloaded\n"
          "  report [--json] [--top N] PATH\n"
          "                 print a report, or every report in a directory and their sum\n"
          "  inspect [--json] [--demangle] [--arch sm_NN] FILE...\n"
          "                 list the kernels in programs, libraries, fatbins, cubins and PTX\n"
          "  trace replay [--json] [--page-size N] [--capacity N] FILE...\n"
          "                 replay allocation traces through allocator models: reserved vs live\n"
          "  trace synth [--seed N] [--ops N] [--kind gpt|random]\n"
          "                 write a synthetic allocation trace\n"
          "  cache [--dir DIR] list|stats|clear|prune\n"
          "                 the evolved kernels and search results kept between runs\n"
          "  options        list the DRK_* options and the ones set in this environment\n"
          "  help [COMMAND] this text, or a command's\n"
          "\n"
          "  drk --version  print drk's version\n"
          "  drk COMMAND --help\n",
          f);
}

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    void (*usage)(FILE *f);
} command;

static const command commands[] = {
    {"run", cmd_run, usage_run},
    {"report", cmd_report, usage_report},
    {"inspect", cmd_inspect, usage_inspect},
    {"trace", cmd_trace, usage_trace},
    {"cache", cmd_cache, usage_cache},
    {"options", cmd_options, usage_options},
};

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static int unknown(const char *name)
{
    fprintf(stderr, "drk: unknown command '%s'\n\n", name);
    usage(stderr);
    return EXIT_USAGE;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("drk %s\n", DRK_VERSION);
        return 0;
    }
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        if (argc > 2) {
            const command *c = find_command(argv[2]);
            if (!c)
                return unknown(argv[2]);
            c->usage(stdout);
        } else {
            usage(stdout);
        }
        return 0;
    }
    const command *c = find_command(name);
    if (!c)
        return unknown(name);
    int status = c->run(argc - 1, argv + 1);
    /* A full disk or closed pipe must not look like success. */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        perror("drk: standard output");
        return status ? status : 1;
    }
    return status;
}
