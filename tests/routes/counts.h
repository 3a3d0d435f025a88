/* A program's own counts, written in the workload's JSON format
 * ({"calls": {...}, "kernels": {...}, "failed_launches": n, "memory": {...}})
 * so check_route.py can compare them with a drk report. */
#ifndef DRK_TESTS_COUNTS_H
#define DRK_TESTS_COUNTS_H

#include <stdio.h>

typedef struct count_entry {
    const char *name;
    unsigned long long n;
} count_entry;

static inline int counts_write(const char *path, const count_entry *calls, int ncalls, const count_entry *kernels,
                               int nkernels, const char *memory_json)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "{\"calls\": {");
    for (int i = 0; i < ncalls; i++)
        fprintf(f, "%s\"%s\": %llu", i ? ", " : "", calls[i].name, calls[i].n);
    fprintf(f, "}, \"kernels\": {");
    for (int i = 0; i < nkernels; i++)
        fprintf(f, "%s\"%s\": %llu", i ? ", " : "", kernels[i].name, kernels[i].n);
    fprintf(f, "}, \"failed_launches\": 0, \"memory\": %s}\n", memory_json);
    return fclose(f);
}

#endif
