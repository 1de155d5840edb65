/* unwind_access.c — libunwind-ptrace accessors without file access (see unwind_access.h).
 *
 * find_proc_info: the mapping holding ip (our parsed /proc/PID/maps) → the module's first
 * mapping (file offset 0, where the ELF header is loaded) → its program headers, read from
 * memory → PT_GNU_EH_FRAME → the .eh_frame_hdr binary search table, handed to libunwind as a
 * REMOTE_TABLE: libunwind then reads the table and the FDEs through ptrace, as _UPT does after
 * mapping the file.  Only the common encodings of .eh_frame_hdr are accepted (what GNU ld and
 * lld write); anything else is "no unwind info", i.e. the walk stops there, never a guess.
 * get_proc_name: always "no info"; safepoint.c names frames from its own ELF index. */
#include "unwind_access.h"

#include <linux/elf.h>
#include <string.h>

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

static const struct proc_maps *current_maps;

void unwind_access_use(const struct proc_maps *maps)
{
    current_maps = maps;
}

/* Reads len bytes of target memory at addr through the ptrace accessor (word by word). */
static int read_mem(unw_addr_space_t as, uint64_t addr, void *out, size_t len, void *arg)
{
    unsigned char *o = out;
    uint64_t base = addr & ~(uint64_t)7;
    size_t skip = (size_t)(addr - base);
    while (len) {
        unw_word_t w;
        if (_UPT_access_mem(as, base, &w, 0, arg) < 0)
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
    .access_mem = _UPT_access_mem,
    .access_reg = _UPT_access_reg,
    .access_fpreg = _UPT_access_fpreg,
    .resume = _UPT_resume,
    .get_proc_name = no_proc_name,
};
