/* Stream hooks: counted and forwarded. The memory pool (alloc/) will keep
 * per-stream state here.
 * Included once, by shim/exports.c. */
#ifndef DRK_SHIM_HOOKS_STREAM_H
#define DRK_SHIM_HOOKS_STREAM_H

#include "hook.h"

DRK_FORWARD_BODY(stream_create)
DRK_FORWARD_BODY(stream_create_priority)
DRK_FORWARD_BODY(stream_destroy)

#endif
