/* The hook of every slot, for dlsym and cuGetProcAddress to hand out: the
 * hidden drk_export_<name> that shim/hooks_<family>.c defines, never another
 * object's definition of the name. */
#include "shim/hook.h"

#include "interpose/symbols.h"

#define DRK_EXPORT_DECL_(name, body, params, args) CUresult drk_export_##name params;
#define DRK_EXPORT_DECL(name, body, family) DRK_SIG_##body(DRK_EXPORT_DECL_, name, body)
DRK_HOOKS(DRK_EXPORT_DECL)
#undef DRK_EXPORT_DECL

void *const drk_sym_hook[DRK_SYM_COUNT] = {
#define DRK_HOOK_PTR_(name, body, family) (void *)drk_export_##name,
    DRK_HOOKS(DRK_HOOK_PTR_)
#undef DRK_HOOK_PTR_
};
