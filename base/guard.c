#include "base/guard.h"

__thread int drk_guard_depth __attribute__((tls_model("initial-exec")));
