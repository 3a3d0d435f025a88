#include "shim/hook.h"

CUresult drk_missing(drk_sym sym)
{
    (void)sym;
    return drk_driver_handle() ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_NOT_INITIALIZED;
}
