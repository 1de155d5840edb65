/* sched_split.c — a trace's scheduler states per thread and the exact split they give (sched_split.h).
 *
 * Apart from cpu.c because it is another source with its own definition (states, not a
 * sampled clock); it hands cpu.c samples that make cpu.c's interpolation exact, so that every
 * consumer of vct_cpu_span is exact where the states exist.
 */
#include "sched_split.h"
#include "cpu.h"
#include "cvf_reader.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static int add_state(vct_sched_marks *m, int64_t ts, unsigned state)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 256;
        int64_t *a = realloc(m->ts, cap * sizeof *a);
        if (!a)
            return -1;
        m->ts = a;
        unsigned char *b = realloc(m->state, cap);
        if (!b)
            return -1;
        m->state = b;
        m->cap = cap;
    }
    m->ts[m->n] = ts;
    m->state[m->n] = (unsigned char)state;
    m->n++;
    return 0;
}

/* A counter value as 0 or 1 (SAME: the row before's), -1 for anything else. */
static int flag_of(const cvf_counter_value *v, int last)
{
    if (v->tag == CVF_COUNTER_SAME)
        return last;
    if (v->tag == CVF_COUNTER_LONG && (v->v.i == 0 || v->v.i == 1))
        return (int)v->v.i;
    if (v->tag == CVF_COUNTER_FLOAT && (v->v.f == 0.0 || v->v.f == 1.0))
        return (int)v->v.f;
    return -1;
}

int vct_sched_add_group(vct_trace *t, const struct cvf_counter_group *g)
{
    size_t plen = strlen(VCT_SCHED_COUNTER_PREFIX);
    if (strncmp(g->name, VCT_SCHED_COUNTER_PREFIX, plen) != 0 || g->nkeys != 2 ||
        strcmp(g->keys[0], "on_cpu") != 0 || strcmp(g->keys[1], "runnable") != 0)
        return 0;
    char *endp;
    unsigned long long tid = strtoull(g->name + plen, &endp, 10);
    if (*endp || endp == g->name + plen || tid != g->tid)
        return 0;
    vct_thread *th = vct_trace_thread(t, g->pid, g->tid);
    if (!th)
        return -1;
    int on = -1, run = -1;
    for (size_t i = 0; i < g->nts; i++) {
        on = flag_of(&g->values[2 * i], on);
        run = flag_of(&g->values[2 * i + 1], run);
        if (on < 0 || run < 0 || (on && run) || g->ts_ns[i] < 0)
            continue; /* not a state: ignored */
        unsigned state = on ? VCT_SCHED_ON_CPU : run ? VCT_SCHED_RUNNABLE : VCT_SCHED_BLOCKED;
        if (add_state(&th->sched, g->ts_ns[i] / (1000 / VCT_TICKS_PER_US), state) < 0)
            return -1;
    }
    return 0;
}

static uint64_t count_arg(json_t *args, const char *key)
{
    json_t *v = json_object_get(args, key);
    return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v)
                                                            : 0;
}

int vct_sched_note(vct_trace *t, json_t *event)
{
    const char *name = json_string_value(json_object_get(event, "name"));
    json_t *args = json_object_get(event, "args");
    if (!name || strcmp(name, "vcattach sched") || !json_is_object(args))
        return 0;
    t->sched_tried = 1;
    t->sched_switches += count_arg(args, "switches");
    t->sched_lost += count_arg(args, "lost");
    t->sched_refused += count_arg(args, "refused");
    const char *why = json_string_value(json_object_get(args, "why"));
    if (why && why[0] && !t->sched_why && !(t->sched_why = strndup(why, 300)))
        return -1;
    return 0;
}

static int cmp_state(const void *a, const void *b)
{
    const int64_t *x = a, *y = b; /* (ts, order) pairs */
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

/* Puts th's states in time order (equal times: the later in the file wins). */
static int sort_states(vct_sched_marks *m)
{
    int sorted = 1;
    for (size_t i = 1; i < m->n && sorted; i++)
        sorted = m->ts[i] >= m->ts[i - 1];
    if (sorted)
        return 0;
    int64_t *p = malloc(m->n * 3 * sizeof *p);
    if (!p)
        return -1;
    for (size_t i = 0; i < m->n; i++)
        p[3 * i] = m->ts[i], p[3 * i + 1] = (int64_t)i, p[3 * i + 2] = m->state[i];
    qsort(p, m->n, 3 * sizeof *p, cmp_state);
    for (size_t i = 0; i < m->n; i++)
        m->ts[i] = p[3 * i], m->state[i] = (unsigned char)p[3 * i + 2];
    free(p);
    return 0;
}

/* th's CPU samples and runnable samples from its states: a sample at every change. */
static int thread_samples(vct_thread *th)
{
    vct_sched_marks *m = &th->sched;
    if (sort_states(m) < 0)
        return -1;
    th->cpu.n = 0; /* the agent's samples, if any, are superseded */
    th->run.n = 0;
    int64_t on = 0, run = 0;
    for (size_t i = 0; i < m->n; i++) {
        if (i + 1 < m->n && m->ts[i + 1] == m->ts[i])
            continue; /* the later state at the same time stands */
        if (vct_cpu_add(th, m->ts[i], on) < 0)
            return -1;
        if (vct_samples_add(&th->run, m->ts[i], run) < 0)
            return -1;
        if (i + 1 < m->n) {
            int64_t d = m->ts[i + 1] - m->ts[i];
            if (m->state[i] == VCT_SCHED_ON_CPU)
                on = vct_sat_add(on, d);
            else if (m->state[i] == VCT_SCHED_RUNNABLE)
                run = vct_sat_add(run, d);
        }
    }
    return 0;
}

int vct_sched_finish(vct_trace *t)
{
    t->has_sched = 0;
    for (size_t i = 0; i < t->nthreads; i++) {
        vct_thread *th = &t->threads[i];
        if (th->sched.n < 2)
            continue;
        if (thread_samples(th) < 0)
            return -1;
        if (th->cpu.n >= 2)
            t->has_sched = 1;
    }
    return 0;
}

int64_t vct_sched_runnable(const vct_thread *th, int64_t start, int64_t end)
{
    return th->run.n >= 2 ? vct_samples_span(&th->run, start, end, NULL) : 0;
}
