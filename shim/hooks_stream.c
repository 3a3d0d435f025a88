/* Stream hooks: counted and forwarded. The memory pool (alloc/) will keep
 * per-stream state here. */
#include "hook.h"

DRK_FORWARD_BODY(stream_create)
DRK_FORWARD_BODY(stream_create_priority)
DRK_FORWARD_BODY(stream_destroy)
