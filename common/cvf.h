/* cvf.h — VizTracer's compressed trace format ("vcompressor" v1), both directions.
 *
 * Owns the byte format described in docs/cvf-format.md.  Two halves:
 *   - a streaming writer (cvf_writer.c) used by the agent inside the target and by
 *     `vcattach convert`; it needs only zlib and never builds a JSON tree;
 *   - a bounded reader (cvf_reader.c) that checks every length, count, offset and string
 *     against the bytes really present and reports the byte offset of the first problem.
 *
 * Units: FEE timestamps and durations are "ticks" of 10 ns (µs × 100), as in the format.
 * Our writers round to that grid (the reference truncates) and never write a negative dur.
 * Everything here is host-endian like the reference; only little-endian hosts are supported.
 */
#ifndef VC_CVF_H
#define VC_CVF_H

#include <stddef.h>
#include <stdint.h>

#define CVF_VERSION 1
/* VizTracer's reader cuts strings at 511 bytes and then misparses the rest (quirk Q7): our
 * writer cuts names to this many bytes, at a UTF-8 character boundary. */
#define CVF_NAME_MAX 511

enum cvf_header {
    CVF_REC_FEE = 0x01,
    CVF_REC_PROCESS_NAME = 0x02,
    CVF_REC_THREAD_NAME = 0x03,
    CVF_REC_COUNTER_EVENTS = 0x04,
    CVF_REC_OTHER_EVENTS = 0x05,
    CVF_REC_FILE_INFO = 0x11,
};

enum cvf_counter_tag {
    CVF_COUNTER_UNKNOWN = 0x21,     /* key absent at this ts */
    CVF_COUNTER_SAME = 0x22,        /* unchanged since the previous ts (or never seen) */
    CVF_COUNTER_LONG = 0x23,        /* i64 payload */
    CVF_COUNTER_FLOAT = 0x24,       /* f64 payload */
    CVF_COUNTER_LONG_STRING = 0x25, /* cstr payload: decimal repr of an int outside int64 */
};

/* One complete ("X") event of an FEE group, in ticks of 10 ns. */
typedef struct cvf_fee_event {
    int64_t ts;
    uint64_t dur;
} cvf_fee_event;

/* Error report shared by the writer and the reader. */
typedef struct cvf_error {
    uint64_t offset;  /* byte offset in the .cvf where the problem was found (reader) */
    char msg[256];    /* one line, no trailing newline */
} cvf_error;

/* µs (Chrome trace units) → ticks, rounded to nearest. */
int64_t cvf_us_to_ticks(double us);
/* Duration µs → ticks, rounded, negative and NaN clamped to 0. */
uint64_t cvf_dur_us_to_ticks(double us);

/* Sorts a group's events by (ts, dur) in place, the order the format requires. */
void cvf_fee_sort(cvf_fee_event *events, size_t n);

/* ---- streaming writer ------------------------------------------------------------------- */

/* Where the bytes go.  Returns 0 on success, -1 on failure (errno set).  Must write all. */
typedef int (*cvf_sink_fn)(void *ctx, const void *data, size_t len);

typedef struct cvf_writer cvf_writer;

/* Creates a writer that emits to `sink`.  The version word is written with the first record.
 * Returns NULL on allocation failure. */
cvf_writer *cvf_writer_new(cvf_sink_fn sink, void *sink_ctx);
/* Convenience sink: an fd (handles short writes and EINTR).  Pass (void*)(intptr_t)fd. */
int cvf_sink_fd(void *ctx, const void *data, size_t len);

/* Records must come in the reference's order, which every reader accepts:
 *   names (process and thread) → FEE groups → counter groups → other events → file_info.
 * A call out of that order fails with an error, writing nothing. */
int cvf_write_process_name(cvf_writer *w, uint64_t pid, uint64_t tid, const char *name);
int cvf_write_thread_name(cvf_writer *w, uint64_t pid, uint64_t tid, const char *name);

/* One FEE group: every event of (pid, tid, name, has_args).  `events` must be sorted by
 * (ts, dur) (cvf_fee_sort) and n >= 1.  `args_json`, if not NULL, is a JSON list of exactly n
 * args objects in the same order (length args_len); it is stored as a zblob. */
int cvf_write_fee_group(cvf_writer *w, uint64_t pid, uint64_t tid, const char *name,
                        const cvf_fee_event *events, size_t n,
                        const char *args_json, size_t args_len);

/* One counter group.  keys[nkeys] in first-appearance order; ts_ns[nts] ascending;
 * values[nts * nkeys] row-major, already diffed (SAME / UNKNOWN where applicable). */
typedef struct cvf_counter_value {
    uint8_t tag; /* enum cvf_counter_tag */
    union {
        int64_t i;
        double f;
        const char *s; /* LONG_STRING */
    } v;
} cvf_counter_value;
int cvf_write_counter_group(cvf_writer *w, uint64_t pid, uint64_t tid, const char *name,
                            const char *const *keys, size_t nkeys,
                            const int64_t *ts_ns, size_t nts, const cvf_counter_value *values);

/* The single OTHER_EVENTS record: a JSON list (text).  If never called, cvf_writer_finish
 * writes an empty list, since the reference always has exactly one. */
int cvf_write_other_events(cvf_writer *w, const char *json_list, size_t len);
/* Optional FILE_INFO record (any JSON value), after the other events. */
int cvf_write_file_info(cvf_writer *w, const char *json, size_t len);

/* Writes what is still owed (version, empty other events), flushes.  0 or -1. */
int cvf_writer_finish(cvf_writer *w);
/* Bytes handed to the sink so far (after finish: the file size). */
uint64_t cvf_writer_bytes(const cvf_writer *w);
/* The last error of this writer (valid after a call returned -1). */
const cvf_error *cvf_writer_error(const cvf_writer *w);
void cvf_writer_free(cvf_writer *w);

/* ---- bounded reader: declared in cvf_reader.h by the codec (see common/cvf_reader.h) ----- */

#endif /* VC_CVF_H */
