/* elf.h — symbol lookup in the ELF files a target has mapped (libc, the python executable or
 * libpython, the agent), without a debugger: .dynsym/.dynstr (and .symtab when not stripped),
 * the symbol versions a library defines, the entry point, byte patterns in executable
 * segments, and the load bias that turns a file address into a target address. */
#ifndef VC_ELF_H
#define VC_ELF_H

#include <stddef.h>
#include <stdint.h>

struct elf_file {
    size_t size;               /* the file's length when opened */
    uint64_t entry;            /* e_entry (file address) */
    uint64_t first_load_vaddr; /* p_vaddr of the first PT_LOAD, page-aligned down */
    /* up to two symbol tables: [0] .dynsym, [1] .symtab (absent when stripped) */
    struct {
        const unsigned char *syms;
        size_t count;
        const char *str;
        size_t strsize;
    } tab[2];
    /* executable PT_LOAD segments, searched by elf_find_code through our own duplicate of
     * the file's descriptor (fd_plus1 - 1; 0: none, so a zeroed struct owns nothing) */
    struct {
        uint64_t offset, filesz, vaddr;
    } code[8];
    int ncode;
    int fd_plus1;
};

/* Reads the headers and symbol tables of the file behind fd (not closed; ef keeps a duplicate
 * for elf_find_code) into memory of our own: a file truncated meanwhile is a malformed file,
 * not a SIGBUS.  0 or -errno (-ENOEXEC: not a usable x86-64 ELF). */
int elf_open_fd(int fd, struct elf_file *ef);
void elf_close(struct elf_file *ef);

/* File address of a defined function/object symbol; 0 or -ENOENT. */
int elf_lookup(const struct elf_file *ef, const char *name, uint64_t *vaddr);

/* File address and size of the section called name (".PyRuntime": where CPython 3.14+ keeps
 * _PyRuntime, which starts with its _Py_DebugOffsets).  0 or -ENOENT. */
int elf_section(const struct elf_file *ef, const char *name, uint64_t *vaddr, uint64_t *size);

/* Calls each(ctx, name) for every symbol version the file defines (its .gnu.version_d: for a
 * glibc libc.so.6 its soname, then GLIBC_2.2.5 ... GLIBC_2.N of its release, GLIBC_PRIVATE).
 * 0, or -ENOENT when the file defines none. */
int elf_version_names(const struct elf_file *ef, void (*each)(void *ctx, const char *name),
                      void *ctx);

/* Name of the function containing file address vaddr (the nearest symbol below it when sizes
 * are missing); name points into ef (valid until elf_close).  0 or -ENOENT. */
int elf_symbolize(const struct elf_file *ef, uint64_t vaddr, const char **name, uint64_t *offset);

/* File address of the first occurrence of the byte string pat inside an executable PT_LOAD
 * segment (its file-backed part): code the target already maps, found without writing any.
 * 0 or -ENOENT. */
int elf_find_code(const struct elf_file *ef, const void *pat, size_t len, uint64_t *vaddr);

/* Load bias: target address = file address + bias, where map_start is the start of the
 * file's offset-0 mapping in the target. */
static inline uint64_t elf_load_bias(const struct elf_file *ef, uint64_t map_start)
{
    return map_start - ef->first_load_vaddr;
}

#endif /* VC_ELF_H */
