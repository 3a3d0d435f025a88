/* NVTX, received through NVTX's own injection mechanism: a program's NVTX
 * library (PyTorch's torch.cuda.nvtx, any nvtx3 user) loads the library
 * NVTX_INJECTION64_PATH names and calls its InitializeInjectionNvtx2, which
 * may replace NVTX's functions. `drk run` points that variable at drk unless
 * it is set already (nsys sets it; drk then leaves NVTX to nsys). drk takes
 * ranges and marks only to end rounds: the end of a range, or a mark, whose
 * message matches DRK_ROUND (an fnmatch pattern, "round" by default) marks the
 * end of a round for the GPU times (shim/worker.h). Messages other than
 * ASCII and wide text (registered strings, payloads) match nothing.
 *
 * What the replacements cost a program that pushes ranges: a thread-local
 * depth and one fnmatch of the message. They take no lock and allocate
 * nothing. Without DRK_PROFILE drk declines the injection, and NVTX stays as
 * without a tool. */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <nvtx3/nvToolsExt.h>
#include <stdatomic.h>
#include <stdio.h>
#include <wchar.h>

#include "base/log.h"
#include "base/options.h"
#include "shim/state.h"
#include "shim/evolve_wiring.h"
#include "shim/worker.h"

/* The NVTX callback table's own entry points (nvtxDetail/nvtxTypes.h): the
 * types are spelled out here so drk needs nothing of NVTX but its header. */
int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) __attribute__((visibility("default")));

static char pattern[DRK_OPTION_PATH_MAX];

/* Per thread: the depth of pushed ranges, and which of the first 64 levels
 * are rounds. */
static __thread unsigned depth;
static __thread uint64_t round_levels;

static int matches_a(const char *s) { return s && fnmatch(pattern, s, 0) == 0; }

static int matches_w(const wchar_t *s)
{
    char a[256];
    size_t i = 0;
    if (!s)
        return 0;
    for (; s[i] && i < sizeof a - 1; i++) {
        if (s[i] <= 0 || s[i] > 127)
            return 0; /* a pattern of ASCII matches ASCII text only */
        a[i] = (char)s[i];
    }
    if (s[i])
        return 0; /* longer than any round name worth matching */
    a[i] = '\0';
    return matches_a(a);
}

static int matches_attr(const nvtxEventAttributes_t *e)
{
    if (!e)
        return 0;
    switch (e->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return matches_a(e->message.ascii);
    case NVTX_MESSAGE_TYPE_UNICODE: return matches_w(e->message.unicode);
    default: return 0;
    }
}

static void round_ends(void) { drk_worker_mark("nvtx"); }

static int push(int is_round)
{
    unsigned level = depth++;
    if (level < 64) {
        if (is_round)
            round_levels |= (uint64_t)1 << level;
        else
            round_levels &= ~((uint64_t)1 << level);
    }
    return (int)level;
}

static int pop(void)
{
    if (!depth)
        return -1; /* a pop without a push: NVTX's own answer */
    unsigned level = --depth;
    if (level < 64 && (round_levels >> level & 1))
        round_ends();
    return (int)level;
}

static int NVTX_API push_a(const char *m) { return push(matches_a(m)); }
static int NVTX_API push_w(const wchar_t *m) { return push(matches_w(m)); }
static int NVTX_API push_ex(const nvtxEventAttributes_t *e) { return push(matches_attr(e)); }
static int NVTX_API pop_core(void) { return pop(); }
static int NVTX_API domain_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *e)
{
    (void)d;
    return push(matches_attr(e));
}
static int NVTX_API domain_pop(nvtxDomainHandle_t d)
{
    (void)d;
    return pop();
}

static void NVTX_API mark_a(const char *m)
{
    if (matches_a(m))
        round_ends();
}
static void NVTX_API mark_w(const wchar_t *m)
{
    if (matches_w(m))
        round_ends();
}
static void NVTX_API mark_ex(const nvtxEventAttributes_t *e)
{
    if (matches_attr(e))
        round_ends();
}
static void NVTX_API domain_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *e)
{
    (void)d;
    mark_ex(e);
}

/* Start/end ranges (any thread may end one): the id says whether it is a
 * round. */
static atomic_ulong next_id = 1;
static nvtxRangeId_t range_id(int is_round)
{
    return (nvtxRangeId_t)(atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed) << 1 | (is_round ? 1 : 0));
}
static nvtxRangeId_t NVTX_API start_a(const char *m) { return range_id(matches_a(m)); }
static nvtxRangeId_t NVTX_API start_w(const wchar_t *m) { return range_id(matches_w(m)); }
static nvtxRangeId_t NVTX_API start_ex(const nvtxEventAttributes_t *e) { return range_id(matches_attr(e)); }
static void NVTX_API end_core(nvtxRangeId_t id)
{
    if (id & 1)
        round_ends();
}
static nvtxRangeId_t NVTX_API domain_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *e)
{
    (void)d;
    return start_ex(e);
}
static void NVTX_API domain_end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
    (void)d;
    end_core(id);
}

/* Sets slot `id` of `table` (of `size` slots) to `fn`, if it has it. */
static void set_slot(NvtxFunctionTable table, unsigned size, unsigned id, NvtxFunctionPointer fn)
{
    if (table && id < size && table[id])
        *table[id] = fn;
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
    /* Rounds matter only to the GPU times. */
    if (drk_current_mode() != DRK_MODE_OBSERVE || !(drk_opt_num(DRK_OPT_PROFILE) || drk_evolve_wanted()) || !get)
        return 0;
    const NvtxExportTableCallbacks *cb = (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable)
        return 0;
    snprintf(pattern, sizeof pattern, "%s", drk_opt_str(DRK_OPT_ROUND));
    NvtxFunctionTable core = NULL, core2 = NULL;
    unsigned ncore = 0, ncore2 = 0;
    if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &ncore))
        return 0;
    if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &ncore2))
        core2 = NULL, ncore2 = 0;
#define FN(f) ((NvtxFunctionPointer)(f))
    set_slot(core, ncore, NVTX_CBID_CORE_MarkEx, FN(mark_ex));
    set_slot(core, ncore, NVTX_CBID_CORE_MarkA, FN(mark_a));
    set_slot(core, ncore, NVTX_CBID_CORE_MarkW, FN(mark_w));
    set_slot(core, ncore, NVTX_CBID_CORE_RangeStartEx, FN(start_ex));
    set_slot(core, ncore, NVTX_CBID_CORE_RangeStartA, FN(start_a));
    set_slot(core, ncore, NVTX_CBID_CORE_RangeStartW, FN(start_w));
    set_slot(core, ncore, NVTX_CBID_CORE_RangeEnd, FN(end_core));
    set_slot(core, ncore, NVTX_CBID_CORE_RangePushEx, FN(push_ex));
    set_slot(core, ncore, NVTX_CBID_CORE_RangePushA, FN(push_a));
    set_slot(core, ncore, NVTX_CBID_CORE_RangePushW, FN(push_w));
    set_slot(core, ncore, NVTX_CBID_CORE_RangePop, FN(pop_core));
    set_slot(core2, ncore2, NVTX_CBID_CORE2_DomainMarkEx, FN(domain_mark_ex));
    set_slot(core2, ncore2, NVTX_CBID_CORE2_DomainRangeStartEx, FN(domain_start_ex));
    set_slot(core2, ncore2, NVTX_CBID_CORE2_DomainRangeEnd, FN(domain_end));
    set_slot(core2, ncore2, NVTX_CBID_CORE2_DomainRangePushEx, FN(domain_push_ex));
    set_slot(core2, ncore2, NVTX_CBID_CORE2_DomainRangePop, FN(domain_pop));
#undef FN
    drk_log(DRK_LOG_INFO, "NVTX: rounds end with ranges and marks named '%s' (DRK_ROUND)", pattern);
    return 1;
}
