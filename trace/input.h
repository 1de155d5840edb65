/* input.h — the trace operand of every offline command (summary, requests, convert): one
 * file, or several read as one trace (merged into an in-memory file, merge.h; a Chrome-trace
 * JSON among them converted to a .cvf first), mapped
 * read-only, with what its first bytes say it is (input.c).  The one path from the operator's
 * file names to bytes, so that every command reads several files the same way and words a
 * file it cannot read the same way.
 */
#ifndef VCT_INPUT_H
#define VCT_INPUT_H

#include <stddef.h>

/* What the first bytes say, never the name. */
enum vct_input_kind {
    VCT_INPUT_EMPTY,   /* no byte at all */
    VCT_INPUT_CVF,     /* a u64 version word: 1, or a small other one the reader will refuse */
    VCT_INPUT_JSON,    /* '{' or '[' after white space (and a UTF-8 byte order mark) */
    VCT_INPUT_UNKNOWN, /* neither */
};

typedef struct vct_input {
    const char *path;         /* the one file; NULL: several, merged */
    char several[32];         /* their name in messages: "N files" */
    void *data;               /* the bytes, a read-only file mapping (NULL when empty) */
    size_t size;
    enum vct_input_kind kind;
} vct_input;

/* Maps paths[0 .. n) (n >= 1; several: merged first, each a .cvf or a JSON).  0, or -1
 * with one line in err that names the file and what is wrong. */
int vct_input_open(vct_input *in, const char *const *paths, size_t n, char *err, size_t errlen);
/* How messages and headers name the input: its path, or "N files". */
const char *vct_input_name(const vct_input *in);
void vct_input_close(vct_input *in);

/* A Chrome-trace JSON (json[0 .. size), a file mapping) converted to a .cvf in an anonymous
 * memory file (json_cvf.h), for what reads .cvf only: the merge, the loader.  Its fd, or -1
 * with err naming `name`. */
int vct_json_to_memfd(const char *name, const void *json, size_t size, char *err,
                      size_t errlen);
/* The whole of fd mapped read-only into *data, *size (NULL, 0: empty).  0, or -1 (errno). */
int vct_map_fd(int fd, void **data, size_t *size);

#endif /* VCT_INPUT_H */
