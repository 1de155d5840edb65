/* libc_standin.c — a process that vcattach's CPython detection takes for CPython 3.11 (it
 * exports Py_Version and PyGILState_Ensure, as Debian's static python3.11 does), running on a C
 * library the agents cannot load into, for the preflight refusals (tests/unit/test_glibc_floor.py):
 *   built with musl-gcc                  an Alpine python's libc (musl's loader in its maps)
 *   built statically with glibc, and     a libc.so.6 whose newest symbol version is older than
 *   given the path of old_glibc.c's      the agents' glibc floor, mapped as a process maps its
 *   build (argv[1])                      libc
 * Prints "ready", then sleeps until killed. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* PY_VERSION_HEX of 3.11.4: the version vcattach reads from the live process */
__attribute__((used)) const unsigned long Py_Version = 0x030b04f0UL;

__attribute__((used)) void PyGILState_Ensure(void)
{
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 ||
            mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) == MAP_FAILED) {
            perror(argv[1]);
            return 1;
        }
        close(fd);
    }
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}
