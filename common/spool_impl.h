/* spool_impl.h — the inside of a spool, shared by spool.c (receiving, the file, replay) and
 * spool_build.c (the .cvf).  Not for other users: spool.h is the interface. */
#ifndef VC_SPOOL_IMPL_H
#define VC_SPOOL_IMPL_H

#include "spool.h"
#include "tick_map.h"

#include <limits.h>
#include <stdint.h>

/* What one process's agent may make root's vcattach hold (SECURITY.md, "Budgets"): beyond
 * each, what it sends is refused (counted) or its trace ends there, keeping what came before. */
#define SPOOL_MAX_OWNERS 65536u     /* thread slots of one agent (it has 1024) */
#define SPOOL_MAX_IDS (1u << 22)    /* keys of one agent (a busy service has ~10^4) */
/* Lanes, one or a few per (thread, key, mark): ~120 bytes each in memory (a busy service has
 * ~10^4); beyond, the trace ends there. */
#define SPOOL_MAX_LANES (1u << 20)
/* Names (keys, threads, the process): each cut to CVF_NAME_MAX bytes (what a .cvf keeps) with
 * every stray byte made '?', all of them together at most this many bytes (a busy service has
 * ~1 MiB); beyond, names are refused and their calls built as unnamed. */
#define SPOOL_NAMES_MAX ((uint64_t)16 << 20)
#define SPOOL_BLOCKED_MAX 64        /* a thread's kernel wait channel, as /proc shows it */
#define SPOOL_MAX_DROPS (1u << 20)  /* drop ranges kept (beyond: only counted) */
/* CPU clock samples kept (24 MiB; beyond: only counted): 200 busy threads sampled every
 * 55 ms for an hour.  `start` holds them in the target's memory too. */
#define SPOOL_MAX_CPU (1u << 20)
/* Task step markers kept (32 MiB; beyond: only counted) and task names (24 MiB). */
#define SPOOL_MAX_TASK_STEPS (1u << 21)
#define SPOOL_MAX_TASK_NAMES (1u << 19)
#define SPOOL_TASK_NAME_MAX 48
/* What a build formats from what the agent sent (spool_build.c, through text.h): the instants
 * list of a trace (the agent's EVENTS, a drop range, a task, a --last mark; ~100-450 bytes
 * each; beyond: refused whole, counted in spool_stats.instants_refused), and the args list of
 * one piece of marked events (a piece is at most 2^20 events of at most ~110 bytes). */
#define SPOOL_INSTANTS_MAX ((size_t)256 << 20)
#define SPOOL_ARGS_MAX ((size_t)128 << 20)
#define SPOOL_LANES_PER_GROUP 16    /* more nesting of one key than this: an unsorted lane */

/* The file's own records, after the agent's frame types (common/protocol.h). */
enum {
    SPOOL_REC_LANE = 100,    /* u32 lane | u32 owner | u32 id | u32 mark */
    SPOOL_REC_SEGMENT = 101, /* u32 lane | u32 count | u64 first start | u64 last end | bytes */
    SPOOL_REC_DROP = 102,    /* u32 owner | u32 pad | u64 start | u64 dur | u64 calls */
    SPOOL_REC_CPU = 103,     /* u32 owner | u32 count | count x (u64 raw | u64 cpu ns) */
    SPOOL_REC_TASKS = 104,   /* u32 owner | u32 count | count x (u64 raw | u64 task) */
    SPOOL_REC_TASK_NAME = 105, /* u32 task | u32 part | 16 bytes */
};

/* Where a lane's bytes are in the file. */
struct spool_segment {
    uint64_t offset; /* of the bytes */
    uint64_t first;  /* start of its first record (the deltas begin there) */
    uint32_t count;
    uint32_t bytes;
};

/* The records of one (owner, id, mark), in start order unless !sorted. */
struct spool_lane {
    uint32_t owner, id, mark;
    uint32_t next;            /* next lane of the same group, or UINT32_MAX */
    int sorted;
    uint64_t last_start;      /* of its last record */
    uint64_t count;           /* records in the lane, on disk and in memory */
    struct spool_segment *segs;
    uint32_t nsegs, segs_cap;
    unsigned char *buf;       /* records not flushed yet */
    uint32_t buf_len, buf_cap, buf_count;
    uint64_t buf_first, buf_prev, buf_last_end;
    int declared;             /* its LANE record is in the file */
};

struct spool_thread {
    int32_t tid;
    int has_records;
    char *name;
    char *blocked;
};

struct spool_drop {
    uint32_t owner;
    uint64_t start, dur, calls;
};

/* A task step's start (VC_WIRE_TASK): at raw time `raw` thread `owner` began a step of task
 * number `task`. */
struct spool_task_step {
    uint32_t owner, task;
    uint64_t raw;
};

/* A task's name, as its parts came (VC_WIRE_TASK_NAME_0 - part). */
struct spool_task_name {
    uint32_t task;
    char name[SPOOL_TASK_NAME_MAX + 1];
};

/* One sample of a thread's CPU clock (VC_WIRE_CPU): at raw time `raw`, `cpu_ns` run in all. */
struct spool_cpu {
    uint32_t owner;
    uint64_t raw, cpu_ns;
};

/* One scheduler state change of a thread (spool_add_sched): from ns on, `state`. */
struct spool_sched {
    int32_t tid;
    uint8_t state;
    uint64_t ns;
};
#define SPOOL_MAX_SCHED (1u << 22) /* 64 MiB of state changes; beyond: counted in sched_lost */

struct spool {
    char path[PATH_MAX];
    int fd;
    int replaying;           /* spool_open: frames come from the file, not to be rewritten */
    uint64_t file_bytes, limit;
    int at_limit;            /* a write was refused because it would pass `limit` */
    uint64_t pid;
    char *process_name;
    char *events_json;       /* the agent's other events (a JSON list) */
    size_t events_len;
    vc_tick_map clock;
    int have_clock;
    char **names;            /* by id */
    uint32_t names_cap;
    uint64_t name_bytes;     /* held by names, thread names and the process name */
    uint64_t names_refused;  /* beyond SPOOL_NAMES_MAX (not kept) */
    struct spool_thread *threads; /* by owner */
    uint32_t threads_cap;
    struct spool_lane *lanes;
    uint32_t nlanes, lanes_cap;
    uint32_t *group_slots;   /* open addressing: lane index + 1 of a group's first lane */
    uint32_t group_mask;
    struct spool_drop *drops;
    size_t ndrops, drops_cap;
    struct spool_cpu *cpu;   /* CPU clock samples, in arrival order */
    size_t ncpu, cpu_cap;
    uint64_t cpu_lost;       /* samples beyond SPOOL_MAX_CPU (not kept) */
    struct spool_sched *sched; /* scheduler state changes (vcattach's own; memory only) */
    size_t nsched, sched_cap;
    struct spool_sched_info sched_info; /* spool_set_sched_info; lost includes the cap's */
    struct spool_task_step *steps; /* asyncio task steps, in arrival order */
    size_t nsteps, steps_cap;
    struct spool_task_name *task_names; /* in arrival order; a task's parts share one */
    size_t ntask_names, task_names_cap;
    uint64_t tasks_lost;     /* steps or names beyond the SPOOL_MAX_TASK_* (not kept) */
    uint64_t records, dropped, mem_max;
    uint64_t mem_bytes;      /* lane buffers allocated (kept across flushes when busy) */
    uint64_t mem_used;       /* bytes appended since the last flush */
    uint64_t first_raw, last_raw; /* the earliest and latest end received (--last) */
    int64_t last_flush_ms;
};

/* The group (owner, id, mark)'s hash slot. */
static inline uint32_t spool_group_hash(uint32_t owner, uint32_t id, uint32_t mark)
{
    uint64_t h = ((uint64_t)owner << 34 ^ (uint64_t)id << 2 ^ mark) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32);
}

/* Varints: LEB128, a zig-zag one for the start deltas (a lane that lost its order). */
static inline unsigned char *spool_put_varint(unsigned char *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    return p;
}

/* Reads a varint from [p, end); NULL if it does not end there or is longer than 10 bytes. */
static inline const unsigned char *spool_get_varint(const unsigned char *p,
                                                    const unsigned char *end, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; p < end && shift < 70; shift += 7) {
        unsigned char b = *p++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return p;
        }
    }
    return NULL;
}

static inline uint64_t spool_zigzag(int64_t d)
{
    return ((uint64_t)d << 1) ^ (uint64_t)(d >> 63);
}

static inline int64_t spool_unzigzag(uint64_t z)
{
    return (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
}

/* spool_sched.c: the state changes of `names`'s process (every spool of it in all[g0, g1))
 * as counter groups "sched TID" (threads the trace names only; *written += changes).  0, -1
 * out of memory, -2 the writer failed.  And the instant "vcattach sched", appended to json. */
struct vc_text;
int spool_sched_write(cvf_writer *w, const struct spool *names, struct spool *const *all,
                      size_t g0, size_t g1, uint64_t *written);
void spool_sched_instant(struct vc_text *json, const struct spool *sp);

#endif /* VC_SPOOL_IMPL_H */
