/* test_spool_budgets.c — every budget of what one agent may make root's vcattach hold
 * (common/spool_impl.h, SECURITY.md "Budgets"), fed to a real spool as an agent's frames:
 * names (cut, repaired, 16 MiB in all, kept on disk as in memory), thread slots, lanes, drop
 * ranges, CPU samples, task marks, the file's cap, and the instants a build formats. */
#include "cvf_test.h"
#include "monotonic.h"
#include "protocol.h"
#include "spool_impl.h"

#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/vc-spool-budgets-XXXXXX";

static struct spool *new_spool(const char *name)
{
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct spool *sp = NULL;
    if (spool_create(&sp, path, 42, err, sizeof err) != 0)
        fprintf(stderr, "spool_create: %s\n", err);
    return sp;
}

static int add(struct spool *sp, uint32_t type, const void *p, size_t len)
{
    char err[512];
    int rc = spool_add(sp, type, p, len, err, sizeof err);
    if (rc != 0 && getenv("VERBOSE"))
        fprintf(stderr, "spool_add: %d %s\n", rc, err);
    return rc;
}

/* A CHUNK of owner's records from recs[0 .. n). */
static int chunk(struct spool *sp, uint32_t owner, const struct vc_wire_record *recs, uint32_t n)
{
    size_t len = 8 + (size_t)n * sizeof *recs;
    unsigned char *p = malloc(len);
    memcpy(p, &owner, 4);
    memcpy(p + 4, &n, 4);
    memcpy(p + 8, recs, (size_t)n * sizeof *recs);
    int rc = add(sp, VC_MSG_CHUNK, p, len);
    free(p);
    return rc;
}

static void test_names(void)
{
    struct spool *sp = new_spool("names.spool");
    /* 1500 names of 200 KB, five to a frame: each is cut to what a .cvf keeps */
    size_t big = 200000, flen = 5 * (8 + big);
    unsigned char *frame = malloc(flen);
    for (uint32_t f = 0; f < 300; f++) {
        for (uint32_t k = 0; k < 5; k++) {
            uint32_t head[2] = {5 * f + k, (uint32_t)big};
            memcpy(frame + k * (8 + big), head, 8);
            memset(frame + k * (8 + big) + 8, 'A' + (int)k, big);
        }
        CHECK(add(sp, VC_MSG_NAMES, frame, flen) == 0);
    }
    free(frame);
    CHECK(sp->names[7] != NULL && strlen(sp->names[7]) == CVF_NAME_MAX);
    CHECK(sp->name_bytes == 1500u * (CVF_NAME_MAX + 1));
    /* on disk as in memory: the 300 MB that came are ~780 KB in the file */
    CHECK(sp->file_bytes < 1500u * (CVF_NAME_MAX + 16) + 300u * 8 + 64);

    /* not UTF-8, a NUL inside: repaired, cut at the NUL */
    unsigned char odd[8 + 7] = {0};
    uint32_t head[2] = {2000, 7};
    memcpy(odd, head, 8);
    memcpy(odd + 8, "\xff\xfe" "ab\0cd", 7);
    CHECK(add(sp, VC_MSG_NAMES, odd, sizeof odd) == 0);
    CHECK(sp->names[2000] != NULL && strcmp(sp->names[2000], "??ab") == 0);

    /* past 16 MiB of names: refused, counted, nothing more held */
    unsigned char one[8 + 500];
    memset(one + 8, 'n', 500);
    for (uint32_t id = 3000; id < 3000 + 40000; id++) {
        uint32_t h[2] = {id, 500};
        memcpy(one, h, 8);
        add(sp, VC_MSG_NAMES, one, sizeof one);
    }
    CHECK(sp->names_refused > 0);
    CHECK(sp->name_bytes <= SPOOL_NAMES_MAX);
    /* a name replaced gives its bytes back */
    uint64_t before = sp->name_bytes;
    uint32_t h7[2] = {7, 1};
    unsigned char short_name[9];
    memcpy(short_name, h7, 8);
    short_name[8] = 'x';
    CHECK(add(sp, VC_MSG_NAMES, short_name, 9) == 0);
    CHECK(sp->name_bytes == before - CVF_NAME_MAX + 1);

    /* META: the process name cut and repaired the same way */
    unsigned char meta[8 + 3];
    uint64_t pid = UINT64_MAX;
    memcpy(meta, &pid, 8);
    memcpy(meta + 8, "p\xc3", 3);
    CHECK(add(sp, VC_MSG_META, meta, sizeof meta) == 0);
    CHECK(sp->process_name != NULL && strcmp(sp->process_name, "p?") == 0);
    spool_close(sp, 1);
}

static void test_threads_and_lanes(void)
{
    struct spool *sp = new_spool("lanes.spool");
    unsigned char th[16 + 1];
    uint32_t head[4] = {SPOOL_MAX_OWNERS, 7, 1, 0};
    memcpy(th, head, 16);
    th[16] = 't';
    CHECK(add(sp, VC_MSG_THREADS, th, sizeof th) == -1); /* an impossible thread slot */
    head[0] = SPOOL_MAX_OWNERS - 1;
    memcpy(th, head, 16);
    CHECK(add(sp, VC_MSG_THREADS, th, sizeof th) == 0);

    /* one record for each of 2^20 keys: 2^20 lanes; the next key ends the trace (-2) */
    uint32_t per = (VC_MSG_MAX - 8) / sizeof(struct vc_wire_record);
    struct vc_wire_record *recs = calloc(per, sizeof *recs);
    uint32_t id = 0;
    int rc = 0;
    while (rc == 0 && id < SPOOL_MAX_LANES) {
        uint32_t n = SPOOL_MAX_LANES - id < per ? SPOOL_MAX_LANES - id : per;
        for (uint32_t k = 0; k < n; k++)
            recs[k] = (struct vc_wire_record){1000 + id + k, 1, id + k, 0};
        rc = chunk(sp, 0, recs, n);
        id += n;
    }
    CHECK(rc == 0 && sp->nlanes == SPOOL_MAX_LANES);
    /* the lane buffers stay within the memory bound: flushed by their size, not only by time */
    CHECK(sp->mem_bytes <= sp->mem_max + (uint64_t)per * 256);
    recs[0] = (struct vc_wire_record){5, 1, SPOOL_MAX_LANES, 0};
    CHECK(chunk(sp, 0, recs, 1) == -2);
    free(recs);
    spool_close(sp, 1);
}

static void test_counted_caps(void)
{
    struct spool *sp = new_spool("caps.spool");
    uint32_t per = (VC_MSG_MAX - 8) / sizeof(struct vc_wire_record);
    struct vc_wire_record *recs = calloc(per, sizeof *recs);
    /* drop ranges, CPU samples, task steps: kept up to their caps, the rest counted */
    struct {
        uint32_t id;
        size_t cap;
    } kinds[] = {{VC_WIRE_DROPPED, SPOOL_MAX_DROPS},
                 {VC_WIRE_CPU, SPOOL_MAX_CPU},
                 {VC_WIRE_TASK, SPOOL_MAX_TASK_STEPS}};
    for (size_t k = 0; k < 3; k++) {
        size_t sent = 0, want = kinds[k].cap + 5;
        while (sent < want) {
            uint32_t n = want - sent < per ? (uint32_t)(want - sent) : per;
            for (uint32_t i = 0; i < n; i++)
                recs[i] = (struct vc_wire_record){sent + i, 1 + (sent + i) % 1000, kinds[k].id,
                                                  kinds[k].id == VC_WIRE_DROPPED ? 3 : 0};
            CHECK(chunk(sp, 0, recs, n) == 0);
            sent += n;
        }
    }
    CHECK(sp->ndrops == SPOOL_MAX_DROPS && sp->dropped == 3u * (SPOOL_MAX_DROPS + 5));
    CHECK(sp->ncpu == SPOOL_MAX_CPU && sp->cpu_lost == 5);
    CHECK(sp->nsteps == SPOOL_MAX_TASK_STEPS && sp->tasks_lost == 5);
    free(recs);
    spool_close(sp, 1);
}

static void test_file_cap(void)
{
    struct spool *sp = new_spool("cap.spool");
    spool_set_limit(sp, 4096);
    unsigned char ev[8192];
    memset(ev, ' ', sizeof ev);
    ev[0] = '[';
    ev[sizeof ev - 1] = ']';
    CHECK(add(sp, VC_MSG_EVENTS, ev, sizeof ev) == -2);
    CHECK(spool_at_limit(sp));
    struct stat st;
    CHECK(stat(spool_path(sp), &st) == 0 && (uint64_t)st.st_size <= 4096);
    spool_close(sp, 1);
}

static int null_sink(void *ctx, const void *p, size_t n)
{
    (void)p;
    *(size_t *)ctx += n;
    return 0;
}

/* The instants a build formats: past SPOOL_INSTANTS_MAX, refused whole and counted.  2^21
 * tasks with 48-byte names of control characters (~300 bytes each): ~600 MiB of instants
 * wanted.  Heavy (seconds, ~0.5 GiB): not under the sanitizers, whose job the other checks do. */
static void test_instants_cap(void)
{
#if !defined(__SANITIZE_ADDRESS__)
    struct spool *sp = new_spool("instants.spool");
    unsigned char th[16 + 1];
    uint32_t head[4] = {0, 7, 1, 0};
    memcpy(th, head, 16);
    th[16] = 't';
    CHECK(add(sp, VC_MSG_THREADS, th, sizeof th) == 0);
    uint32_t per = (VC_MSG_MAX - 8) / sizeof(struct vc_wire_record) / 4 * 4;
    struct vc_wire_record *recs = calloc(per, sizeof *recs);
    recs[0] = (struct vc_wire_record){1, 1, 0, 0}; /* a call: the thread has a track */
    CHECK(chunk(sp, 0, recs, 1) == 0);
    uint32_t task = 1;
    while (task <= SPOOL_MAX_TASK_STEPS) {
        uint32_t n = 0;
        for (; n + 4 <= per && task <= SPOOL_MAX_TASK_STEPS; task++) {
            recs[n++] = (struct vc_wire_record){10 + task, task, VC_WIRE_TASK, 0};
            for (uint32_t part = 0; part < 3; part++) {
                struct vc_wire_record r = {0, 0, VC_WIRE_TASK_NAME_0 - part, task};
                memset(&r.start, 1, 8);
                memset(&r.dur, 1, 8);
                recs[n++] = r;
            }
        }
        CHECK(chunk(sp, 0, recs, n) == 0);
    }
    free(recs);
    size_t written = 0;
    struct spool_stats st;
    char err[512];
    CHECK(spool_build(sp, null_sink, &written, &st, err, sizeof err) == 0);
    CHECK(st.instants_refused > 0 && st.tasks > 0 && st.tasks + st.instants_refused >= SPOOL_MAX_TASK_STEPS);
    char line[512];
    CHECK(spool_refusals(&st, line, sizeof line) == 1 && strstr(line, "instants refused"));
    spool_close(sp, 1);
#endif
}

int main(void)
{
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    void (*tests[])(void) = {test_names, test_threads_and_lanes, test_counted_caps,
                             test_file_cap, test_instants_cap};
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int64_t t0 = vc_monotonic_ms();
        tests[i]();
        if (getenv("VERBOSE"))
            fprintf(stderr, "test %zu: %lld ms\n", i, (long long)(vc_monotonic_ms() - t0));
    }
    rmdir(dir);
    (void)membuf_sink;
    (void)null_sink;
    return test_summary("test_spool_budgets");
}
