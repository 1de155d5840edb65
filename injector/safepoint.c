/* safepoint.c — pick a thread where calling dlopen() cannot deadlock or corrupt state.
 *
 * dlopen takes the loader lock and allocates; the agent's start function allocates and creates
 * a thread.  A thread stopped while holding (or waiting for) one of those locks would deadlock
 * on itself, and a thread stopped inside the loader would re-enter it in an inconsistent state
 * (kubo/injector#5).  So every stopped thread's stack is unwound (libunwind-ptrace, reading the
 * target through ptrace) and a thread is rejected if ANY frame is in the dynamic loader, the
 * malloc family, stdio internals, low-level lock waits, fork/atfork, pthread_create,
 * exit/atexit, dl_iterate_phdr or nss/getaddrinfo: the rules are in safepoint_rules.def, one
 * table shared with the gdb method (inject_gdb.c), which renders them into its script.
 *
 * Among the rest, a thread blocked in a syscall (futex in take_gil, sleep, poll, accept, read)
 * is preferred: it is idle, holds nothing, and is restarted normally after restore.
 *
 * Frame names come from the frame's module (found in /proc/PID/maps): its own .dynsym/.symtab
 * (elf.h), read from the mapped inode (proc_open_mapped: a regular file, never by a path the
 * target's user could turn into a FIFO).  libunwind opens no file at all (unwind_access.h). */
#include "safepoint.h"

#include <errno.h>
#include <fcntl.h>
#include <libunwind-ptrace.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "elf.h"
#include "unwind_access.h"

#define MAX_FRAMES 512
#define MAX_ELF_CACHE 64

/* The rules (injector/safepoint_rules.def, shared with the gdb method's script). */
enum rule_kind { RULE_NAME, RULE_PREFIX };

static const struct {
    enum rule_kind kind;
    const char *text;
    const char *why;
} symbol_rules[] = {
#define SP_NAME(name, why) {RULE_NAME, name, why},
#define SP_PREFIX(prefix, why) {RULE_PREFIX, prefix, why},
#include "safepoint_rules.def"
};

static const char *const alias_prefixes[] = {
#define SP_ALIAS(prefix) prefix,
#include "safepoint_rules.def"
};

static const struct {
    const char *prefix;
    int needs_so;
    const char *why;
} module_rules[] = {
#define SP_MODULE(prefix, needs_so, why) {prefix, needs_so, why},
#include "safepoint_rules.def"
};

static const long idle_syscalls[] = {
#define SP_IDLE_SYSCALL(name) SYS_##name,
#include "safepoint_rules.def"
};

/* A library by the start of its file name, and why a frame in it matters. */
struct library_rule {
    const char *prefix;
    const char *why;
};

static const struct library_rule bare_libcs[] = {
#define SP_BARE_LIBC(prefix, why) {prefix, why},
#include "safepoint_rules.def"
};

static const struct library_rule stripped_libcs[] = {
#define SP_STRIPPED_LIBC(prefix, why) {prefix, why},
#include "safepoint_rules.def"
};

static const long bare_idle_syscalls[] = {
#define SP_BARE_IDLE_SYSCALL(name) SYS_##name,
#include "safepoint_rules.def"
};

#define COUNT(a) (sizeof(a) / sizeof *(a))

/* The first symbol rule name matches.  A SP_NAME rule matches the name and its variants only:
 * "free" is free, free@GLIBC_2.2.5 or free_hook, never freeaddrinfo. */
static const char *match_symbol(const char *name)
{
    for (size_t i = 0; i < COUNT(symbol_rules); i++) {
        size_t n = strlen(symbol_rules[i].text);
        if (strncmp(name, symbol_rules[i].text, n) != 0)
            continue;
        char next = name[n];
        if (symbol_rules[i].kind == RULE_NAME && next && next != '_' && next != '@' &&
            next != '.' && !(next >= '0' && next <= '9'))
            continue;
        return symbol_rules[i].why;
    }
    return NULL;
}

const char *safepoint_unsafe_symbol(const char *name)
{
    if (!name || !*name)
        return NULL;
    const char *why = match_symbol(name);
    for (size_t i = 0; !why && i < COUNT(alias_prefixes); i++) {
        size_t n = strlen(alias_prefixes[i]);
        if (strncmp(name, alias_prefixes[i], n) == 0 && name[n])
            why = match_symbol(name + n);
    }
    return why;
}

const char *safepoint_unsafe_module(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    for (size_t i = 0; i < COUNT(module_rules); i++)
        if (strncmp(b, module_rules[i].prefix, strlen(module_rules[i].prefix)) == 0 &&
            (!module_rules[i].needs_so || strstr(b, ".so")))
            return module_rules[i].why;
    return NULL;
}

const char *safepoint_unsafe_frame(const char *name, const char *module_path)
{
    const char *why = module_path && module_path[0] == '/' ? safepoint_unsafe_module(module_path)
                                                            : NULL;
    return why ? why : safepoint_unsafe_symbol(name);
}

/* The reason of the first of rules[0..n) whose prefix starts path's file name, or NULL. */
static const char *library_rule(const char *path, const struct library_rule *rules, size_t n)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    for (size_t i = 0; i < n; i++)
        if (strncmp(b, rules[i].prefix, strlen(rules[i].prefix)) == 0)
            return rules[i].why;
    return NULL;
}

const char *safepoint_bare_libc(const char *path)
{
    return library_rule(path, bare_libcs, COUNT(bare_libcs));
}

/* The reason of the stripped C library at path (SP_STRIPPED_LIBC), or NULL. */
static const char *stripped_libc(const char *path)
{
    if (!path || path[0] != '/')
        return NULL;
    return library_rule(path, stripped_libcs, COUNT(stripped_libcs));
}

const char *safepoint_walk_frame(struct safepoint_walk *w, const char *name,
                                 const char *module_path)
{
    const char *why = safepoint_unsafe_frame(name, module_path);
    if (why)
        return why;
    const char *path = module_path ? module_path : "";
    if (w->open) {
        if (strncmp(path, w->module, sizeof w->module - 1) != 0)
            return stripped_libc(w->module); /* entered from outside: no exported entry */
        if (name && name[0])
            w->open = 0; /* its exported entry (judged by its name above) */
        return NULL;
    }
    if ((!name || !name[0]) && !w->idle && stripped_libc(path)) {
        w->open = 1;
        snprintf(w->module, sizeof w->module, "%s", path);
    }
    return NULL;
}

int safepoint_bare_idle_syscall(long nr)
{
    for (size_t i = 0; i < COUNT(bare_idle_syscalls); i++)
        if (bare_idle_syscalls[i] == nr)
            return 1;
    return 0;
}

/* Syscalls a thread idles in: the best places to borrow it. */
static int idle_syscall(long nr)
{
    for (size_t i = 0; i < COUNT(idle_syscalls); i++)
        if (idle_syscalls[i] == nr)
            return 1;
    return 0;
}

struct elf_cache {
    struct {
        uint64_t start; /* offset-0 mapping start: identifies the module */
        int ok;
        struct elf_file ef;
    } e[MAX_ELF_CACHE];
    int n;
};

/* The module's ELF (cached), or NULL. */
static struct elf_file *module_elf(struct elf_cache *c, pid_t pid, const struct proc_maps *maps,
                                   const struct proc_map *m, uint64_t *bias)
{
    /* the offset-0 mapping of the same file */
    const struct proc_map *m0 = NULL;
    for (size_t i = 0; i < maps->n; i++)
        if (maps->v[i].offset == 0 && maps->v[i].inode == m->inode &&
            strcmp(maps->v[i].path, m->path) == 0) {
            m0 = &maps->v[i];
            break;
        }
    if (!m0)
        return NULL;
    for (int i = 0; i < c->n; i++)
        if (c->e[i].start == m0->start) {
            *bias = elf_load_bias(&c->e[i].ef, m0->start);
            return c->e[i].ok ? &c->e[i].ef : NULL;
        }
    if (c->n == MAX_ELF_CACHE)
        return NULL;
    int k = c->n++;
    c->e[k].start = m0->start;
    c->e[k].ok = 0;
    int fd = proc_open_mapped(pid, m0);
    if (fd >= 0) {
        c->e[k].ok = elf_open_fd(fd, &c->e[k].ef) == 0;
        close(fd);
    }
    if (!c->e[k].ok)
        return NULL;
    *bias = elf_load_bias(&c->e[k].ef, m0->start);
    return &c->e[k].ef;
}

static void elf_cache_free(struct elf_cache *c)
{
    for (int i = 0; i < c->n; i++)
        if (c->e[i].ok)
            elf_close(&c->e[i].ef);
    c->n = 0;
}

/* Unwinds one stopped thread.  Returns a score: -1 unsafe, 1 running in user code,
 * 2 blocked in some syscall, 3 blocked in an idle syscall.  why: where/why. */
static int judge_thread(unw_addr_space_t as, struct elf_cache *cache, pid_t pid, pid_t tid,
                        const struct proc_maps *maps, int verbose, char *why, size_t whylen)
{
    struct user_regs_struct regs;
    if (pt_getregs(tid, &regs) < 0) {
        snprintf(why, whylen, "thread %d: registers unreadable", (int)tid);
        return -1;
    }
    long nr = (long)regs.orig_rax;
    int score = nr >= 0 ? (idle_syscall(nr) ? 3 : 2) : 1;

    void *upt = _UPT_create(tid);
    if (!upt) {
        snprintf(why, whylen, "thread %d: cannot unwind (out of memory)", (int)tid);
        return -1;
    }
    unw_cursor_t cur;
    if (unw_init_remote(&cur, as, upt) < 0) {
        _UPT_destroy(upt);
        snprintf(why, whylen, "thread %d: cannot unwind", (int)tid);
        return -1;
    }
    char first[160] = "?";
    int frames = 0;
    struct safepoint_walk walk;
    memset(&walk, 0, sizeof walk);
    walk.idle = score == 3;
    for (; frames < MAX_FRAMES; frames++) {
        unw_word_t ip = 0;
        if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || ip == 0)
            break;
        /* a return address points after the call: look up the call itself */
        uint64_t look = frames ? ip - 1 : ip;
        const struct proc_map *m = proc_map_at(maps, look);
        if (!m) {
            if (frames == 0) {
                score = -1;
                snprintf(why, whylen, "thread %d: stopped in unmapped code at %#lx", (int)tid,
                         (unsigned long)ip);
                break;
            }
            break; /* the unwind left the known stack: stop here */
        }
        /* a C library without unwind tables (safepoint_rules.def: musl): judged by the
         * syscall the thread is blocked in when it is the innermost frame; further out, the
         * known stack ends there */
        const char *bare = m->path[0] == '/' ? safepoint_bare_libc(m->path) : NULL;
        if (bare) {
            if (verbose > 1)
                fprintf(stderr, "vcattach:   tid %d #%d %#lx (%s, no unwind tables)\n",
                        (int)tid, frames, (unsigned long)ip, m->path);
            if (frames == 0) {
                const char *b = strrchr(m->path, '/');
                snprintf(first, sizeof first, "%s", b ? b + 1 : m->path);
                if (nr < 0 || !safepoint_bare_idle_syscall(nr)) {
                    score = -1;
                    if (nr >= 0)
                        snprintf(why, whylen, "thread %d: %s (syscall %ld)", (int)tid, bare, nr);
                    else
                        snprintf(why, whylen, "thread %d: %s (running)", (int)tid, bare);
                }
            }
            break;
        }
        /* Names: our cached ELF index only (libunwind's lookup would open the file by its
         * path, and re-read its symbol table for every frame, ~1 ms each on libpython). */
        char name[256] = "";
        uint64_t bias = 0, soff = 0;
        const char *sym = NULL;
        struct elf_file *ef = m->path[0] == '/' ? module_elf(cache, pid, maps, m, &bias) : NULL;
        if (ef && elf_symbolize(ef, look - bias, &sym, &soff) == 0)
            snprintf(name, sizeof name, "%s", sym);
        const char *bad = safepoint_walk_frame(&walk, name, m->path);
        if (verbose > 1)
            fprintf(stderr, "vcattach:   tid %d #%d %#lx %s (%s)\n", (int)tid, frames,
                    (unsigned long)ip, name[0] ? name : "?", m->path);
        if (frames == 0) {
            const char *b = strrchr(m->path, '/');
            snprintf(first, sizeof first, "%s in %s", name[0] ? name : "?", b ? b + 1 : m->path);
        }
        if (bad) {
            score = -1;
            snprintf(why, whylen, "thread %d: %s (%s)", (int)tid, bad, name[0] ? name : m->path);
            break;
        }
        if (unw_step(&cur) <= 0)
            break;
    }
    _UPT_destroy(upt);
    if (score >= 0) {
        if (nr >= 0)
            snprintf(why, whylen, "thread %d blocked in syscall %ld (%s, %d frames)", (int)tid,
                     nr, first, frames + 1);
        else
            snprintf(why, whylen, "thread %d running (%s, %d frames)", (int)tid, first,
                     frames + 1);
    }
    return score;
}

int safepoint_choose(struct tracee_group *g, const struct proc_maps *maps, int verbose,
                     char *why, size_t whylen)
{
    /* Our accessors, not _UPT_accessors: libunwind must never open a file of the target
     * (unwind_access.h says why). */
    unwind_access_use(g->pid, maps);
    unw_addr_space_t as = unw_create_addr_space(&unwind_access_accessors, 0);
    if (!as) {
        unwind_access_use(0, NULL);
        snprintf(why, whylen, "libunwind: cannot create an address space");
        return -1;
    }
    unw_set_caching_policy(as, UNW_CACHE_GLOBAL);
    struct elf_cache *cache = calloc(1, sizeof *cache);
    if (!cache) {
        unwind_access_use(0, NULL);
        unw_destroy_addr_space(as);
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    /* Cheap first pass (registers only): the score a thread would get if its stack is clean.
     * Then unwind in that order and stop at the first clean stack: it is the best choice, and
     * the other threads stay stopped only as long as that takes. */
    int order[256], prelim[256], n = 0;
    char reason[256] = "no thread is stopped";
    why[0] = 0;
    for (size_t i = 0; i < g->n && n < 256; i++) {
        struct tracee *t = &g->t[i];
        if (t->state != TRACEE_STOPPED)
            continue;
        if (t->in_signal_stop || t->group_stop) {
            snprintf(reason, sizeof reason, "thread %d: a signal is being delivered",
                     (int)t->tid);
            continue;
        }
        struct user_regs_struct regs;
        if (pt_getregs(t->tid, &regs) < 0)
            continue;
        long nr = (long)regs.orig_rax;
        int s = nr >= 0 ? (idle_syscall(nr) ? 3 : 2) : 1, k = n++;
        while (k > 0 && prelim[k - 1] < s) { /* insertion sort, stable, best first */
            order[k] = order[k - 1];
            prelim[k] = prelim[k - 1];
            k--;
        }
        order[k] = (int)i;
        prelim[k] = s;
    }
    int best = -1;
    for (int k = 0; k < n && best < 0; k++) {
        struct tracee *t = &g->t[order[k]];
        char w[256];
        int s = judge_thread(as, cache, g->pid, t->tid, maps, verbose, w, sizeof w);
        if (verbose)
            fprintf(stderr, "vcattach: %s: %s\n", s < 0 ? "unsafe" : "chosen", w);
        if (s >= 0) {
            best = order[k];
            snprintf(why, whylen, "%s", w);
        } else {
            snprintf(reason, sizeof reason, "%s", w);
        }
    }
    if (best < 0)
        snprintf(why, whylen, "%s", reason);
    elf_cache_free(cache);
    free(cache);
    unw_destroy_addr_space(as);
    unwind_access_use(0, NULL);
    return best;
}
