/* agent_symbols.c — the agent's exported symbols in a process that has it mapped (see
 * agent_symbols.h).  The mapping is found by the file's identity, else by name: the agent may
 * have been rebuilt, upgraded or its copy removed after the target loaded it, and dlopen then
 * matched the path and returned the object already mapped, which /proc shows as "(deleted)";
 * that copy is the one to look in, and its bytes stay readable through map_files. */
#include "agent_symbols.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf.h"
#include "method.h"
#include "proc.h"

int agent_symbols(pid_t pid, const char *agent_path, const char *const *names, uint64_t *addrs,
                  size_t n, char *err, size_t errlen)
{
    char path[4096 + 64];
    struct stat sb;
    int have_stat = proc_root_path(pid, agent_path, path, sizeof path) == 0 && stat(path, &sb) == 0;
    struct proc_maps maps;
    int r = proc_read_maps(pid, &maps);
    if (r < 0) {
        inject_set_err(err, errlen, "cannot read /proc/%d/maps: %s", (int)pid, strerror(-r));
        return r;
    }
    const struct proc_map *m = have_stat ? proc_find_inode(&maps, sb.st_dev, sb.st_ino) : NULL;
    if (!m)
        m = proc_find_loaded(pid, &maps, agent_path);
    if (!m) {
        proc_free_maps(&maps);
        inject_set_err(err, errlen, "%s is not mapped in the target", agent_path);
        return -ENOENT;
    }
    int fd = proc_open_mapped(pid, m);
    struct elf_file ef;
    r = fd < 0 ? fd : elf_open_fd(fd, &ef);
    if (fd >= 0)
        close(fd);
    if (r < 0) {
        proc_free_maps(&maps);
        inject_set_err(err, errlen, "cannot read the agent %s: %s", agent_path, strerror(-r));
        return r;
    }
    uint64_t bias = elf_load_bias(&ef, m->start), v;
    for (size_t i = 0; i < n; i++)
        addrs[i] = elf_lookup(&ef, names[i], &v) == 0 ? bias + v : 0;
    elf_close(&ef);
    proc_free_maps(&maps);
    return 0;
}
