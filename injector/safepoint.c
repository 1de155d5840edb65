/* safepoint.c — pick a thread where calling dlopen() cannot deadlock or corrupt state.
 *
 * dlopen takes the loader lock and allocates; the agent's start function allocates and creates
 * a thread.  A thread stopped while holding (or waiting for) one of those locks would deadlock
 * on itself, and a thread stopped inside the loader would re-enter it in an inconsistent state
 * (kubo/injector#5).  So every stopped thread's stack is unwound (libunwind-ptrace, reading the
 * target through ptrace) and a thread is rejected if ANY frame is in the dynamic loader, the
 * malloc family, stdio internals, low-level lock waits, fork/atfork, pthread_create,
 * exit/atexit, dl_iterate_phdr or nss/getaddrinfo.
 *
 * Among the rest, a thread blocked in a syscall (futex in take_gil, sleep, poll, accept, read)
 * is preferred: it is idle, holds nothing, and is restarted normally after restore.
 *
 * Frame names come from libunwind (_UPT_get_proc_name); when that fails (stripped binaries such
 * as Debian's /usr/bin/python3.11, or a file in another mount namespace) the frame's module is
 * found in /proc/PID/maps and the name in that module's own .dynsym/.symtab (elf.h). */
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

#define MAX_FRAMES 512
#define MAX_ELF_CACHE 64

/* Prefix patterns: a frame whose function name starts with one of these is unsafe. */
static const struct {
    const char *prefix;
    const char *why;
} unsafe_prefixes[] = {
    {"malloc", "in malloc"},           {"__libc_malloc", "in malloc"},
    {"_int_malloc", "in malloc"},      {"calloc", "in malloc"},
    {"__libc_calloc", "in malloc"},    {"realloc", "in malloc"},
    {"__libc_realloc", "in malloc"},   {"_int_realloc", "in malloc"},
    {"free", "in free"},               {"__libc_free", "in free"},
    {"cfree", "in free"},              {"_int_free", "in free"},
    {"memalign", "in malloc"},         {"__libc_memalign", "in malloc"},
    {"_int_memalign", "in malloc"},    {"posix_memalign", "in malloc"},
    {"aligned_alloc", "in malloc"},    {"valloc", "in malloc"},
    {"pvalloc", "in malloc"},          {"malloc_consolidate", "in malloc"},
    {"sysmalloc", "in malloc"},        {"systrim", "in malloc"},
    {"tcache_", "in malloc"},          {"arena_get", "in malloc"},
    {"__malloc_", "in malloc"},        {"malloc_trim", "in malloc"},
    {"_IO_", "in stdio"},              {"__GI__IO_", "in stdio"},
    {"__vfprintf", "in stdio"},        {"__printf", "in stdio"},
    {"fflush", "in stdio"},            {"fwrite", "in stdio"},
    {"fputs", "in stdio"},             {"fopen", "in stdio"},
    {"fclose", "in stdio"},            {"__lll_lock_wait", "waiting for a low-level lock"},
    {"__lll_lock_wake", "in a low-level lock"},
    {"pthread_mutex_lock", "waiting for a mutex"},
    {"__pthread_mutex_lock", "waiting for a mutex"},
    {"___pthread_mutex_lock", "waiting for a mutex"},
    {"__pthread_mutex_cond_lock", "waiting for a mutex"},
    {"pthread_rwlock_", "in a rwlock"},
    {"__pthread_rwlock_", "in a rwlock"},
    {"fork", "in fork"},               {"__libc_fork", "in fork"},
    {"_Fork", "in fork"},              {"__run_fork_handlers", "in fork handlers"},
    {"__register_atfork", "in atfork"},{"pthread_atfork", "in atfork"},
    {"pthread_create", "in pthread_create"},
    {"__pthread_create", "in pthread_create"},
    {"exit", "in exit"},               {"_exit", "in exit"},
    {"__run_exit_handlers", "in exit"},{"atexit", "in atexit"},
    {"__cxa_atexit", "in atexit"},     {"__cxa_finalize", "in exit"},
    {"__new_exitfn", "in atexit"},     {"__call_tls_dtors", "in exit"},
    {"dl_iterate_phdr", "in dl_iterate_phdr"},
    {"__dl_iterate_phdr", "in dl_iterate_phdr"},
    {"_dl_", "in the dynamic loader"}, {"__libc_dlopen", "in the dynamic loader"},
    {"__libc_dlsym", "in the dynamic loader"},
    {"__libc_dlclose", "in the dynamic loader"},
    {"dlopen", "in dlopen"},           {"dlclose", "in dlclose"},
    {"dlsym", "in dlsym"},             {"dlvsym", "in dlsym"},
    {"dlerror", "in dlerror"},         {"dladdr", "in dladdr"},
    {"dlinfo", "in dlinfo"},           {"___dlopen", "in dlopen"},
    {"getaddrinfo", "in getaddrinfo (nss)"},
    {"gethostbyname", "in nss"},       {"gethostbyaddr", "in nss"},
    {"getpwnam", "in nss"},            {"getpwuid", "in nss"},
    {"getgrnam", "in nss"},            {"getgrgid", "in nss"},
    {"__nss_", "in nss"},              {"nss_", "in nss"},
    {"_nss_", "in nss"},               {"getnameinfo", "in nss"},
    {"__libc_start_main", NULL},       /* (explicitly fine: every main thread has it) */
};

const char *safepoint_unsafe_symbol(const char *name)
{
    if (!name || !*name)
        return NULL;
    for (size_t i = 0; i < sizeof unsafe_prefixes / sizeof *unsafe_prefixes; i++) {
        size_t n = strlen(unsafe_prefixes[i].prefix);
        if (strncmp(name, unsafe_prefixes[i].prefix, n) != 0)
            continue;
        /* "free" must not match "freeaddrinfo" style names only by accident: a prefix ending in
         * a letter matches the whole name or a name continuing with '_' / '@' / digits */
        char next = name[n];
        char last = unsafe_prefixes[i].prefix[n - 1];
        if (last != '_' && next && next != '_' && next != '@' && next != '.' &&
            !(next >= '0' && next <= '9'))
            continue;
        return unsafe_prefixes[i].why;
    }
    return NULL;
}

const char *safepoint_unsafe_module(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    if (strncmp(b, "ld-linux", 8) == 0 || strncmp(b, "ld-musl", 7) == 0 ||
        (strncmp(b, "ld-", 3) == 0 && strstr(b, ".so")) || strncmp(b, "ld.so", 5) == 0)
        return "in the dynamic loader";
    return NULL;
}

/* Syscalls a thread idles in: the best places to borrow it. */
static int idle_syscall(long nr)
{
    switch (nr) {
    case SYS_futex: case SYS_clock_nanosleep: case SYS_nanosleep: case SYS_select:
    case SYS_pselect6: case SYS_poll: case SYS_ppoll: case SYS_epoll_wait:
    case SYS_epoll_pwait: case SYS_read: case SYS_accept: case SYS_accept4:
    case SYS_recvfrom: case SYS_recvmsg: case SYS_wait4: case SYS_waitid: case SYS_pause:
    case SYS_rt_sigtimedwait: case SYS_rt_sigsuspend:
    case SYS_restart_syscall: /* a restarted sleep/poll/futex wait */
        return 1;
    default:
        return 0;
    }
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
        const char *bad = m->path[0] == '/' ? safepoint_unsafe_module(m->path) : NULL;
        /* Names: our cached ELF index first (libunwind re-reads the file's symbol table for
         * every frame, ~1 ms each on libpython), libunwind's lookup when ours finds nothing. */
        char name[256] = "";
        uint64_t bias = 0, soff = 0;
        const char *sym = NULL;
        struct elf_file *ef = m->path[0] == '/' ? module_elf(cache, pid, maps, m, &bias) : NULL;
        if (ef && elf_symbolize(ef, look - bias, &sym, &soff) == 0)
            snprintf(name, sizeof name, "%s", sym);
        unw_word_t off = 0;
        if (!name[0] && (unw_get_proc_name(&cur, name, sizeof name, &off) < 0))
            name[0] = 0;
        if (!bad)
            bad = safepoint_unsafe_symbol(name);
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
    unw_addr_space_t as = unw_create_addr_space(&_UPT_accessors, 0);
    if (!as) {
        snprintf(why, whylen, "libunwind: cannot create an address space");
        return -1;
    }
    unw_set_caching_policy(as, UNW_CACHE_GLOBAL);
    struct elf_cache *cache = calloc(1, sizeof *cache);
    if (!cache) {
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
    return best;
}
