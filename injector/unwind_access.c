/* unwind_access.c — libunwind-ptrace accessors without file access (see unwind_access.h).
 *
 * find_proc_info: the mapping holding ip (our parsed /proc/PID/maps) → the module's first
 * mapping (file offset 0, where the ELF header is loaded) → its program headers, read from
 * memory → PT_GNU_EH_FRAME → the .eh_frame_hdr binary search table, handed to libunwind as a
 * REMOTE_TABLE: libunwind then reads the table and the FDEs through ptrace, as _UPT does after
 * mapping the file.  Only the common encodings of .eh_frame_hdr are accepted (what GNU ld and
 * lld write); anything else is "no unwind info", i.e. the walk stops there, never a guess.
 * get_proc_name: always "no info"; safepoint.c names frames from its own ELF index.
 *
 * access_mem: libunwind reads the target one word at a time (the table's binary search, each
 * FDE and CIE, each saved register), and one PTRACE_PEEKDATA per word made a 20-frame unwind
 * ~2,500 syscalls, 5-12 ms with every thread of the target stopped; that was the largest part
 * of reaching a newly spawned interpreter (issue 31).  Words are served from whole pages read
 * with process_vm_readv (PEEKDATA for what that cannot read), kept for one use: the target is
 * stopped for all of it, so a page read once cannot change under us. */
#include "unwind_access.h"

#include <errno.h>
#include <linux/elf.h>
#include <string.h>
#include <sys/uio.h>

#include "test_seam.h"

/* Not in libunwind's public headers, exported by libunwind-x86_64 for libunwind-ptrace: the
 * table search _UPT_find_proc_info itself ends with. */
extern int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
                                              unw_dyn_info_t *di, unw_proc_info_t *pi,
                                              int need_unwind_info, void *arg);

#define DW_EH_PE_udata4 0x03
#define DW_EH_PE_sdata4 0x0b
#define DW_EH_PE_pcrel 0x10
#define DW_EH_PE_datarel 0x30
#define MAX_PHDRS 64
#define PAGE 4096u
#define CACHED_PAGES 64 /* a deep stack and the tables of a few modules: 256 KiB */

static const struct proc_maps *current_maps;
static pid_t current_pid;
static int vm_readv_works;

/* The pages read during one use, replaced round-robin; addr 1 marks an empty slot (no page
 * starts there), unreadable pages are not kept (each of their words goes to PEEKDATA). */
static struct {
    uint64_t addr[CACHED_PAGES];
    unsigned next;
    unsigned char data[CACHED_PAGES][PAGE];
} pages;

static void forget_pages(void)
{
    for (unsigned i = 0; i < CACHED_PAGES; i++)
        pages.addr[i] = 1;
    pages.next = 0;
}

void unwind_access_use(pid_t pid, const struct proc_maps *maps)
{
    current_maps = maps;
    current_pid = pid;
    /* test seam (test_seam.h): VCATTACH_TEST_NO_VM_READV, as on a kernel or seccomp profile
     * without process_vm_readv (tests/system/test_inject.py) */
    vm_readv_works = VC_SEAM(NO_VM_READV) == NULL;
    forget_pages();
}

/* The cached copy of the page at addr (page-aligned), read now if need be; NULL if it cannot
 * be read whole (an unreadable page, or no process_vm_readv here, e.g. a seccomp profile that
 * allows ptrace alone: then every word goes to PEEKDATA, as before, not 512 per page). */
static const unsigned char *page_at(uint64_t addr)
{
    for (unsigned i = 0; i < CACHED_PAGES; i++)
        if (pages.addr[i] == addr)
            return pages.data[i];
    if (current_pid <= 0 || !vm_readv_works)
        return NULL;
    unsigned k = pages.next;
    struct iovec local = {pages.data[k], PAGE}, remote = {(void *)(uintptr_t)addr, PAGE};
    ssize_t n = process_vm_readv(current_pid, &local, 1, &remote, 1, 0);
    if (n != (ssize_t)PAGE) {
        if (n < 0 && (errno == ENOSYS || errno == EPERM))
            vm_readv_works = 0;
        return NULL;
    }
    pages.addr[k] = addr;
    pages.next = (k + 1) % CACHED_PAGES;
    return pages.data[k];
}

/* libunwind's memory accessor: reads from the page cache; writes (libunwind makes none while
 * unwinding) and words the cache cannot serve go to _UPT_access_mem, as before. */
static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write,
                      void *arg)
{
    uint64_t base = addr & ~(uint64_t)(PAGE - 1);
    if (write) {
        for (unsigned i = 0; i < CACHED_PAGES; i++)
            if (pages.addr[i] == base)
                pages.addr[i] = 1;
        return _UPT_access_mem(as, addr, val, write, arg);
    }
    const unsigned char *p = addr - base <= PAGE - sizeof *val ? page_at(base) : NULL;
    if (!p)
        return _UPT_access_mem(as, addr, val, write, arg);
    memcpy(val, p + (addr - base), sizeof *val);
    return 0;
}

/* Reads len bytes of target memory at addr through the memory accessor (word by word). */
static int read_mem(unw_addr_space_t as, uint64_t addr, void *out, size_t len, void *arg)
{
    unsigned char *o = out;
    uint64_t base = addr & ~(uint64_t)7;
    size_t skip = (size_t)(addr - base);
    while (len) {
        unw_word_t w;
        if (access_mem(as, base, &w, 0, arg) < 0)
            return -1;
        size_t k = sizeof w - skip < len ? sizeof w - skip : len;
        memcpy(o, (unsigned char *)&w + skip, k);
        o += k;
        len -= k;
        base += sizeof w;
        skip = 0;
    }
    return 0;
}

static const struct proc_map *map_at(uint64_t ip)
{
    for (size_t i = 0; current_maps && i < current_maps->n; i++)
        if (ip >= current_maps->v[i].start && ip < current_maps->v[i].end)
            return &current_maps->v[i];
    return NULL;
}

/* The module's extent: every mapping of the same file (inode and name), and the one at
 * file offset 0. */
static const struct proc_map *module_of(const struct proc_map *m, uint64_t *lo, uint64_t *hi)
{
    const struct proc_map *m0 = NULL;
    *lo = m->start;
    *hi = m->end;
    for (size_t i = 0; i < current_maps->n; i++) {
        const struct proc_map *x = &current_maps->v[i];
        if (x->inode != m->inode || x->dev_major != m->dev_major ||
            x->dev_minor != m->dev_minor || strcmp(x->path, m->path) != 0)
            continue;
        if (x->offset == 0 && (!m0 || x->start <= m->start))
            m0 = x;
        if (x->start < *lo)
            *lo = x->start;
        if (x->end > *hi)
            *hi = x->end;
    }
    return m0;
}

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
                          int need_unwind_info, void *arg)
{
    const struct proc_map *m = map_at(ip);
    if (!m || !m->path[0] || m->inode == 0) /* anonymous: JIT code, nothing to find */
        return -UNW_ENOINFO;
    uint64_t lo, hi;
    const struct proc_map *m0 = module_of(m, &lo, &hi);
    if (!m0)
        return -UNW_ENOINFO;
    Elf64_Ehdr eh;
    if (read_mem(as, m0->start, &eh, sizeof eh, arg) < 0 ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > MAX_PHDRS ||
        eh.e_phoff >= m0->end - m0->start)
        return -UNW_ENOINFO;
    Elf64_Phdr ph[MAX_PHDRS];
    if (read_mem(as, m0->start + eh.e_phoff, ph, eh.e_phnum * sizeof *ph, arg) < 0)
        return -UNW_ENOINFO;
    uint64_t first_load = UINT64_MAX, eh_frame_vaddr = 0;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        if (ph[i].p_type == PT_LOAD && first_load == UINT64_MAX)
            first_load = ph[i].p_vaddr & ~(uint64_t)0xfff;
        if (ph[i].p_type == PT_GNU_EH_FRAME)
            eh_frame_vaddr = ph[i].p_vaddr;
    }
    if (first_load == UINT64_MAX || !eh_frame_vaddr)
        return -UNW_ENOINFO;
    uint64_t hdr = m0->start - first_load + eh_frame_vaddr;
    if (hdr < lo || hdr >= hi)
        return -UNW_ENOINFO;
    /* .eh_frame_hdr: u8 version, eh_frame_ptr_enc, fde_count_enc, table_enc; then
     * eh_frame_ptr, fde_count, and the table of (initial location, FDE address) pairs. */
    unsigned char h[12];
    if (read_mem(as, hdr, h, sizeof h, arg) < 0 || h[0] != 1 ||
        (h[1] != (DW_EH_PE_pcrel | DW_EH_PE_sdata4) && h[1] != DW_EH_PE_udata4 &&
         h[1] != DW_EH_PE_sdata4) ||
        h[2] != DW_EH_PE_udata4 || h[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
        return -UNW_ENOINFO;
    uint32_t fde_count;
    memcpy(&fde_count, h + 8, sizeof fde_count);
    if (fde_count == 0 || (uint64_t)fde_count * 8 > hi - hdr)
        return -UNW_ENOINFO;
    unw_dyn_info_t di;
    memset(&di, 0, sizeof di);
    di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
    di.start_ip = lo;
    di.end_ip = hi;
    di.gp = 0;
    di.u.rti.name_ptr = 0;
    di.u.rti.segbase = hdr;
    di.u.rti.table_len = (uint64_t)fde_count * 8 / sizeof(unw_word_t);
    di.u.rti.table_data = hdr + sizeof h;
    return _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
}

static int no_proc_name(unw_addr_space_t as, unw_word_t ip, char *buf, size_t len,
                        unw_word_t *off, void *arg)
{
    (void)as, (void)ip, (void)buf, (void)len, (void)off, (void)arg;
    return -UNW_ENOINFO;
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *addr, void *arg)
{
    (void)as, (void)addr, (void)arg;
    return -UNW_ENOINFO;
}

unw_accessors_t unwind_access_accessors = {
    .find_proc_info = find_proc_info,
    .put_unwind_info = _UPT_put_unwind_info,
    .get_dyn_info_list_addr = get_dyn_info_list_addr,
    .access_mem = access_mem,
    .access_reg = _UPT_access_reg,
    .access_fpreg = _UPT_access_fpreg,
    .resume = _UPT_resume,
    .get_proc_name = no_proc_name,
};
