/* The drk command's subcommands. Each takes its own argv (argv[0] is the
 * subcommand's name) and returns the process's exit status; `run` returns
 * only when it could not start the program. */
#ifndef DRK_TOOLS_COMMANDS_H
#define DRK_TOOLS_COMMANDS_H

#include <stdio.h>

int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_options(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_cache(int argc, char **argv);
/* drk trace synth (trace_synth.c), which cmd_trace hands its argv to. */
int cmd_trace_synth(int argc, char **argv);

void usage_run(FILE *f);
void usage_report(FILE *f);
void usage_options(FILE *f);
void usage_inspect(FILE *f);
void usage_trace(FILE *f);
void usage_cache(FILE *f);

/* Exit status for a command line drk cannot use: nothing was run. */
#define EXIT_USAGE 2

/* Says "drk COMMAND: MESSAGE" and the command's synopsis on standard error;
 * returns EXIT_USAGE. */
int usage_fail(const char *command, const char *synopsis, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
