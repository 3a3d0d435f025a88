/* Facts about the hooked names that every route needs: the exported name of
 * each slot, its hook, its family, and the lookup from a name to its slot. */
#ifndef DRK_INTERPOSE_SYMBOLS_H
#define DRK_INTERPOSE_SYMBOLS_H

#include "interpose/hooks.h"

extern const char *const drk_sym_name[DRK_SYM_COUNT];
extern const char *const drk_sym_family[DRK_SYM_COUNT];
/* The hook of each slot (drk's own definition, never another object's). */
extern void *const drk_sym_hook[DRK_SYM_COUNT];

/* The slot of an exact exported name, or -1. Lock-free, allocation-free. */
int drk_sym_find(const char *name);

/* Whether `name` is an ABI form of the base name `base` as cuGetProcAddress
 * takes it: equal, or `base` followed by _vN, _ptsz, _ptds or both. */
int drk_sym_is_form_of(const char *name, const char *base);

#endif
