/* elf.c — a minimal, bounds-checked ELF64 reader for the injector (see elf.h).
 *
 * The files come from the target's filesystem and may be anything: every offset and size is
 * checked against the mapped length before use, and a malformed file is -ENOEXEC, never a
 * crash.  Only what injection needs is indexed: program headers (load bias), section headers
 * (symbol tables, and one section by name) and the entry point. */
#include "elf.h"

/* <linux/elf.h>, not <elf.h>: with -Iinjector, <elf.h> would find this directory's elf.h */
#include <linux/elf.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#ifndef STT_GNU_IFUNC
#define STT_GNU_IFUNC 10
#endif

static int in_file(const struct elf_file *ef, uint64_t off, uint64_t len)
{
    return off <= ef->size && len <= ef->size - off;
}

int elf_open_fd(int fd, struct elf_file *ef)
{
    struct stat st;
    memset(ef, 0, sizeof *ef);
    if (fstat(fd, &st) < 0)
        return -errno;
    if (st.st_size < (off_t)sizeof(Elf64_Ehdr))
        return -ENOEXEC;
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        return -errno;
    ef->map = p;
    ef->size = (size_t)st.st_size;

    const Elf64_Ehdr *eh = p;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_machine != EM_X86_64 || eh->e_phentsize != sizeof(Elf64_Phdr) ||
        !in_file(ef, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr)))
        goto bad;
    ef->entry = eh->e_entry;

    const Elf64_Phdr *ph = (const Elf64_Phdr *)(ef->map + eh->e_phoff);
    int have_load = 0;
    for (unsigned i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD) {
            ef->first_load_vaddr = ph[i].p_vaddr & ~(uint64_t)0xfff;
            have_load = 1;
            break;
        }
    if (!have_load)
        goto bad;

    if (eh->e_shoff && eh->e_shentsize == sizeof(Elf64_Shdr) &&
        in_file(ef, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr))) {
        const Elf64_Shdr *sh = (const Elf64_Shdr *)(ef->map + eh->e_shoff);
        for (unsigned i = 0; i < eh->e_shnum; i++) {
            int slot = sh[i].sh_type == SHT_DYNSYM ? 0 : sh[i].sh_type == SHT_SYMTAB ? 1 : -1;
            if (slot < 0 || sh[i].sh_link >= eh->e_shnum)
                continue;
            const Elf64_Shdr *strh = &sh[sh[i].sh_link];
            if (!in_file(ef, sh[i].sh_offset, sh[i].sh_size) ||
                !in_file(ef, strh->sh_offset, strh->sh_size) || strh->sh_size == 0)
                continue;
            ef->tab[slot].syms = ef->map + sh[i].sh_offset;
            ef->tab[slot].count = sh[i].sh_size / sizeof(Elf64_Sym);
            ef->tab[slot].str = (const char *)ef->map + strh->sh_offset;
            ef->tab[slot].strsize = strh->sh_size;
        }
    }
    return 0;
bad:
    elf_close(ef);
    return -ENOEXEC;
}

void elf_close(struct elf_file *ef)
{
    if (ef->map)
        munmap(ef->map, ef->size);
    memset(ef, 0, sizeof *ef);
}

/* The symbol's name if st_name is a terminated string inside the string table, else NULL. */
static const char *sym_name(const struct elf_file *ef, int t, const Elf64_Sym *s)
{
    if (s->st_name >= ef->tab[t].strsize)
        return NULL;
    const char *n = ef->tab[t].str + s->st_name;
    if (!memchr(n, 0, ef->tab[t].strsize - s->st_name))
        return NULL;
    return n;
}

static int is_code_or_data(const Elf64_Sym *s)
{
    int type = ELF64_ST_TYPE(s->st_info);
    return s->st_shndx != SHN_UNDEF && s->st_value != 0 &&
           (type == STT_FUNC || type == STT_OBJECT || type == STT_GNU_IFUNC);
}

int elf_lookup(const struct elf_file *ef, const char *name, uint64_t *vaddr)
{
    for (int t = 0; t < 2; t++) {
        const Elf64_Sym *s = (const Elf64_Sym *)ef->tab[t].syms;
        for (size_t i = 0; i < ef->tab[t].count; i++) {
            if (!is_code_or_data(&s[i]))
                continue;
            const char *n = sym_name(ef, t, &s[i]);
            if (n && strcmp(n, name) == 0) {
                *vaddr = s[i].st_value;
                return 0;
            }
        }
    }
    return -ENOENT;
}

int elf_section(const struct elf_file *ef, const char *name, uint64_t *vaddr, uint64_t *size)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)ef->map;
    if (!eh || !eh->e_shoff || eh->e_shentsize != sizeof(Elf64_Shdr) ||
        eh->e_shstrndx >= eh->e_shnum ||
        !in_file(ef, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)))
        return -ENOENT;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(ef->map + eh->e_shoff);
    const Elf64_Shdr *names = &sh[eh->e_shstrndx];
    if (!in_file(ef, names->sh_offset, names->sh_size))
        return -ENOENT;
    const char *str = (const char *)ef->map + names->sh_offset;
    size_t want = strlen(name) + 1;
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_name >= names->sh_size || names->sh_size - sh[i].sh_name < want)
            continue;
        if (memcmp(str + sh[i].sh_name, name, want) == 0 && sh[i].sh_addr) {
            *vaddr = sh[i].sh_addr;
            *size = sh[i].sh_size;
            return 0;
        }
    }
    return -ENOENT;
}

int elf_symbolize(const struct elf_file *ef, uint64_t vaddr, const char **name, uint64_t *offset)
{
    const Elf64_Sym *best = NULL;
    int best_t = 0;
    for (int t = 0; t < 2; t++) {
        const Elf64_Sym *s = (const Elf64_Sym *)ef->tab[t].syms;
        for (size_t i = 0; i < ef->tab[t].count; i++) {
            int type = ELF64_ST_TYPE(s[i].st_info);
            if (s[i].st_shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC) ||
                s[i].st_value > vaddr)
                continue;
            if (s[i].st_size && vaddr < s[i].st_value + s[i].st_size) { /* exact containment */
                best = &s[i];
                best_t = t;
                goto found;
            }
            if (!s[i].st_size && (!best || s[i].st_value > best->st_value)) {
                best = &s[i];
                best_t = t;
            }
        }
    }
    if (!best)
        return -ENOENT;
found:;
    const char *n = sym_name(ef, best_t, best);
    if (!n)
        return -ENOENT;
    *name = n;
    *offset = vaddr - best->st_value;
    return 0;
}

int elf_find_code(const struct elf_file *ef, const void *pat, size_t len, uint64_t *vaddr)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)ef->map;
    if (!ef->map || len == 0)
        return -ENOENT;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(ef->map + eh->e_phoff); /* checked at open */
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X) ||
            !in_file(ef, ph[i].p_offset, ph[i].p_filesz) || ph[i].p_filesz < len)
            continue;
        const unsigned char *seg = ef->map + ph[i].p_offset;
        const unsigned char *hit = memmem(seg, ph[i].p_filesz, pat, len);
        if (hit) {
            *vaddr = ph[i].p_vaddr + (uint64_t)(hit - seg);
            return 0;
        }
    }
    return -ENOENT;
}
