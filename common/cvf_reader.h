/* cvf_reader.h — the bounded .cvf reader: walks a whole file held in memory and hands each
 * record to the caller's callbacks, already decoded.
 *
 * Used by `vcattach convert` (cvf → Chrome JSON, speedscope, collapsed stacks), by
 * `vcattach summary`, and by the codec tests.  Depends on zlib only (no JSON library): the
 * JSON parts of the format (FEE args, other events, file_info) are inflated, checked to be
 * valid JSON with a built-in scanner, and given to the caller as text plus the spans of the
 * list's elements, so a consumer can splice them into its output without parsing them again.
 *
 * Safety contract: every length, count, offset and string is checked against the bytes really
 * present before use; allocations are bounded by what the file size can justify (zlib blobs by
 * ~1032:1); a malformed file gives -1 and a cvf_error naming the byte offset and the problem,
 * e.g. "offset 1234: FEE count 9999999 exceeds the 40 bytes left".  Unknown header bytes and a
 * wrong version are errors (the reference skips the former with a printf).  Never crashes,
 * hangs, or silently skips data.
 *
 * cvf_read keeps no global state: concurrent walks of different (or the same read-only)
 * buffers are safe.
 *
 * Typical use:
 *
 *     static int on_fee(void *ctx, const cvf_fee_group *g) {
 *         for (size_t i = 0; i < g->count; i++)
 *             use(g->name, g->ts[i], g->dur[i]);      // ticks of 10 ns; µs = ticks / 100
 *         return 0;                                    // nonzero stops the walk
 *     }
 *     cvf_visitor v = { .fee_group = on_fee };         // NULL callbacks are skipped
 *     void *data; size_t size; cvf_error err;
 *     if (cvf_map_file(path, &data, &size, &err) != 0 ||
 *         cvf_read(data, size, &v, ctx, 0, &err) != 0)
 *         fprintf(stderr, "%s: %s\n", path, err.msg);  // err.msg already names the offset
 *     cvf_unmap_file(data, size);
 */
#ifndef VC_CVF_READER_H
#define VC_CVF_READER_H

#include <stddef.h>
#include <stdint.h>

#include "cvf.h"
#include "json_scan.h" /* cvf_span: the records point into their JSON text */


/* One FEE record (0x01): `count` complete ("X") events of one (pid, tid, name, has_args).
 * Everything points into memory owned by the reader and is valid only during the callback. */
typedef struct cvf_fee_group {
    uint64_t offset;      /* file offset of the record's header byte */
    uint64_t pid, tid;    /* as stored (pid -1 is 18446744073709551615, like the reference) */
    const char *name;     /* NUL-terminated, valid UTF-8 */
    size_t count;         /* >= 1 */
    const int64_t *ts;    /* count timestamps, ticks of 10 ns, ascending */
    const uint64_t *dur;  /* count durations, ticks */
    int has_args;         /* the record carries an args zblob */
    /* The args list: NUL-terminated JSON text of a list of exactly `count` values, and the
     * span of each element (args[i] belongs to event i).  NULL when !has_args, or when the
     * walk was started with CVF_READ_SKIP_JSON. */
    const char *args_json;
    size_t args_len;
    const cvf_span *args;
} cvf_fee_group;

/* One counter record (0x04), with SAME/UNKNOWN already resolved the way the reference
 * decodes them: values[i * nkeys + k] is the value of keys[k] at ts_ns[i]; its tag is
 * CVF_COUNTER_LONG (v.i), CVF_COUNTER_FLOAT (v.f), CVF_COUNTER_LONG_STRING (v.s: decimal
 * digits of an integer outside int64), or CVF_COUNTER_UNKNOWN: the key is absent from that
 * event's args. */
typedef struct cvf_counter_group {
    uint64_t offset;
    uint64_t pid, tid;
    const char *name;
    size_t nkeys;
    const char *const *keys;
    size_t nts;
    const int64_t *ts_ns; /* nanoseconds (µs = ts_ns / 1000) */
    const cvf_counter_value *values;
} cvf_counter_group;

/* A JSON record: OTHER_EVENTS (0x05, a list; items[] are its elements) or FILE_INFO (0x11,
 * any value; items NULL).  `json` is NUL-terminated and valid JSON (Python's NaN/Infinity
 * tokens are accepted, as the reference's json.loads does). */
typedef struct cvf_json_record {
    uint64_t offset;
    const char *json;
    size_t len;
    const cvf_span *items;
    size_t nitems;
} cvf_json_record;

/* Callbacks, called in file order.  Each returns 0 to go on or nonzero to stop: cvf_read then
 * returns that value with err->msg "stopped by the caller at offset N" (unless the callback
 * filled err itself through its ctx).  Any callback may be NULL. */
typedef struct cvf_visitor {
    int (*process_name)(void *ctx, uint64_t pid, uint64_t tid, const char *name);
    int (*thread_name)(void *ctx, uint64_t pid, uint64_t tid, const char *name);
    int (*fee_group)(void *ctx, const cvf_fee_group *g);
    int (*counter_group)(void *ctx, const cvf_counter_group *g);
    int (*other_events)(void *ctx, const cvf_json_record *r); /* usually once per file */
    int (*file_info)(void *ctx, const cvf_json_record *r);    /* a later one replaces */
} cvf_visitor;

enum cvf_read_flags {
    /* Check zblob bounds but do not inflate them: args_json is NULL, and the other_events and
     * file_info callbacks are not called.  For consumers that only need timings (summary). */
    CVF_READ_SKIP_JSON = 1u << 0,
};

/* Walks the whole file data[0 .. size).  Returns 0 when every byte was consumed as valid
 * records, -1 on malformed input (err filled: offset and one-line message naming it), or the
 * nonzero value a callback returned. */
int cvf_read(const void *data, size_t size, const cvf_visitor *v, void *ctx, unsigned flags,
             cvf_error *err);

/* Maps a file read-only (an empty file maps to a valid empty buffer).  0 or -1 with err. */
int cvf_map_file(const char *path, void **data, size_t *size, cvf_error *err);
void cvf_unmap_file(void *data, size_t size);

#endif /* VC_CVF_READER_H */
