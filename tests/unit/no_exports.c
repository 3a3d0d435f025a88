/* Unit tests link drk's internals without its exported entry points; the
 * hook table they would point at is empty here. */
#include "interpose/symbols.h"

void *const drk_sym_hook[DRK_SYM_COUNT];
