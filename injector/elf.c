/* elf.c — a minimal, bounds-checked ELF64 reader for the injector (see elf.h).
 *
 * The files come from the target's filesystem and may be anything: every offset and size is
 * checked against the file's length before use, and a malformed file is -ENOEXEC, never a
 * crash.  Only what injection needs is read (pread into our own buffers, never mmap: see
 * read_at): program headers (load bias), section headers (symbol tables, one section by name,
 * the symbol versions a library defines) and the entry point. */
#include "elf.h"
#include "fd_io.h"

/* <linux/elf.h>, not <elf.h>: with -Iinjector, <elf.h> would find this directory's elf.h */
#include <linux/elf.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>

#ifndef STT_GNU_IFUNC
#define STT_GNU_IFUNC 10
#endif

static int in_file(const struct elf_file *ef, uint64_t off, uint64_t len)
{
    return off <= ef->size && len <= ef->size - off;
}

/* Why pread into our own buffers and not mmap: the file belongs to the target's user, who can
 * truncate it while we read it; a mapping would then SIGBUS vcattach (with the target's threads
 * stopped).  A short read is just a malformed file. */
#define ELF_MAX_TABLE ((uint64_t)256 << 20) /* one symbol or string table: beyond is not an ELF we use */

static void *read_at(int fd, uint64_t off, uint64_t len)
{
    if (len == 0 || len > ELF_MAX_TABLE)
        return NULL;
    unsigned char *buf = malloc((size_t)len + 1);
    if (buf && vc_pread_all(fd, buf, (size_t)len, (off_t)off) != (ssize_t)len) {
        free(buf);
        return NULL;
    }
    if (buf)
        buf[len] = 0; /* a string table read this way always ends in a NUL we own */
    return buf;
}

int elf_open_fd(int fd, struct elf_file *ef)
{
    struct stat st;
    memset(ef, 0, sizeof *ef);
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr))
        return -ENOEXEC;
    ef->size = (size_t)st.st_size;

    Elf64_Ehdr *eh = read_at(fd, 0, sizeof *eh);
    Elf64_Phdr *ph = NULL;
    Elf64_Shdr *sh = NULL;
    if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_machine != EM_X86_64 || eh->e_phentsize != sizeof(Elf64_Phdr) || !eh->e_phnum ||
        !in_file(ef, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr)))
        goto bad;
    ef->entry = eh->e_entry;

    ph = read_at(fd, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr));
    if (!ph)
        goto bad;
    int have_load = 0;
    for (unsigned i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD) {
            ef->first_load_vaddr = ph[i].p_vaddr & ~(uint64_t)0xfff;
            have_load = 1;
            break;
        }
    if (!have_load)
        goto bad;
    for (unsigned i = 0; i < eh->e_phnum && ef->ncode < (int)(sizeof ef->code / sizeof ef->code[0]);
         i++)
        if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X) &&
            in_file(ef, ph[i].p_offset, ph[i].p_filesz)) {
            ef->code[ef->ncode].offset = ph[i].p_offset;
            ef->code[ef->ncode].filesz = ph[i].p_filesz;
            ef->code[ef->ncode].vaddr = ph[i].p_vaddr;
            ef->ncode++;
        }

    if (eh->e_shoff && eh->e_shentsize == sizeof(Elf64_Shdr) && eh->e_shnum &&
        in_file(ef, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)) &&
        (sh = read_at(fd, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr))) != NULL) {
        for (unsigned i = 0; i < eh->e_shnum; i++) {
            int slot = sh[i].sh_type == SHT_DYNSYM ? 0 : sh[i].sh_type == SHT_SYMTAB ? 1 : -1;
            if (slot < 0 || ef->tab[slot].syms || sh[i].sh_link >= eh->e_shnum)
                continue;
            const Elf64_Shdr *strh = &sh[sh[i].sh_link];
            if (!in_file(ef, sh[i].sh_offset, sh[i].sh_size) ||
                !in_file(ef, strh->sh_offset, strh->sh_size) || strh->sh_size == 0)
                continue;
            unsigned char *syms = read_at(fd, sh[i].sh_offset, sh[i].sh_size);
            char *str = read_at(fd, strh->sh_offset, strh->sh_size);
            if (!syms || !str) {
                free(syms);
                free(str);
                continue;
            }
            ef->tab[slot].syms = syms;
            ef->tab[slot].count = sh[i].sh_size / sizeof(Elf64_Sym);
            ef->tab[slot].str = str;
            ef->tab[slot].strsize = strh->sh_size;
        }
    }
    free(eh);
    free(ph);
    free(sh);
    int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    ef->fd_plus1 = dup >= 0 ? dup + 1 : 0;
    return 0;
bad:
    free(eh);
    free(ph);
    elf_close(ef);
    return -ENOEXEC;
}

void elf_close(struct elf_file *ef)
{
    if (ef->fd_plus1)
        close(ef->fd_plus1 - 1);
    for (int t = 0; t < 2; t++) {
        free((void *)ef->tab[t].syms);
        free((void *)ef->tab[t].str);
    }
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

/* The file's ELF header and section headers, read again through our duplicate of the
 * descriptor, like elf_find_code: nothing of the file is mapped, so a truncation is a miss, not
 * a SIGBUS.  0 with *eh and *sh (free both), or -ENOENT. */
static int read_section_headers(const struct elf_file *ef, Elf64_Ehdr **eh, Elf64_Shdr **sh)
{
    *eh = NULL;
    *sh = NULL;
    if (!ef->fd_plus1)
        return -ENOENT;
    int fd = ef->fd_plus1 - 1;
    *eh = read_at(fd, 0, sizeof **eh);
    if (!*eh || !(*eh)->e_shoff || (*eh)->e_shentsize != sizeof(Elf64_Shdr) ||
        !in_file(ef, (*eh)->e_shoff, (uint64_t)(*eh)->e_shnum * sizeof(Elf64_Shdr)) ||
        !(*sh = read_at(fd, (*eh)->e_shoff, (uint64_t)(*eh)->e_shnum * sizeof(Elf64_Shdr)))) {
        free(*eh);
        *eh = NULL;
        return -ENOENT;
    }
    return 0;
}

/* The bytes of section s (NUL-terminated, see read_at), or NULL. */
static void *read_section(const struct elf_file *ef, const Elf64_Shdr *s)
{
    if (!in_file(ef, s->sh_offset, s->sh_size))
        return NULL;
    return read_at(ef->fd_plus1 - 1, s->sh_offset, s->sh_size);
}

int elf_section(const struct elf_file *ef, const char *name, uint64_t *vaddr, uint64_t *size)
{
    Elf64_Ehdr *eh;
    Elf64_Shdr *sh;
    char *str = NULL;
    int rc = -ENOENT;
    if (read_section_headers(ef, &eh, &sh) < 0)
        return -ENOENT;
    if (eh->e_shstrndx >= eh->e_shnum)
        goto out;
    const Elf64_Shdr *names = &sh[eh->e_shstrndx];
    if (!(str = read_section(ef, names)))
        goto out;
    size_t want = strlen(name) + 1;
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_name >= names->sh_size || names->sh_size - sh[i].sh_name < want)
            continue;
        if (memcmp(str + sh[i].sh_name, name, want) == 0 && sh[i].sh_addr) {
            *vaddr = sh[i].sh_addr;
            *size = sh[i].sh_size;
            rc = 0;
            break;
        }
    }
out:
    free(eh);
    free(sh);
    free(str);
    return rc;
}

#ifndef SHT_GNU_verdef
#define SHT_GNU_verdef 0x6ffffffd
#endif
/* Elf64_Verdef and Elf64_Verdaux (the gABI's symbol versioning), copied out of the section
 * with memcpy: entries sit at offsets the file chooses, aligned or not. */
struct verdef {
    uint16_t version, flags, ndx, cnt;
    uint32_t hash, aux, next;
};
struct verdaux {
    uint32_t name, next;
};
#define ELF_MAX_VERDEFS 4096 /* glibc 2.41's libc defines 60 */

int elf_version_names(const struct elf_file *ef, void (*each)(void *ctx, const char *name),
                      void *ctx)
{
    Elf64_Ehdr *eh;
    Elf64_Shdr *sh;
    unsigned char *defs = NULL;
    char *str = NULL;
    int rc = -ENOENT;
    if (read_section_headers(ef, &eh, &sh) < 0)
        return -ENOENT;
    const Elf64_Shdr *vs = NULL;
    for (unsigned i = 0; i < eh->e_shnum && !vs; i++)
        if (sh[i].sh_type == SHT_GNU_verdef && sh[i].sh_link < eh->e_shnum)
            vs = &sh[i];
    if (!vs || !(defs = read_section(ef, vs)) || !(str = read_section(ef, &sh[vs->sh_link])))
        goto out;
    uint64_t size = vs->sh_size, strsize = sh[vs->sh_link].sh_size, off = 0;
    for (unsigned n = 0; n < vs->sh_info && n < ELF_MAX_VERDEFS; n++) {
        struct verdef vd;
        struct verdaux va;
        if (off > size || size - off < sizeof vd)
            break;
        memcpy(&vd, defs + off, sizeof vd);
        uint64_t aux = off + vd.aux;
        if (vd.cnt && aux <= size && size - aux >= sizeof va) {
            memcpy(&va, defs + aux, sizeof va);
            if (va.name < strsize) /* str ends in a NUL of ours (read_at) */
                each(ctx, str + va.name);
        }
        if (vd.next == 0)
            break;
        off += vd.next;
    }
    rc = 0;
out:
    free(eh);
    free(sh);
    free(defs);
    free(str);
    return rc;
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
    /* pread in bounded chunks that overlap by len - 1 bytes, so that no match is cut in two */
    enum { CHUNK = 1 << 20 };
    if (!ef->fd_plus1 || len == 0 || len > CHUNK / 2)
        return -ENOENT;
    unsigned char *buf = malloc(CHUNK);
    if (!buf)
        return -ENOMEM;
    int rc = -ENOENT;
    for (int i = 0; i < ef->ncode && rc == -ENOENT; i++) {
        uint64_t off = 0, size = ef->code[i].filesz;
        while (off + len <= size) {
            size_t want = size - off < CHUNK ? (size_t)(size - off) : CHUNK;
            ssize_t n = vc_pread_all(ef->fd_plus1 - 1, buf, want, (off_t)(ef->code[i].offset + off));
            if (n < (ssize_t)len)
                break; /* truncated meanwhile: no match there */
            const unsigned char *hit = memmem(buf, (size_t)n, pat, len);
            if (hit) {
                *vaddr = ef->code[i].vaddr + off + (uint64_t)(hit - buf);
                rc = 0;
                break;
            }
            off += (uint64_t)n - (len - 1);
        }
    }
    free(buf);
    return rc;
}
