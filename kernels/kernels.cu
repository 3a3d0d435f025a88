// The one translation unit of drk's fatbin. A module is one cubin per arch
// and the driver loads a single cubin of a fatbin for its device, so every
// kernel must live in this unit; each file stays compilable on its own.
#include "kernels/compare.cu"
#include "kernels/hash.cu"
#include "kernels/poison.cu"
