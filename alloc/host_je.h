/* drk's private copy of jemalloc: Debian's libjemalloc_pic.a with every
 * symbol it defines renamed drk_je_<name> at build time
 * (cmake/host_pool.cmake). Only the host pool calls it; the program and the
 * rest of drk keep glibc's malloc. */
#ifndef DRK_ALLOC_HOST_JE_H
#define DRK_ALLOC_HOST_JE_H

#include <stddef.h>

/* extent_hooks_t and the MALLOCX_* flags; the names it declares unprefixed
 * (malloc, mallocx ...) are not what drk links. */
#include <jemalloc/jemalloc.h>

void *drk_je_mallocx(size_t size, int flags);
void drk_je_sdallocx(void *ptr, size_t size, int flags);
size_t drk_je_nallocx(size_t size, int flags);
int drk_je_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
extern void (*drk_je_malloc_message)(void *cbopaque, const char *s);
/* drk's configuration, read at jemalloc's start instead of MALLOC_CONF. */
extern const char *drk_je_malloc_conf;

/* Stand-ins for the archive's outside references that belong to the
 * program or that would add libraries (alloc/host_je.c). */
char *drk_je_secure_getenv(const char *name);
long drk_je_readlink(const char *path, char *buf, size_t len);
void *drk_je_dlsym(void *handle, const char *name);
double drk_je_log(double x);
double drk_je_exp(double x);
double drk_je_round(double x);
int drk_je__Unwind_Backtrace(void *trace, void *arg);
unsigned long drk_je__Unwind_GetIP(void *context);
int drk_je_pthread_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void));

#endif
