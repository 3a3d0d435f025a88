#include "evolve/image/kernel.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "evolve/image/bytes.h"

void drk_kernel_info_clear(drk_kernel_info *k)
{
    free(k->name);
    free(k->params);
    k->name = NULL;
    k->params = NULL;
    k->nparams = 0;
}

int drk_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}
