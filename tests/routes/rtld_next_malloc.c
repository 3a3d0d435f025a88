/* A program that interposes malloc itself and finds the real one with
 * dlsym(RTLD_NEXT, ...), the classic pattern of leak checkers and
 * profilers. Under drk, dlsym must still resolve RTLD_NEXT relative to this
 * program, and must not recurse through the program's malloc. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *(*real_malloc)(size_t);
static void (*real_free)(void *);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static unsigned long calls;
static int resolving;

/* dlsym may allocate (its error buffer) while we are resolving: serve that
 * from a static arena. */
static char arena[1 << 16];
static size_t arena_used;

static void *arena_alloc(size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (arena_used + n > sizeof arena)
        abort();
    void *p = arena + arena_used;
    arena_used += n;
    return p;
}

static int in_arena(const void *p) { return (const char *)p >= arena && (const char *)p < arena + sizeof arena; }

static void resolve(void)
{
    if (real_malloc || resolving)
        return;
    resolving = 1;
    real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    resolving = 0;
    if (!real_malloc || !real_free || !real_calloc || !real_realloc)
        abort();
}

void *malloc(size_t n)
{
    resolve();
    if (!real_malloc)
        return arena_alloc(n);
    calls++;
    return real_malloc(n);
}

void free(void *p)
{
    if (!p || in_arena(p))
        return;
    resolve();
    real_free(p);
}

void *calloc(size_t a, size_t b)
{
    resolve();
    if (!real_calloc) {
        void *p = arena_alloc(a * b);
        memset(p, 0, a * b);
        return p;
    }
    calls++;
    return real_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
    resolve();
    if (in_arena(p)) {
        void *q = malloc(n);
        memcpy(q, p, n);
        return q;
    }
    calls++;
    return real_realloc(p, n);
}

int main(void)
{
    char *s = strdup("drk");
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    int (*init)(unsigned) = h ? (int (*)(unsigned))dlsym(h, "cuInit") : NULL;
    void *launch = h ? dlsym(h, "cuLaunchKernel") : NULL;
    void *self = dlsym(RTLD_NEXT, "malloc");
    int ok = s && init && init(0) == 0 && launch && self == (void *)real_malloc && calls > 0;
    printf("%s\n", ok ? "ok" : "FAILED");
    free(s);
    return ok ? 0 : 1;
}
