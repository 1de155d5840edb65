/* target_libc.c — owns target_libc_detect (vcinject.h): which C library a target runs on,
 * glibc (and how new: the newest GLIBC_2.N its libc defines) or musl.
 *
 * Why: the agent is a glibc library that loads into glibc 2.17 and newer.  Into a musl process
 * (Alpine) or an older glibc, dlopen fails inside the target, after its threads were stopped
 * and a call was made on one of them; preflight asks these facts first and refuses in one line
 * with nothing touched.  Read from what the process maps (musl's loader is ld-musl-*.so.1;
 * Alpine links libc.musl-*.so.1 to it; Debian's musl-tools keeps it under *-linux-musl/) and
 * from the version definitions of its libc, the very thing the dynamic loader checks an agent's
 * needs against.  Reads only /proc/PID/maps and the mapped file.
 */
#include "vcinject.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf.h"
#include "proc.h"

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int is_musl_mapping(const struct proc_map *m)
{
    return m->offset == 0 && m->path[0] == '/' &&
           (proc_is_musl_name(base_name(m->path)) || strstr(m->path, "-linux-musl/"));
}

/* elf_version_names' callback: the newest "GLIBC_2.N" or "GLIBC_2.N.M" into *ctx (an int). */
static void note_glibc_version(void *ctx, const char *name)
{
    int *newest = ctx;
    if (strncmp(name, "GLIBC_2.", 8) != 0)
        return; /* the soname, GLIBC_PRIVATE, GLIBC_ABI_DT_RELR */
    char *end;
    long minor = strtol(name + 8, &end, 10);
    if (end != name + 8 && (*end == '\0' || *end == '.') && minor > *newest && minor < 1000)
        *newest = (int)minor;
}

void target_libc_detect(pid_t pid, struct target_libc *libc)
{
    memset(libc, 0, sizeof *libc);
    libc->glibc_minor = -1;
    struct proc_maps maps;
    if (proc_read_maps(pid, &maps) < 0)
        return;
    const struct proc_map *m = NULL;
    for (size_t i = 0; i < maps.n && !m; i++)
        if (is_musl_mapping(&maps.v[i]))
            m = &maps.v[i];
    if (m) {
        libc->kind = TARGET_LIBC_MUSL;
    } else if ((m = proc_find_module(&maps, proc_is_glibc_name)) != NULL) {
        libc->kind = TARGET_LIBC_GLIBC;
        int fd = proc_open_mapped(pid, m);
        struct elf_file ef;
        if (fd >= 0 && elf_open_fd(fd, &ef) == 0) {
            int newest = -1;
            if (elf_version_names(&ef, note_glibc_version, &newest) == 0)
                libc->glibc_minor = newest;
            elf_close(&ef);
        }
        if (fd >= 0)
            close(fd);
    }
    if (m)
        snprintf(libc->path, sizeof libc->path, "%s", proc_map_target_path(pid, m->path));
    proc_free_maps(&maps);
}
