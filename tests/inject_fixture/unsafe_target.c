/* unsafe_target.c — a target with no thread at a safe point, for the injector tests.
 *
 *   main thread    blocked in read(stdin) inside a dl_iterate_phdr() callback: the loader's
 *                  lock is held, so a dlopen on any thread would wait for it, and on this one
 *                  would re-enter the loader;
 *   second thread  blocked in pthread_mutex_lock on a mutex main holds (__lll_lock_wait).
 * Prints "READY <pid>" when both are in place; one byte on stdin releases everything, and it
 * prints "DONE" and exits 0.  The injector must refuse (INJECT_UNTOUCHED) and leave it so. */
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;

static void *waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&held);
    pthread_mutex_unlock(&held);
    return NULL;
}

static int in_loader_lock(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)info;
    (void)size;
    (void)data;
    struct timespec settle = {0, 50 * 1000000}; /* let the waiter reach the lock */
    nanosleep(&settle, NULL);
    printf("READY %d\n", (int)getpid());
    fflush(stdout);
    char c;
    if (read(0, &c, 1) < 0)
        perror("read");
    return 1; /* stop iterating */
}

int main(void)
{
    pthread_t t;
    pthread_mutex_lock(&held);
    if (pthread_create(&t, NULL, waiter, NULL) != 0)
        return 1;
    dl_iterate_phdr(in_loader_lock, NULL);
    pthread_mutex_unlock(&held);
    pthread_join(t, NULL);
    puts("DONE");
    return 0;
}
