/* The name lookup behind dlsym: exact names only, every hooked name found. */
#include <string.h>

#include "interpose/symbols.h"
#include "tests/unit/check.h"

int main(void)
{
    for (int s = 0; s < DRK_SYM_COUNT; s++)
        CHECK(drk_sym_find(drk_sym_name[s]) == s);
    static const char *const not_hooked[] = {"", "c", "cu", "cuLaunch", "cuLaunchKernelX", "cuLaunchKernel_pts",
                                             "cuMemAlloc_v3", "cuInit", "cudnnCreate", "cuLaunchKernel ",
                                             "CULAUNCHKERNEL", "dlsym"};
    for (size_t i = 0; i < sizeof not_hooked / sizeof *not_hooked; i++)
        CHECK(drk_sym_find(not_hooked[i]) == -1);
    /* Families are the report's groups. */
    for (int s = 0; s < DRK_SYM_COUNT; s++)
        CHECK(strlen(drk_sym_family[s]) > 0);

    CHECK(drk_sym_is_form_of("cuMemAlloc_v2", "cuMemAlloc"));
    CHECK(drk_sym_is_form_of("cuMemAlloc", "cuMemAlloc"));
    CHECK(drk_sym_is_form_of("cuLaunchKernel_ptsz", "cuLaunchKernel"));
    CHECK(drk_sym_is_form_of("cuMemcpy_ptds", "cuMemcpy"));
    CHECK(drk_sym_is_form_of("cuMemcpyHtoD_v2_ptds", "cuMemcpyHtoD"));
    CHECK(!drk_sym_is_form_of("cuLaunchKernelEx", "cuLaunchKernel"));
    CHECK(!drk_sym_is_form_of("cuLaunchKernelEx_ptsz", "cuLaunchKernel"));
    CHECK(!drk_sym_is_form_of("cuMemAlloc_vx", "cuMemAlloc"));
    CHECK(!drk_sym_is_form_of("cuMemAllocHost_v2", "cuMemAlloc"));
    return CHECK_DONE();
}
