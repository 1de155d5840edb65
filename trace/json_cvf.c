/* json_cvf.c — Chrome trace JSON → .cvf, grouped the way VizTracer's compressor groups it:
 *   - "X" events into FEE groups by (pid, tid, name, has_args), each sorted by (ts, dur) with
 *     ties kept in input order, args stored as one JSON list per group;
 *   - "M" process_name / thread_name into name records ((pid, tid) → last name wins);
 *   - "C" events into counter groups by (pid, tid, name), diffed against the previous ts with
 *     Python `==` semantics (spec §5.3);
 *   - everything else verbatim, in input order, into the single OTHER_EVENTS record
 *     (including "M" events with other names, which the reference rejects);
 *   - the top-level "file_info", if present.
 *
 * The input is walked one event at a time: jansson parses each event on its own (so memory
 * stays proportional to the compact per-event data, not to a whole JSON tree), the fields the
 * format needs are extracted, and args/other events are re-serialised compactly at once.
 * Bad events give an error naming their index; nothing here can crash on hostile input.
 *
 * Differences from the reference, on purpose: ts/dur are rounded to the 10 ns grid (it
 * truncates), negative dur becomes 0, an X event without a name is an error (it segfaults).
 *
 * Integers beyond int64: VizTracer writes them in counter values (a Python int has no size)
 * and its compressor carries them as the counter tag LONG_STRING (their decimal digits).
 * jansson cannot hold them, so an event it rejects with "too big integer" is parsed again
 * with every such literal turned into a marked string (BIGINT_MARK + digits); a counter value
 * carrying the mark is written as LONG_STRING, anywhere else it stays an error (the format
 * has no place for it).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jansson.h>

#include "json_cvf.h"
#include "cvf.h"
#include "cvf_reader.h"
#include "json_scan.h"
#include "json_text.h"
#include "utf8.h"

/* ---- groups and their lookup ------------------------------------------------------------- */

typedef struct fee_item {
    int64_t ts;
    uint64_t dur;
    uint64_t seq;      /* input order inside the group: keeps ties stable */
    uint64_t args_off; /* into the args arena */
    uint64_t args_len;
} fee_item;

typedef struct ctr_item {
    double ts; /* as given: duplicates are detected on the exact value, like the reference */
    size_t index;
    json_t *args;
} ctr_item;

typedef struct group {
    uint64_t pid, tid;
    char *name;
    size_t name_len;
    int tag;        /* FEE: has_args; names: 0 process / 1 thread; counters: 0 */
    void *items;    /* fee_item[] or ctr_item[]; for name records: unused */
    size_t n, cap;
    char *value;    /* name records: the name */
} group;

typedef struct groupset {
    group *v;
    size_t n, cap;
    uint32_t *slots; /* open addressing: group index + 1, 0 = empty */
    size_t nslots;   /* power of two */
} groupset;

static uint64_t key_hash(uint64_t pid, uint64_t tid, const char *name, size_t len, int tag)
{
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)tag;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)name[i]) * 1099511628211ULL;
    h ^= pid * 0x9E3779B97F4A7C15ULL;
    h = (h ^ (h >> 29)) * 0xBF58476D1CE4E5B9ULL;
    h ^= tid * 0x94D049BB133111EBULL;
    return h ^ (h >> 31);
}

static int set_grow(groupset *s)
{
    size_t ns = s->nslots ? s->nslots * 2 : 64;
    uint32_t *slots = calloc(ns, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t g = 0; g < s->n; g++) {
        group *x = &s->v[g];
        uint64_t h = key_hash(x->pid, x->tid, x->name, x->name_len, x->tag);
        size_t i = (size_t)h & (ns - 1);
        while (slots[i])
            i = (i + 1) & (ns - 1);
        slots[i] = (uint32_t)(g + 1);
    }
    free(s->slots);
    s->slots = slots;
    s->nslots = ns;
    return 0;
}

/* Finds or adds the group of a key; NULL on out of memory. */
static group *set_get(groupset *s, uint64_t pid, uint64_t tid, const char *name, size_t len,
                      int tag)
{
    if ((s->n + 1) * 2 > s->nslots && set_grow(s) != 0)
        return NULL;
    uint64_t h = key_hash(pid, tid, name, len, tag);
    size_t i = (size_t)h & (s->nslots - 1);
    while (s->slots[i]) {
        group *g = &s->v[s->slots[i] - 1];
        if (g->pid == pid && g->tid == tid && g->tag == tag && g->name_len == len &&
            !memcmp(g->name, name, len))
            return g;
        i = (i + 1) & (s->nslots - 1);
    }
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 16;
        group *v = realloc(s->v, nc * sizeof *v);
        if (!v)
            return NULL;
        s->v = v;
        s->cap = nc;
    }
    if (s->n >= UINT32_MAX - 1)
        return NULL;
    group *g = &s->v[s->n];
    memset(g, 0, sizeof *g);
    g->name = malloc(len + 1);
    if (!g->name)
        return NULL;
    memcpy(g->name, name, len);
    g->name[len] = 0;
    g->name_len = len;
    g->pid = pid;
    g->tid = tid;
    g->tag = tag;
    s->slots[i] = (uint32_t)(++s->n);
    return g;
}

static void set_free(groupset *s, bool counters)
{
    for (size_t g = 0; g < s->n; g++) {
        if (counters) {
            ctr_item *it = s->v[g].items;
            for (size_t i = 0; i < s->v[g].n; i++)
                json_decref(it[i].args);
        }
        free(s->v[g].items);
        free(s->v[g].name);
        free(s->v[g].value);
    }
    free(s->v);
    free(s->slots);
}

static int items_push(group *g, const void *item, size_t size)
{
    if (g->n == g->cap) {
        size_t nc = g->cap ? g->cap * 2 : 8;
        void *p = realloc(g->items, nc * size);
        if (!p)
            return -1;
        g->items = p;
        g->cap = nc;
    }
    memcpy((char *)g->items + g->n * size, item, size);
    g->n++;
    return 0;
}

/* ---- conversion state -------------------------------------------------------------------- */

typedef struct conv {
    groupset fee, names, ctrs;
    jtext args;        /* arena of serialised FEE args */
    jtext other;       /* "[e1,e2,...": the other-events list being built */
    size_t nother;
    json_t *file_info;
    bool have_events;
    cvf_error *err;
    const convert_ctx *cc;
    size_t total;
    bool bigint; /* the event being added was parsed with BIGINT_MARK strings */
    size_t released; /* bytes at the start of a mapped input given back (release_read) */
} conv;

/* Prefix of a string that stands for an integer literal beyond int64 (see the top comment).
 * A control character: no JSON string written by a tracer starts with it. */
#define BIGINT_MARK "\001bigint:"
#define BIGINT_MARK_LEN (sizeof BIGINT_MARK - 1)

static bool is_bigint(json_t *v)
{
    return json_is_string(v) && !strncmp(json_string_value(v), BIGINT_MARK, BIGINT_MARK_LEN);
}

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int ev_fail(conv *c, size_t index, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->err->offset = index;
    snprintf(c->err->msg, sizeof c->err->msg, "event #%zu: %s", index, msg);
    return -1;
}

static int oom(conv *c)
{
    snprintf(c->err->msg, sizeof c->err->msg, "out of memory");
    return -1;
}

static int get_id(conv *c, size_t idx, json_t *ev, const char *key, uint64_t *out)
{
    json_t *v = json_object_get(ev, key);
    if (!v)
        return ev_fail(c, idx, "missing \"%s\"", key);
    if (!json_is_integer(v))
        return ev_fail(c, idx, "\"%s\" must be an integer (the .cvf format stores integer "
                               "pids and tids)", key);
    *out = (uint64_t)json_integer_value(v); /* negative: two's complement, like the reference */
    return 0;
}

static int get_num(conv *c, size_t idx, json_t *ev, const char *key, double *out)
{
    json_t *v = json_object_get(ev, key);
    if (!v)
        return ev_fail(c, idx, "missing \"%s\"", key);
    if (!json_is_number(v))
        return ev_fail(c, idx, "\"%s\" must be a number", key);
    *out = json_number_value(v);
    return 0;
}

static int get_str(conv *c, size_t idx, json_t *ev, const char *key, const char **s,
                   size_t *len)
{
    json_t *v = json_object_get(ev, key);
    if (!v)
        return ev_fail(c, idx, "missing \"%s\"", key);
    if (!json_is_string(v))
        return ev_fail(c, idx, "\"%s\" must be a string", key);
    *s = json_string_value(v);
    *len = json_string_length(v);
    if (memchr(*s, 0, *len))
        return ev_fail(c, idx, "\"%s\" contains a NUL character", key);
    return 0;
}

static bool plain_string(const char *t, size_t len, size_t i, size_t *end)
{
    /* t[i] == '"'; no escapes, no control characters, valid UTF-8 */
    size_t j = i + 1;
    while (j < len && t[j] != '"') {
        unsigned char ch = (unsigned char)t[j];
        if (ch == '\\' || ch < 0x20)
            return false;
        j++;
    }
    if (j >= len || !cvf_utf8_valid(t + i + 1, j - i - 1))
        return false;
    *end = j + 1;
    return true;
}

/* Appends t[a .. b) minus the whitespace outside strings. */
static int put_minified(jtext *out, const char *t, size_t a, size_t b)
{
    size_t run = a;
    bool in_str = false;
    for (size_t i = a; i < b; i++) {
        char ch = t[i];
        if (in_str) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_str = false;
        } else if (ch == '"')
            in_str = true;
        else if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') {
            if (jtext_put(out, t + run, i - run))
                return -1;
            run = i + 1;
        }
    }
    return jtext_put(out, t + run, b - run);
}

static int add_other(conv *c, json_t *ev)
{
    if (jtext_put(&c->other, c->nother ? "," : "[", 1) || jtext_value(&c->other, ev))
        return oom(c);
    c->nother++;
    return 0;
}

/* Adds one call to its FEE group; its args (if any) as jansson's value or as text already
 * checked (args_text[0 .. args_len), minified on the way). */
static int push_fee(conv *c, uint64_t pid, uint64_t tid, const char *name, size_t name_len,
                    double ts, double dur, json_t *args, const char *args_text, size_t args_len)
{
    bool has_args = args != NULL || args_text != NULL;
    group *g = set_get(&c->fee, pid, tid, name, name_len, has_args);
    if (!g)
        return oom(c);
    fee_item it = {cvf_us_to_ticks(ts), cvf_dur_us_to_ticks(dur), g->n, 0, 0};
    if (has_args) {
        it.args_off = c->args.len;
        if (args ? jtext_value(&c->args, args) : put_minified(&c->args, args_text, 0, args_len))
            return oom(c);
        it.args_len = c->args.len - it.args_off;
    }
    return items_push(g, &it, sizeof it) ? oom(c) : 0;
}

/* An "X" event (a complete call). */
static int add_x(conv *c, size_t idx, json_t *ev)
{
    const char *name;
    size_t name_len;
    uint64_t pid, tid;
    double ts, dur;
    if (get_str(c, idx, ev, "name", &name, &name_len) || get_id(c, idx, ev, "pid", &pid) ||
        get_id(c, idx, ev, "tid", &tid) || get_num(c, idx, ev, "ts", &ts) ||
        get_num(c, idx, ev, "dur", &dur))
        return -1;
    return push_fee(c, pid, tid, name, name_len, ts, dur, json_object_get(ev, "args"), NULL, 0);
}

/* An "M" event: a process or thread name (the last one wins, at the first one's position),
 * or another kind kept verbatim. */
static int add_meta(conv *c, size_t idx, json_t *ev)
{
    const char *name;
    size_t name_len;
    uint64_t pid, tid;
    if (get_str(c, idx, ev, "name", &name, &name_len))
        return -1;
    int kind = !strcmp(name, "process_name") ? 0 : !strcmp(name, "thread_name") ? 1 : -1;
    if (kind < 0)
        return add_other(c, ev); /* e.g. process_sort_index: kept verbatim */
    json_t *args = json_object_get(ev, "args");
    json_t *nv = args ? json_object_get(args, "name") : NULL;
    if (!nv || !json_is_string(nv))
        return ev_fail(c, idx, "%s event needs args.name as a string", name);
    if (memchr(json_string_value(nv), 0, json_string_length(nv)))
        return ev_fail(c, idx, "args.name contains a NUL character");
    if (get_id(c, idx, ev, "pid", &pid) || get_id(c, idx, ev, "tid", &tid))
        return -1;
    group *g = set_get(&c->names, pid, tid, "", 0, kind);
    if (!g)
        return oom(c);
    char *copy = strdup(json_string_value(nv));
    if (!copy)
        return oom(c);
    free(g->value);
    g->value = copy;
    return 0;
}

/* A "C" event: counter samples, numbers only. */
static int add_counter(conv *c, size_t idx, json_t *ev)
{
    const char *name;
    size_t name_len;
    uint64_t pid, tid;
    double ts;
    if (get_str(c, idx, ev, "name", &name, &name_len) || get_id(c, idx, ev, "pid", &pid) ||
        get_id(c, idx, ev, "tid", &tid) || get_num(c, idx, ev, "ts", &ts))
        return -1;
    json_t *args = json_object_get(ev, "args");
    if (!args || !json_is_object(args))
        return ev_fail(c, idx, "counter event needs an \"args\" object");
    const char *key;
    json_t *val;
    json_object_foreach(args, key, val)
    {
        if (!json_is_number(val) && !json_is_null(val) && !is_bigint(val))
            return ev_fail(c, idx, "counter value \"%.60s\" is not a number (the .cvf "
                                   "format stores numeric counters only)", key);
    }
    group *g = set_get(&c->ctrs, pid, tid, name, name_len, 0);
    if (!g)
        return oom(c);
    ctr_item it = {ts, idx, json_incref(args)};
    if (items_push(g, &it, sizeof it)) {
        json_decref(args);
        return oom(c);
    }
    return 0;
}

static int add_event(conv *c, size_t idx, json_t *ev)
{
    if (!json_is_object(ev))
        return ev_fail(c, idx, "not a JSON object");
    json_t *ph = json_object_get(ev, "ph");
    if (!ph || !json_is_string(ph))
        return ev_fail(c, idx, "missing \"ph\" (event type) string");
    char type = json_string_value(ph)[0];
    if (c->bigint && type != 'C')
        return ev_fail(c, idx, "an integer beyond 64 bits outside a counter value: the .cvf "
                               "format can hold such integers only as counter values");
    return type == 'X' ? add_x(c, idx, ev)
           : type == 'M' ? add_meta(c, idx, ev)
           : type == 'C' ? add_counter(c, idx, ev)
                         : add_other(c, ev);
}

/* ---- writing ------------------------------------------------------------------------------ */

static int fee_cmp(const void *a, const void *b)
{
    const fee_item *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    if (x->dur != y->dur)
        return x->dur < y->dur ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int write_fee(conv *c, cvf_writer *w, group *g, cvf_fee_event **evbuf, size_t *evcap,
                     jtext *list)
{
    fee_item *it = g->items;
    size_t i;
    for (i = 1; i < g->n; i++)
        if (fee_cmp(&it[i - 1], &it[i]) > 0)
            break;
    if (i < g->n)
        qsort(it, g->n, sizeof *it, fee_cmp);
    if (*evcap < g->n) {
        cvf_fee_event *p = realloc(*evbuf, g->n * sizeof *p);
        if (!p)
            return oom(c);
        *evbuf = p;
        *evcap = g->n;
    }
    cvf_fee_event *ev = *evbuf;
    for (i = 0; i < g->n; i++)
        ev[i] = (cvf_fee_event){it[i].ts, it[i].dur};
    const char *args = NULL;
    size_t args_len = 0;
    if (g->tag) {
        list->len = 0;
        for (i = 0; i < g->n; i++)
            if (jtext_put(list, i ? "," : "[", 1) ||
                jtext_put(list, c->args.data + it[i].args_off, (size_t)it[i].args_len))
                return oom(c);
        if (jtext_put(list, "]", 1))
            return oom(c);
        args = list->data;
        args_len = list->len;
    }
    return cvf_write_fee_group(w, g->pid, g->tid, g->name, ev, g->n, args, args_len);
}

static int ctr_cmp(const void *a, const void *b)
{
    const ctr_item *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Python `==` between two counter values (int, float or None). */
static bool value_eq(json_t *a, json_t *b)
{
    if (json_is_null(a) || json_is_null(b))
        return json_is_null(a) && json_is_null(b);
    if (is_bigint(a) || is_bigint(b))
        return is_bigint(a) && is_bigint(b) &&
               !strcmp(json_string_value(a), json_string_value(b));
    if (json_is_integer(a) && json_is_integer(b))
        return json_integer_value(a) == json_integer_value(b);
    if (json_is_real(a) && json_is_real(b))
        return json_real_value(a) == json_real_value(b);
    json_t *i = json_is_integer(a) ? a : b, *r = json_is_integer(a) ? b : a;
    double d = json_real_value(r);
    /* exact comparison, as Python does between int and float */
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != floor(d))
        return false;
    return (json_int_t)d == json_integer_value(i);
}

/* The group's keys in order of first appearance, walking its events by ts, into *keys (the
 * events' own strings), and each event's ts in ns into ts[].  0, or -1 (memory). */
static int counter_keys(const group *g, const char ***keys, size_t *nkeys, int64_t *ts)
{
    const ctr_item *it = g->items;
    size_t kcap = 0;
    for (size_t i = 0; i < g->n; i++) {
        const char *key;
        json_t *val;
        json_object_foreach(it[i].args, key, val)
        {
            size_t k = 0;
            while (k < *nkeys && strcmp((*keys)[k], key))
                k++;
            if (k < *nkeys)
                continue;
            if (*nkeys == kcap) {
                size_t nc = kcap ? kcap * 2 : 8;
                const char **p = realloc(*keys, nc * sizeof *p);
                if (!p)
                    return -1;
                *keys = p;
                kcap = nc;
            }
            (*keys)[(*nkeys)++] = key;
        }
        double t = it[i].ts * 1000.0;
        ts[i] = isnan(t) ? 0 : t >= 9.2e18 ? INT64_MAX : t <= -9.2e18 ? INT64_MIN : llround(t);
    }
    return 0;
}

/* One value of a counter, diffed against the key's last one (cache, NULL: never seen), as
 * the reference does: SAME when equal in Python's sense, UNKNOWN for a None or a key that
 * disappeared after a value. */
static cvf_counter_value counter_value(json_t *cur, json_t **cache)
{
    cvf_counter_value out = {.tag = CVF_COUNTER_SAME};
    if (!cur) {
        if (*cache && !json_is_null(*cache)) {
            *cache = json_null(); /* a cached Python None (jansson's null is a singleton) */
            out.tag = CVF_COUNTER_UNKNOWN;
        }
        return out;
    }
    if (*cache && value_eq(*cache, cur))
        return out;
    *cache = cur;
    if (json_is_null(cur))
        out.tag = CVF_COUNTER_UNKNOWN;
    else if (is_bigint(cur)) {
        out.tag = CVF_COUNTER_LONG_STRING;
        out.v.s = json_string_value(cur) + BIGINT_MARK_LEN;
    } else if (json_is_integer(cur)) {
        out.tag = CVF_COUNTER_LONG;
        out.v.i = (int64_t)json_integer_value(cur);
    } else {
        out.tag = CVF_COUNTER_FLOAT;
        out.v.f = json_real_value(cur);
    }
    return out;
}

static int write_counter(conv *c, cvf_writer *w, group *g)
{
    ctr_item *it = g->items;
    qsort(it, g->n, sizeof *it, ctr_cmp);
    for (size_t i = 1; i < g->n; i++)
        if (it[i].ts == it[i - 1].ts)
            return ev_fail(c, it[i].index, "counter \"%.60s\" has two events at ts %.17g "
                                           "(the .cvf format keeps one per timestamp)",
                           g->name, it[i].ts);
    const char **keys = NULL;
    size_t nkeys = 0;
    int rc = -1;
    int64_t *ts = malloc((g->n ? g->n : 1) * sizeof *ts);
    json_t **cache = NULL;
    cvf_counter_value *vals = NULL;
    if (!ts || counter_keys(g, &keys, &nkeys, ts) < 0)
        goto out;
    cache = calloc(nkeys ? nkeys : 1, sizeof *cache); /* NULL = never seen */
    vals = malloc((g->n * nkeys > 0 ? g->n * nkeys : 1) * sizeof *vals);
    if (!cache || !vals)
        goto out;
    for (size_t i = 0; i < g->n; i++)
        for (size_t k = 0; k < nkeys; k++)
            vals[i * nkeys + k] = counter_value(json_object_get(it[i].args, keys[k]), &cache[k]);
    rc = cvf_write_counter_group(w, g->pid, g->tid, g->name, keys, nkeys, ts, g->n, vals);
out:
    if (rc != 0 && !c->err->msg[0])
        oom(c);
    free(keys);
    free(ts);
    free(cache);
    free(vals);
    return rc;
}

static void progress(conv *c, size_t done)
{
    if (c->cc && c->cc->progress)
        c->cc->progress(c->cc->progress_ctx, done, c->total);
}

static int write_all(conv *c, int fd)
{
    cvf_writer *w = cvf_writer_new(cvf_sink_fd, (void *)(intptr_t)fd);
    if (!w)
        return oom(c);
    int rc = -1;
    cvf_fee_event *evbuf = NULL;
    size_t evcap = 0;
    jtext list = {0};
    for (int kind = 0; kind < 2; kind++)
        for (size_t i = 0; i < c->names.n; i++) {
            group *g = &c->names.v[i];
            if (g->tag != kind)
                continue;
            if ((kind == 0 ? cvf_write_process_name : cvf_write_thread_name)(w, g->pid, g->tid,
                                                                             g->value))
                goto werr;
        }
    for (size_t i = 0; i < c->fee.n; i++) {
        if (write_fee(c, w, &c->fee.v[i], &evbuf, &evcap, &list) != 0) {
            if (c->err->msg[0])
                goto out;
            goto werr;
        }
        if ((i & 255) == 0)
            progress(c, c->total / 2 + c->total / 2 * i / c->fee.n);
    }
    for (size_t i = 0; i < c->ctrs.n; i++)
        if (write_counter(c, w, &c->ctrs.v[i]) != 0) {
            if (c->err->msg[0])
                goto out;
            goto werr;
        }
    if (c->nother ? jtext_put(&c->other, "]", 1) : jtext_put(&c->other, "[]", 2)) {
        oom(c);
        goto out;
    }
    if (cvf_write_other_events(w, c->other.data, c->other.len))
        goto werr;
    if (c->file_info) {
        list.len = 0;
        if (jtext_value(&list, c->file_info)) {
            oom(c);
            goto out;
        }
        if (cvf_write_file_info(w, list.data, list.len))
            goto werr;
    }
    if (cvf_writer_finish(w))
        goto werr;
    rc = 0;
    goto out;
werr:
    snprintf(c->err->msg, sizeof c->err->msg, "%s", cvf_writer_error(w)->msg);
out:
    free(evbuf);
    free(list.data);
    cvf_writer_free(w);
    return rc;
}

/* ---- fast path for plain "X" events ------------------------------------------------------
 * Most of a trace is "X" events of one shape: {"pid": int, "tid": int, "ts": num, "dur": num,
 * "name": "plain string", "ph": "X", "cat": ..., "args": {...}?}.  Parsing each into a jansson
 * tree costs ~85% of the conversion, so such events are read here directly from the text:
 * every value is still fully validated (cvf_json_skip: strict JSON, UTF-8), args are copied
 * as text with the whitespace outside strings dropped.  Anything unusual (escapes in the name
 * or keys, non-integer pid, a different ph, numbers jansson would reject) returns "not
 * handled" and the event goes through jansson, which also produces the error messages. */

enum { FAST_NOT_HANDLED = 0, FAST_DONE = 1, FAST_ERROR = -1 };

static size_t skip_ws(const char *s, size_t i, size_t len)
{
    while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* What a plain "X" event's fields said so far. */
typedef struct fast_x {
    const char *name;
    size_t name_len, args_a, args_b;
    bool is_x, have_pid, have_tid, have_ts, have_dur, have_args;
    uint64_t pid, tid;
    double ts, dur;
} fast_x;

/* An integer field (pid, tid) at t[va .. vb): false when it is not an int64 literal for
 * sure (jansson judges it then, with a message). */
static bool fast_int(const char *t, size_t va, size_t vb, uint64_t *out)
{
    if (memchr(t + va, '.', vb - va) || memchr(t + va, 'e', vb - va) ||
        memchr(t + va, 'E', vb - va) || vb - va > 19)
        return false;
    char buf[24];
    memcpy(buf, t + va, vb - va);
    buf[vb - va] = 0;
    errno = 0;
    *out = (uint64_t)strtoll(buf, NULL, 10);
    return errno == 0; /* beyond int64: jansson rejects it, with a message */
}

/* A real field (ts, dur): false when jansson should judge it (an overflowing real). */
static bool fast_real(const char *t, size_t va, size_t vb, double *out)
{
    if (vb - va > 60)
        return false;
    char buf[64];
    memcpy(buf, t + va, vb - va);
    buf[vb - va] = 0;
    *out = strtod(buf, NULL);
    return isfinite(*out);
}

/* One "key": value (t[va .. vb), validated) of a plain X event into x; false: not handled. */
static bool fast_field(fast_x *x, const char *t, size_t len, const char *key, size_t klen,
                       size_t va, size_t vb)
{
    size_t e;
    bool is_str = t[va] == '"';
    bool is_num = t[va] == '-' || (t[va] >= '0' && t[va] <= '9');
    if (klen == 2 && !memcmp(key, "ph", 2)) {
        x->is_x = is_str && vb - va >= 3 && t[va + 1] == 'X' && plain_string(t, len, va, &e);
        return x->is_x;
    }
    if (klen == 4 && !memcmp(key, "name", 4)) {
        x->name = t + va + 1;
        x->name_len = vb - va - 2;
        return is_str && plain_string(t, len, va, &e);
    }
    if (klen == 3 && (!memcmp(key, "pid", 3) || !memcmp(key, "tid", 3))) {
        bool *have = key[0] == 'p' ? &x->have_pid : &x->have_tid;
        return (*have = is_num && fast_int(t, va, vb, key[0] == 'p' ? &x->pid : &x->tid));
    }
    if ((klen == 2 && !memcmp(key, "ts", 2)) || (klen == 3 && !memcmp(key, "dur", 3))) {
        bool *have = key[0] == 't' ? &x->have_ts : &x->have_dur;
        return (*have = is_num && fast_real(t, va, vb, key[0] == 't' ? &x->ts : &x->dur));
    }
    if (klen == 4 && !memcmp(key, "args", 4)) {
        x->have_args = true;
        x->args_a = va;
        x->args_b = vb;
    } /* other keys (cat, id, sf, ...): validated by cvf_json_skip, dropped like the
         reference drops them */
    return true;
}

static int fast_x_event(conv *c, const char *t, size_t len, size_t *pos)
{
    size_t i = *pos + 1; /* t[*pos] == '{' */
    fast_x x = {0};
    for (;;) {
        size_t ka = skip_ws(t, i, len), kb, va, vb;
        if (ka >= len || t[ka] != '"' || !plain_string(t, len, ka, &kb))
            return FAST_NOT_HANDLED;
        i = skip_ws(t, kb, len);
        if (i >= len || t[i] != ':')
            return FAST_NOT_HANDLED;
        va = skip_ws(t, i + 1, len);
        if (cvf_json_skip(t, len, va, &vb) != 0 ||
            !fast_field(&x, t, len, t + ka + 1, kb - ka - 2, va, vb))
            return FAST_NOT_HANDLED;
        i = skip_ws(t, vb, len);
        if (i < len && t[i] == ',') {
            i++;
            continue;
        }
        if (i < len && t[i] == '}') {
            i++;
            break;
        }
        return FAST_NOT_HANDLED;
    }
    if (!x.is_x || !x.name || !x.have_pid || !x.have_tid || !x.have_ts || !x.have_dur)
        return FAST_NOT_HANDLED;
    if (push_fee(c, x.pid, x.tid, x.name, x.name_len, x.ts, x.dur, NULL,
                 x.have_args ? t + x.args_a : NULL, x.args_b - x.args_a) != 0)
        return FAST_ERROR;
    *pos = i;
    return FAST_DONE;
}

/* ---- the input walk ---------------------------------------------------------------------- */


/* Grows *buf so that `need` more bytes fit after *o.  0, or -1 (then *buf is freed). */
static int reserve(char **buf, size_t *cap, size_t o, size_t need)
{
    if (o + need <= *cap)
        return 0;
    size_t nc = *cap * 2 + need;
    char *bigger = realloc(*buf, nc);
    if (!bigger) {
        free(*buf);
        *buf = NULL;
        return -1;
    }
    *buf = bigger;
    *cap = nc;
    return 0;
}

/* The value at json[pos .. end) again, with every integer literal beyond int64 (outside
 * strings) turned into the string BIGINT_MARK + its digits.  NULL on allocation failure. */
static char *mark_bigints(const char *json, size_t pos, size_t end, size_t *outlen)
{
    static const char open_mark[] = "\"\\u0001bigint:"; /* BIGINT_MARK as JSON text */
    size_t cap = end - pos + 64, o = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    for (size_t i = pos; i < end;) {
        size_t j = i + 1;
        bool big = false;
        if (json[i] == '"') { /* a string: copied as is */
            while (j < end && json[j] != '"')
                j += json[j] == '\\' ? 2 : 1;
            j = j < end ? j + 1 : end;
        } else if (json[i] == '-' || (json[i] >= '0' && json[i] <= '9')) {
            j = i + (json[i] == '-');
            while (j < end && json[j] >= '0' && json[j] <= '9')
                j++;
            if (j == end || (json[j] != '.' && json[j] != 'e' && json[j] != 'E')) {
                char buf[32];
                if (j - i >= sizeof buf) {
                    big = true;
                } else {
                    memcpy(buf, json + i, j - i);
                    buf[j - i] = 0;
                    errno = 0;
                    (void)strtoll(buf, NULL, 10);
                    big = errno == ERANGE;
                }
            } else { /* a fraction or exponent: the whole number is copied as is */
                while (j < end && strchr("0123456789.eE+-", json[j]))
                    j++;
            }
        }
        if (reserve(&out, &cap, o, (j - i) + sizeof open_mark + 1) < 0)
            return NULL;
        if (big) {
            memcpy(out + o, open_mark, sizeof open_mark - 1);
            o += sizeof open_mark - 1;
        }
        memcpy(out + o, json + i, j - i);
        o += j - i;
        if (big)
            out[o++] = '"';
        i = j;
    }
    *outlen = o;
    return out;
}

/* Parses one JSON value at json[*pos]; advances *pos past it.  Sets c->bigint when it had
 * integers beyond int64, now BIGINT_MARK strings. */
static json_t *parse_at(conv *c, const char *json, size_t len, size_t *pos, const char *what)
{
    json_error_t je;
    c->bigint = false;
    json_t *v = json_loadb(json + *pos, len - *pos, JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK,
                           &je);
    size_t end;
    if (!v && strstr(je.text, "too big") && cvf_json_skip(json, len, *pos, &end) == 0) {
        size_t mlen;
        char *marked = mark_bigints(json, *pos, end, &mlen);
        if (!marked) {
            oom(c);
            return NULL;
        }
        json_error_t je2;
        v = json_loadb(marked, mlen, JSON_DECODE_ANY, &je2);
        free(marked);
        if (v) {
            c->bigint = true;
            *pos = end;
            return v;
        }
    }
    if (!v) {
        snprintf(c->err->msg, sizeof c->err->msg, "invalid JSON in %s at byte %zu: %s", what,
                 *pos + (size_t)(je.position > 0 ? je.position : 0), je.text);
        c->err->offset = *pos + (size_t)(je.position > 0 ? je.position : 0);
        return NULL;
    }
    *pos += (size_t)je.position;
    return v;
}

static int syntax(conv *c, size_t pos, const char *what)
{
    snprintf(c->err->msg, sizeof c->err->msg, "invalid JSON at byte %zu: %s", pos, what);
    c->err->offset = pos;
    return -1;
}

/* Drops the pages of a mapped input that the walk has passed (never read again: every event
 * keeps copies of what it needs), so that a 600 MB JSON does not stay resident. */
static void release_read(conv *c, const char *json, size_t upto)
{
    if (!c->cc || !c->cc->input_is_mapping)
        return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t base = (uintptr_t)json, end = ((uintptr_t)json + upto) & ~(uintptr_t)(page - 1);
    if (base % page == 0 && end > base + c->released)
        if (madvise((void *)(base + c->released), end - base - c->released, MADV_DONTNEED) == 0)
            c->released = end - base;
}

/* The list of events starting at json[*pos] == '['. */
static int walk_events(conv *c, const char *json, size_t len, size_t *pos, size_t *index)
{
    size_t i = skip_ws(json, *pos + 1, len);
    if (i < len && json[i] == ']') {
        *pos = i + 1;
        return 0;
    }
    for (;;) {
        int fast = i < len && json[i] == '{' ? fast_x_event(c, json, len, &i) : FAST_NOT_HANDLED;
        if (fast == FAST_ERROR)
            return -1;
        if (fast == FAST_NOT_HANDLED) {
            char what[64];
            snprintf(what, sizeof what, "event #%zu", *index);
            json_t *ev = parse_at(c, json, len, &i, what);
            if (!ev)
                return -1;
            int rc = add_event(c, *index, ev);
            json_decref(ev);
            if (rc)
                return -1;
        }
        (*index)++;
        if ((*index & 4095) == 0) {
            progress(c, i / 2);
            release_read(c, json, i);
        }
        i = skip_ws(json, i, len);
        if (i >= len)
            return syntax(c, i, "unexpected end inside the event list");
        if (json[i] == ']') {
            *pos = i + 1;
            return 0;
        }
        if (json[i] != ',')
            return syntax(c, i, "expected ',' or ']' after an event");
        i = skip_ws(json, i + 1, len);
    }
}

static int walk(conv *c, const char *json, size_t len)
{
    size_t i = skip_ws(json, 0, len), index = 0;
    if (i + 3 <= len && !memcmp(json + i, "\xEF\xBB\xBF", 3)) /* UTF-8 byte order mark */
        i = skip_ws(json, i + 3, len);
    if (i >= len)
        return syntax(c, i, "empty input");
    if (json[i] == '[') {
        if (walk_events(c, json, len, &i, &index))
            return -1;
        c->have_events = true;
    } else if (json[i] == '{') {
        i = skip_ws(json, i + 1, len);
        if (i < len && json[i] == '}')
            i++;
        else
            for (;;) {
                if (i >= len || json[i] != '"')
                    return syntax(c, i, "expected a key string");
                json_t *key = parse_at(c, json, len, &i, "a top-level key");
                if (!key)
                    return -1;
                char kname[16] = "";
                if (json_string_length(key) < sizeof kname)
                    memcpy(kname, json_string_value(key), json_string_length(key) + 1);
                json_decref(key);
                i = skip_ws(json, i, len);
                if (i >= len || json[i] != ':')
                    return syntax(c, i, "expected ':' after a key");
                i = skip_ws(json, i + 1, len);
                if (!strcmp(kname, "traceEvents")) {
                    if (c->have_events)
                        return syntax(c, i, "\"traceEvents\" appears twice");
                    if (i >= len || json[i] != '[')
                        return syntax(c, i, "\"traceEvents\" must be a list");
                    if (walk_events(c, json, len, &i, &index))
                        return -1;
                    c->have_events = true;
                } else {
                    json_t *v = parse_at(c, json, len, &i, kname[0] ? kname : "a value");
                    if (!v)
                        return -1;
                    if (!strcmp(kname, "file_info")) {
                        json_decref(c->file_info); /* like Python: a repeated key: last wins */
                        c->file_info = v;
                    } else
                        json_decref(v); /* viztracer_metadata, displayTimeUnit, ...: dropped
                                           as by the reference */
                }
                i = skip_ws(json, i, len);
                if (i < len && json[i] == ',') {
                    i = skip_ws(json, i + 1, len);
                    continue;
                }
                if (i < len && json[i] == '}') {
                    i++;
                    break;
                }
                return syntax(c, i, "expected ',' or '}' in the top-level object");
            }
        if (!c->have_events) {
            snprintf(c->err->msg, sizeof c->err->msg,
                     "no \"traceEvents\" list in the top-level object (not a Chrome trace)");
            return -1;
        }
    } else
        return syntax(c, i, "expected '{' or '[' (not a Chrome trace JSON file)");
    i = skip_ws(json, i, len);
    if (i != len)
        return syntax(c, i, "trailing data after the JSON value");
    return 0;
}

int convert_json_to_cvf(const char *json, size_t len, int out_fd, const convert_ctx *cc,
                        cvf_error *err)
{
    conv c;
    memset(&c, 0, sizeof c);
    c.err = err;
    c.cc = cc;
    c.total = len;
    err->msg[0] = 0;
    err->offset = 0;
    int rc = walk(&c, json, len);
    if (rc == 0)
        rc = write_all(&c, out_fd);
    /* one line: jansson quotes the input near an error, names may hold control characters */
    for (char *m = err->msg; *m; m++)
        if ((unsigned char)*m < 0x20)
            *m = ' ';
    set_free(&c.fee, false);
    set_free(&c.names, false);
    set_free(&c.ctrs, true);
    free(c.args.data);
    free(c.other.data);
    json_decref(c.file_info);
    return rc;
}
