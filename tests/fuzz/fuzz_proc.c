/* fuzz_proc.c — libFuzzer harness: the /proc text parsers of injector/proc.c on any bytes.
 * Root reads these files of a process whose user writes much of them: the command line,
 * the name in stat and status (the comm: any 15 bytes, parentheses and newlines included),
 * and the paths in maps (file names of the user's choosing, " (deleted)" among them).
 *
 * Input: one byte chooses the file (mod 4), the rest is its text, cut to the buffer the
 * reader gives it:
 *   0  /proc/PID/maps    proc_maps_parse, then the lookups the injector makes on a map
 *   1  /proc/PID/stat    proc_stat_parse (1 KiB, as proc_stat_read)
 *   2  /proc/PID/status  proc_status_parse (8 KiB, as proc_status_read)
 *   3  /proc/PID/cmdline proc_cmdline_text (160 bytes, a tree member's name)
 * Built by tests/fuzz/fuzz.mk; seeds in tests/fuzz/corpus/proc (this machine's files). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc.h"

static volatile uint64_t sink;

static int match_python(const char *base)
{
    return strncmp(base, "libpython", 9) == 0 || strncmp(base, "python", 6) == 0;
}

static void maps(const uint8_t *text, size_t n)
{
    FILE *f = fmemopen((void *)text, n, "r");
    if (f == NULL)
        return;
    struct proc_maps m;
    if (proc_maps_parse(f, &m) == 0) {
        for (size_t i = 0; i < m.n; i++)
            sink += strlen(m.v[i].path) + m.v[i].perms[0];
        const struct proc_map *at = proc_map_at(&m, m.v[0].start);
        const struct proc_map *mod = proc_find_module(&m, match_python);
        const struct proc_map *ino = proc_find_inode(&m, 0, m.v[m.n - 1].inode);
        const struct proc_map *path = proc_find_path(&m, m.v[m.n - 1].path);
        sink += (at != NULL) + (mod != NULL) + (ino != NULL) + (path != NULL);
        /* getpid(): our own root is "/", so the path is taken as it is shown */
        sink += proc_find_loaded(getpid(), &m, "/usr/lib/libvcagent.so") != NULL;
        proc_free_maps(&m);
    }
    fclose(f);
}

/* text as the reader leaves it in a buffer of cap bytes: cut, NUL-terminated */
static char *as_read(const uint8_t *text, size_t n, size_t cap)
{
    char *buf = malloc(cap);
    if (buf == NULL)
        abort();
    if (n > cap - 1)
        n = cap - 1;
    memcpy(buf, text, n);
    buf[n] = '\0';
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *text = data + 1;
    size_t n = size - 1;
    switch (data[0] % 4) {
    case 0:
        maps(text, n);
        break;
    case 1: {
        char *buf = as_read(text, n, 1024);
        struct proc_stat st;
        if (proc_stat_parse(buf, &st) == 0)
            sink += (uint64_t)st.state + (uint64_t)st.ppid + st.flags + st.start_time;
        free(buf);
        break;
    }
    case 2: {
        char *buf = as_read(text, n, 8192);
        struct proc_status st;
        if (proc_status_parse(buf, 1234, 0, &st) == 0)
            sink += strlen(st.name) + (uint64_t)st.own_pid + st.cap_eff + (uint64_t)st.tracer;
        free(buf);
        break;
    }
    case 3: {
        /* proc_cmdline reads at most cap - 1 bytes (a tree member's name: 160) */
        char *buf = as_read(text, n, 160);
        proc_cmdline_text(buf, n < 159 ? n : 159);
        if (strlen(buf) > 159 || memchr(buf, '\n', strlen(buf)) != NULL)
            __builtin_trap(); /* one line, within its buffer */
        sink += strlen(buf);
        free(buf);
        break;
    }
    }
    return 0;
}
