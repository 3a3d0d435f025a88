/* A module's PTX cut down to one kernel: every other .entry, declaration or
 * definition, left out; functions, globals, directives and comments kept.
 * A variant serves one kernel, and the compile of one entry is several
 * times faster than the whole module's (the twelve-kernel benchmark module
 * through nvJitLink: 14-49 ms a kernel against ~230 ms). Nothing the kept
 * kernel reaches goes: an entry cannot be called, only launched. */
#ifndef DRK_EVOLVE_PTX_ENTRY_H
#define DRK_EVOLVE_PTX_ENTRY_H

#include <stddef.h>

/* The text (NUL-terminated, malloc'd; its length in *out_len) of `ptx`
 * (len bytes) with only the entry `name`; NULL when `name` has no body
 * there, on a lexical error, or when memory ran out. */
char *drk_ptx_only_entry(const char *ptx, size_t len, const char *name, size_t *out_len);

#endif
