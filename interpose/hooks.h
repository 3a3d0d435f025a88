/* The one list of hooked driver entry points: every ABI form the driver
 * exports of every function drk watches. From it come the exported
 * definitions (shim/hooks_<family>.c), the names that dlsym answers with a
 * hook, and the pointer map behind cuGetProcAddress (routes.c).
 *
 * Adding a hook is one line: X(exported name, body, family), in its
 * family's list. Forms that share a signature share a body; a new body needs
 * its signature in signatures.h and its definition, drk_body_<body>, in
 * shim/hooks_<family>.c. To find what drk does for cuXxx: its line here
 * names the body; open drk_body_<body>.
 *
 * Macros expanding this list must use `name` only with # or ##: in files that
 * include cuda.h normally, cuMemAlloc etc. are themselves macros. */
#ifndef DRK_INTERPOSE_HOOKS_H
#define DRK_INTERPOSE_HOOKS_H

/* One list per family (the report groups calls by family; shim/hooks_<family>.c
 * defines the family's bodies and exports), and all of them in slot order:
 * the launch family first (the registry labels entry points by slot). */
#define DRK_HOOKS_LAUNCH(X)                                             \
    X(cuLaunchKernel,                   launch_kernel,          launch) \
    X(cuLaunchKernel_ptsz,              launch_kernel,          launch) \
    X(cuLaunchKernelEx,                 launch_kernel_ex,       launch) \
    X(cuLaunchKernelEx_ptsz,            launch_kernel_ex,       launch) \
    X(cuLaunchCooperativeKernel,        launch_kernel_coop,     launch) \
    X(cuLaunchCooperativeKernel_ptsz,   launch_kernel_coop,     launch)

#define DRK_HOOKS_GRAPH(X)                                             \
    X(cuGraphLaunch,                    graph_launch,           graph) \
    X(cuGraphLaunch_ptsz,               graph_launch,           graph) \
    X(cuStreamBeginCapture,             begin_capture_v1,       graph) \
    X(cuStreamBeginCapture_ptsz,        begin_capture_v1,       graph) \
    X(cuStreamBeginCapture_v2,          begin_capture,          graph) \
    X(cuStreamBeginCapture_v2_ptsz,     begin_capture,          graph) \
    X(cuStreamBeginCaptureToGraph,      begin_capture_to_graph, graph) \
    X(cuStreamBeginCaptureToGraph_ptsz, begin_capture_to_graph, graph) \
    X(cuStreamEndCapture,               end_capture,            graph) \
    X(cuStreamEndCapture_ptsz,          end_capture,            graph)

#define DRK_HOOKS_MODULE(X)                                             \
    X(cuModuleLoad,                     module_load,            module) \
    X(cuModuleLoadData,                 module_load_data,       module) \
    X(cuModuleLoadDataEx,               module_load_data_ex,    module) \
    X(cuModuleLoadFatBinary,            module_load_data,       module) \
    X(cuLibraryLoadData,                library_load_data,      module) \
    X(cuLibraryLoadFromFile,            library_load_file,      module) \
    X(cuModuleGetFunction,              module_get_function,    module) \
    X(cuLibraryGetKernel,               library_get_kernel,     module) \
    X(cuKernelGetFunction,              kernel_get_function,    module) \
    X(cuModuleUnload,                   module_unload,          module) \
    X(cuLibraryUnload,                  library_unload,         module)

#define DRK_HOOKS_MEMORY(X)                                             \
    X(cuMemAlloc,                       mem_alloc_v1,           memory) \
    X(cuMemAlloc_v2,                    mem_alloc,              memory) \
    X(cuMemAllocPitch,                  mem_alloc_pitch_v1,     memory) \
    X(cuMemAllocPitch_v2,               mem_alloc_pitch,        memory) \
    X(cuMemFree,                        mem_free_v1,            memory) \
    X(cuMemFree_v2,                     mem_free,               memory) \
    X(cuMemAllocAsync,                  mem_alloc_async,        memory) \
    X(cuMemAllocAsync_ptsz,             mem_alloc_async,        memory) \
    X(cuMemAllocFromPoolAsync,          mem_alloc_pool_async,   memory) \
    X(cuMemAllocFromPoolAsync_ptsz,     mem_alloc_pool_async,   memory) \
    X(cuMemFreeAsync,                   mem_free_async,         memory) \
    X(cuMemFreeAsync_ptsz,              mem_free_async,         memory) \
    X(cuMemGetInfo,                     mem_get_info_v1,        memory) \
    X(cuMemGetInfo_v2,                  mem_get_info,           memory) \
    X(cuMemGetAddressRange,             mem_get_range_v1,       memory) \
    X(cuMemGetAddressRange_v2,          mem_get_range,          memory) \
    X(cuPointerGetAttribute,            pointer_get_attribute,  memory) \
    X(cuPointerGetAttributes,           pointer_get_attributes, memory) \
    X(cuIpcGetMemHandle,                ipc_get_mem_handle,     memory) \
    X(cuIpcOpenMemHandle,               ipc_open_mem_handle,    memory) \
    X(cuIpcOpenMemHandle_v2,            ipc_open_mem_handle,    memory) \
    X(cuIpcCloseMemHandle,              ipc_close_mem_handle,   memory) \
    X(cuCtxEnablePeerAccess,            ctx_enable_peer_access, memory) \
    X(cuCtxDestroy,                     ctx_destroy,            memory) \
    X(cuCtxDestroy_v2,                  ctx_destroy,            memory) \
    X(cuDevicePrimaryCtxReset,          primary_ctx_reset,      memory) \
    X(cuDevicePrimaryCtxReset_v2,       primary_ctx_reset,      memory) \
    X(cuDevicePrimaryCtxRelease,        primary_ctx_release,    memory) \
    X(cuDevicePrimaryCtxRelease_v2,     primary_ctx_release,    memory) \
    X(cuGreenCtxCreate,                 green_ctx_create,       memory)

#define DRK_HOOKS_HOST_MEMORY(X)                                             \
    X(cuMemHostAlloc,                   mem_host_alloc,         host_memory) \
    X(cuMemAllocHost,                   mem_alloc_host_v1,      host_memory) \
    X(cuMemAllocHost_v2,                mem_alloc_host,         host_memory) \
    X(cuMemFreeHost,                    mem_free_host,          host_memory) \
    X(cuMemHostGetDevicePointer,        mem_host_get_dptr_v1,   host_memory) \
    X(cuMemHostGetDevicePointer_v2,     mem_host_get_dptr,      host_memory) \
    X(cuMemHostGetFlags,                mem_host_get_flags,     host_memory)

#define DRK_HOOKS_STREAM(X)                                             \
    X(cuStreamCreate,                   stream_create,          stream) \
    X(cuStreamCreateWithPriority,       stream_create_priority, stream) \
    X(cuStreamDestroy,                  stream_destroy,         stream) \
    X(cuStreamDestroy_v2,               stream_destroy,         stream) \
    X(cuStreamSynchronize,              stream_synchronize,     stream) \
    X(cuStreamSynchronize_ptsz,         stream_synchronize,     stream) \
    X(cuCtxSynchronize,                 ctx_synchronize,        stream) \
    X(cuCtxSynchronize_v2,              ctx_synchronize_v2,     stream) \
    X(cuEventSynchronize,               event_synchronize,      stream)

#define DRK_HOOKS_ENTRY(X)                                             \
    X(cuGetProcAddress,                 get_proc_address_v1,    entry) \
    X(cuGetProcAddress_v2,              get_proc_address,       entry)

#define DRK_HOOKS_PROFILER(X)                                             \
    X(cuProfilerStart,                  profiler_start,         profiler) \
    X(cuProfilerStop,                   profiler_stop,          profiler)

#define DRK_HOOKS(X)                                                   \
    DRK_HOOKS_LAUNCH(X) DRK_HOOKS_GRAPH(X) DRK_HOOKS_MODULE(X)         \
    DRK_HOOKS_MEMORY(X) DRK_HOOKS_HOST_MEMORY(X) DRK_HOOKS_STREAM(X)   \
    DRK_HOOKS_ENTRY(X) DRK_HOOKS_PROFILER(X)

/* One slot per exported name, in list order. */
typedef enum drk_sym {
#define DRK_SYM_ENUM_(name, body, family) DRK_SYM_##name,
    DRK_HOOKS(DRK_SYM_ENUM_)
#undef DRK_SYM_ENUM_
    DRK_SYM_COUNT
} drk_sym;

#endif
