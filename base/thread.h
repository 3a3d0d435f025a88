/* drk's own threads (the GPU-time worker, the page grower): started with
 * every signal blocked, so that a program's signal handlers never run on
 * them and its signals go to its own threads. */
#ifndef DRK_BASE_THREAD_H
#define DRK_BASE_THREAD_H

#include <pthread.h>

/* 0, or the error pthread_create gave. */
int drk_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

#endif
