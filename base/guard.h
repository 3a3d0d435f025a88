/* A thread-local re-entrancy guard. While a thread runs drk's own set-up or
 * asks the loader something, a call that comes back into drk on the same
 * thread (a driver or library constructor calling dlsym, say) is handed the
 * real function at once instead of waiting for work that cannot finish. */
#ifndef DRK_BASE_GUARD_H
#define DRK_BASE_GUARD_H

extern __thread int drk_guard_depth __attribute__((tls_model("initial-exec")));

static inline int drk_guarded(void) { return drk_guard_depth != 0; }
static inline void drk_guard_enter(void) { drk_guard_depth++; }
static inline void drk_guard_leave(void) { drk_guard_depth--; }

#endif
