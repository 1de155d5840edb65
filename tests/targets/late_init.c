/* late_init.c — a C program embedding CPython that loads libpython at once and initializes it
 * only later (argv[2] ms), like a host reading its configuration first; then runs argv[3]. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    void *py = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (py == NULL) {
        fprintf(stderr, "late_init: %s\n", dlerror());
        return 1;
    }
    void (*init)(void) = (void (*)(void))dlsym(py, "Py_Initialize");
    int (*run)(const char *) = (int (*)(const char *))dlsym(py, "PyRun_SimpleString");
    int (*fini)(void) = (int (*)(void))dlsym(py, "Py_FinalizeEx");
    if (!init || !run || !fini)
        return 1;
    printf("loaded\n");
    fflush(stdout);
    long ms = atol(argv[2]);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    init();
    int rc = run(argv[3]);
    return fini() < 0 || rc != 0 ? 1 : 0;
}
