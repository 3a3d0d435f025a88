"""Where do the driver's entry points resolve in this process? Python's
ctypes looks symbols up with dlsym, so this sees what any dlsym-using
framework sees. Prints one JSON object:

  handle_cuLaunchKernel   dlsym(dlopen("libcuda.so.1"), "cuLaunchKernel")
  default_cuLaunchKernel  dlsym on the main program's handle (global scope)
  proc_cuLaunchKernel_ptds  cuGetProcAddress_v2("cuLaunchKernel", 12000,
                          CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
  proc_cuMemAlloc         cuGetProcAddress_v2("cuMemAlloc", 12000, DEFAULT)

each as {"addr", "file", "symbol"} from dladdr (and "rc", "status" for the
cuGetProcAddress ones). cuGetProcAddress_v2 itself is found by dlsym on the
libcuda handle, as cudart finds it. Exits non-zero on a CUDA error.
"""
import ctypes
import json
import sys

CU_GET_PROC_ADDRESS_DEFAULT = 0
CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1 << 1


class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


libc = ctypes.CDLL(None)
libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
libc.dladdr.restype = ctypes.c_int


def where(addr):
    info = DlInfo()
    if not addr or not libc.dladdr(addr, ctypes.byref(info)):
        return {"addr": addr, "file": None, "symbol": None}
    return {"addr": hex(addr), "file": info.dli_fname.decode() if info.dli_fname else None,
            "symbol": info.dli_sname.decode() if info.dli_sname else None,
            "exact": info.dli_saddr == addr}


def address_of(lib, name):
    try:
        return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
    except AttributeError:  # not in that scope (natively, libcuda is RTLD_LOCAL)
        return None


def main():
    cuda = ctypes.CDLL("libcuda.so.1")
    out = {
        "handle_cuLaunchKernel": where(address_of(cuda, "cuLaunchKernel")),
        "default_cuLaunchKernel": where(address_of(libc, "cuLaunchKernel")),
    }
    rc = cuda.cuInit(0)
    if rc != 0:
        print(f"routes_probe: cuInit failed: {rc}", file=sys.stderr)
        sys.exit(1)
    gpa = cuda.cuGetProcAddress_v2
    gpa.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int,
                    ctypes.c_uint64, ctypes.POINTER(ctypes.c_int)]
    gpa.restype = ctypes.c_int
    out["cuGetProcAddress_v2"] = where(address_of(cuda, "cuGetProcAddress_v2"))
    for key, sym, flags in (("proc_cuLaunchKernel_ptds", b"cuLaunchKernel",
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
                            ("proc_cuMemAlloc", b"cuMemAlloc", CU_GET_PROC_ADDRESS_DEFAULT)):
        fn, status = ctypes.c_void_p(), ctypes.c_int(-1)
        rc = gpa(sym, ctypes.byref(fn), 12000, flags, ctypes.byref(status))
        if rc != 0:
            print(f"routes_probe: cuGetProcAddress_v2({sym.decode()}) failed: {rc}", file=sys.stderr)
            sys.exit(1)
        out[key] = dict(where(fn.value), rc=rc, status=status.value)
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
