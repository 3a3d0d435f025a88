/* glibc's own dlsym, for code that must look a name up without passing
 * through drk's exported dlsym. interpose/ implements it in the library (it
 * finds it with dlvsym); tools/real_dlsym.c outside it. */
#ifndef DRK_BASE_DLSYM_H
#define DRK_BASE_DLSYM_H

typedef void *(*drk_dlsym_fn)(void *handle, const char *name);

/* For code that may run before a sanitizer runtime has started. */
#define DRK_NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

/* glibc's dlsym; aborts if there is none, as no program could run. */
drk_dlsym_fn drk_real_dlsym(void);

#endif
