/* Linked with libprobe_b; libprobe_a comes by LD_PRELOAD (after drk). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

const char *probe_name(void);

int main(void)
{
    const char *(*next)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "probe_next");
    if (!next) {
        printf("no probe_next: preload libprobe_a.so\n");
        return 1;
    }
    printf("first %s next-from-a %s\n", probe_name(), next());
    return 0;
}
