/* target_python.c — owns target_python_detect (vcinject.h): is a process CPython, and which
 * version?  It lives in the injector, next to debug_offsets.c, because it needs what only the
 * injector may parse: the process's maps and mapped ELF files (opened the target's way by
 * proc.c, read by elf.c).
 *
 * Answers from what the process has mapped, without stopping it: the ELF that carries the
 * C-API (a libpythonX.Y.so mapping, or an executable that exports it in .dynsym, like Debian's
 * static /usr/bin/python3.11), and the version from the `Py_Version` data symbol (3.11+) read
 * from the live process, else from the libpythonX.Y soname or the pythonX.Y executable name.
 * Reads only /proc/PID/{exe,maps,mem} and the mapped files.  Nothing stops the process.
 */
#include "vcinject.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf.h"
#include "proc.h"

/* "libpython3.11.so.1.0", "libpython3.8d.so", "python3.13t" → 3, 11 (and *abi_t = 1 for the
 * free-threaded "t" builds).  Returns 0 or -1. */
static int version_from_name(const char *base, const char *prefix, int *major, int *minor,
                             int *abi_t)
{
    size_t plen = strlen(prefix);
    if (strncmp(base, prefix, plen) || !isdigit((unsigned char)base[plen]))
        return -1;
    const char *p = base + plen;
    char *end;
    long ma = strtol(p, &end, 10);
    if (*end != '.' || !isdigit((unsigned char)end[1]))
        return -1;
    p = end + 1;
    long mi = strtol(p, &end, 10);
    if (ma != 3 || mi < 0 || mi > 99)
        return -1;
    *major = (int)ma;
    *minor = (int)mi;
    *abi_t = *end == 't';
    return 0;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int is_libpython(const char *base)
{
    return !strncmp(base, "libpython3.", 11) && strstr(base, ".so") != NULL;
}

/* Reads the PY_VERSION_HEX stored in Py_Version (3.11+) from the live process.
 * Returns 0 and *hex, or -1 when the symbol is absent or memory cannot be read. */
static int read_py_version(pid_t pid, const struct elf_file *ef, const struct proc_map *m,
                           uint64_t *hex)
{
    uint64_t vaddr;
    if (!m || elf_lookup(ef, "Py_Version", &vaddr) < 0)
        return -1;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    int mem = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (mem < 0)
        return -1;
    ssize_t n = pread(mem, hex, sizeof *hex, (off_t)(elf_load_bias(ef, m->start) + vaddr));
    close(mem);
    return n == (ssize_t)sizeof *hex ? 0 : -1;
}

/* 3.14+: whether the interpreter is a free-threaded build, from the _Py_DebugOffsets that
 * starts _PyRuntime ({char cookie[8] = "xdebugpy"; uint64 version; uint64 free_threaded;}, the
 * header remote debuggers and PEP 768 rely on): it tells even when the files are not named
 * "…t".  Returns 1 or 0, or -1 when it cannot be read. */
static int read_free_threaded(pid_t pid, const struct elf_file *ef, const struct proc_map *m)
{
    uint64_t vaddr;
    if (!m || elf_lookup(ef, "_PyRuntime", &vaddr) < 0)
        return -1;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    int mem = open(path, O_RDONLY | O_CLOEXEC);
    if (mem < 0)
        return -1;
    struct {
        char cookie[8];
        uint64_t version, free_threaded;
    } head;
    ssize_t n = pread(mem, &head, sizeof head, (off_t)(elf_load_bias(ef, m->start) + vaddr));
    close(mem);
    if (n != (ssize_t)sizeof head || memcmp(head.cookie, "xdebugpy", 8) != 0 ||
        ((head.version >> 24) & 0xff) != 3 || ((head.version >> 16) & 0xff) < 14)
        return -1;
    return head.free_threaded != 0;
}

/* What the C-API's file says of the build (ef is open): 3.11+'s own PY_VERSION_HEX, the debug
 * builds' exports, the free-threaded marker.  Returns read_free_threaded's answer. */
static int read_build(pid_t pid, const struct elf_file *ef, const struct proc_map *capi,
                      struct target_python *py)
{
    uint64_t hex, unused;
    if (read_py_version(pid, ef, capi, &hex) == 0 && ((hex >> 24) & 0xff) == 3) {
        py->major = 3;
        py->minor = (int)((hex >> 16) & 0xff);
        py->micro = (int)((hex >> 8) & 0xff);
        snprintf(py->how, sizeof py->how, "Py_Version");
    }
    /* Debug builds, from what only they export: Py_REF_DEBUG's reference total (_Py_RefTotal
     * up to 3.11, _Py_IncRefTotal from 3.12; Py_DEBUG implies it), and Py_TRACE_REFS's list
     * of every object (_Py_PrintReferences), whose two extra pointers in every object header
     * no agent build shares. */
    py->debug = elf_lookup(ef, "_Py_RefTotal", &unused) == 0 ||
                elf_lookup(ef, "_Py_IncRefTotal", &unused) == 0;
    py->trace_refs = elf_lookup(ef, "_Py_PrintReferences", &unused) == 0;
    return read_free_threaded(pid, ef, capi);
}

/* The version from the names, when the build did not say it, and the free-threaded mark the
 * names also carry (python3.13t, libpython3.13t.so), whose object layout no agent shares. */
static void read_names(const struct proc_map *lib, const char *exe, int debug_ft,
                       struct target_python *py)
{
    int lib_major = 0, lib_minor = 0, lib_t = 0, exe_major = 0, exe_minor = 0, exe_t = 0;
    int lib_named = lib && version_from_name(base_name(lib->path), "libpython", &lib_major,
                                             &lib_minor, &lib_t) == 0;
    int exe_named = version_from_name(base_name(exe), "python", &exe_major, &exe_minor,
                                      &exe_t) == 0;
    py->free_threaded = (lib_named && lib_t) || (exe_named && exe_t) || debug_ft == 1;
    if (!py->major && lib_named) {
        py->major = lib_major;
        py->minor = lib_minor;
        snprintf(py->how, sizeof py->how, "soname");
    }
    if (!py->major && exe_named) {
        py->major = exe_major;
        py->minor = exe_minor;
        snprintf(py->how, sizeof py->how, "executable name");
    }
}

int target_python_detect(pid_t pid, struct target_python *py, char *err, size_t errlen)
{
    char path[64], exe[PATH_MAX];
    memset(py, 0, sizeof *py);
    py->micro = -1;

    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(path, exe, sizeof exe - 1);
    if (n < 0) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    exe[n] = '\0';
    struct proc_maps maps;
    int rc = proc_read_maps(pid, &maps);
    if (rc < 0) {
        snprintf(err, errlen, "cannot read /proc/%d/maps: %s", (int)pid, strerror(-rc));
        return -1;
    }

    /* The C-API lives in libpythonX.Y.so if one is mapped, else in the executable. */
    const struct proc_map *lib = proc_find_module(&maps, is_libpython);
    const struct proc_map *capi = lib ? lib : proc_find_path(&maps, exe);
    /* /proc/PID/exe is a link that must be followed (it names the running executable even
     * when the file was replaced or lives in another mount namespace). */
    int fd = capi ? proc_open_mapped(pid, capi) : open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    snprintf(py->capi_file, sizeof py->capi_file, "%s", lib ? lib->path : exe);

    struct elf_file ef;
    int have_elf = fd >= 0 && elf_open_fd(fd, &ef) == 0;
    if (fd >= 0)
        close(fd); /* the mapping stays valid */
    uint64_t unused;
    int exports_capi = have_elf && (elf_lookup(&ef, "Py_Version", &unused) == 0 ||
                                    elf_lookup(&ef, "_PyRuntime", &unused) == 0 ||
                                    elf_lookup(&ef, "PyGILState_Ensure", &unused) == 0);
    int debug_ft = -1;
    if (lib || exports_capi) {
        if (have_elf)
            debug_ft = read_build(pid, &ef, capi, py);
        read_names(lib, exe, debug_ft, py);
    }
    if (have_elf)
        elf_close(&ef);
    proc_free_maps(&maps);
    if (!lib && !exports_capi) {
        snprintf(err, errlen, "%s maps no libpython and exports no Python C-API", exe);
        return 0;
    }
    if (!py->major) {
        snprintf(err, errlen,
                 "%s looks like CPython but its version is unknown (no Py_Version symbol, "
                 "no libpythonX.Y mapping, executable not named pythonX.Y)",
                 exe);
        return -1;
    }
    return 1;
}
