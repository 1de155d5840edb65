/* input.c — the offline commands' trace operands (input.h): a file mapped as it is, or
 * several merged by merge.c into a memfd that is mapped in its turn (a Chrome-trace JSON among
 * them converted to a .cvf first, json_cvf.h, since the merge reads .cvf), so the commands
 * never see a temporary path (/proc/self/fd/N) and every one names its input the same way. */
#include "input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cvf_reader.h"
#include "json_cvf.h"
#include "merge.h"

static enum vct_input_kind sniff(const unsigned char *d, size_t n)
{
    static const unsigned char version1[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    if (n == 0)
        return VCT_INPUT_EMPTY;
    if (n >= 8 && !memcmp(d, version1, 8))
        return VCT_INPUT_CVF;
    size_t i = 0;
    if (n >= 3 && d[0] == 0xEF && d[1] == 0xBB && d[2] == 0xBF)
        i = 3;
    while (i < n && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r'))
        i++;
    if (i < n && (d[i] == '{' || d[i] == '['))
        return VCT_INPUT_JSON;
    /* a small version word other than 1: a .cvf the reader will reject by its version */
    static const unsigned char zeros[7];
    if (n >= 8 && d[0] != 0 && !memcmp(d + 1, zeros, 7))
        return VCT_INPUT_CVF;
    return VCT_INPUT_UNKNOWN;
}

int vct_json_to_memfd(const char *name, const void *json, size_t size, char *err,
                      size_t errlen)
{
    cvf_error cerr = {0};
    int fd = memfd_create("vcattach-input.cvf", MFD_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create a memory file for the conversion: %s", name,
                 strerror(errno));
        return -1;
    }
    convert_ctx cc = {.input_is_mapping = 1};
    if (convert_json_to_cvf(json, size, fd, &cc, &cerr) != 0) {
        snprintf(err, errlen, "%s: %s", name, cerr.msg);
        close(fd);
        return -1;
    }
    return fd;
}

int vct_map_fd(int fd, void **data, size_t *size)
{
    struct stat st;
    *data = NULL;
    *size = 0;
    if (fstat(fd, &st) != 0)
        return -1;
    if (st.st_size == 0)
        return 0;
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        return -1;
    *data = p;
    *size = (size_t)st.st_size;
    return 0;
}

/* What the merge reads for paths[i]: the file, or for a JSON one its .cvf in a memfd (fds[i],
 * named by procpath[i]; fds[] comes all -1).  0, or -1 with err. */
static int cvf_paths(const char *const *paths, size_t n, const char **read, int *fds,
                     char (*procpath)[32], char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        void *data = NULL;
        size_t size = 0;
        cvf_error cerr;
        read[i] = paths[i];
        if (cvf_map_file(paths[i], &data, &size, &cerr) != 0) {
            snprintf(err, errlen, "%s: %s", paths[i], cerr.msg);
            return -1;
        }
        int json = sniff(data, size) == VCT_INPUT_JSON;
        if (json)
            fds[i] = vct_json_to_memfd(paths[i], data, size, err, errlen);
        cvf_unmap_file(data, size);
        if (json && fds[i] < 0)
            return -1;
        if (fds[i] >= 0) {
            snprintf(procpath[i], sizeof procpath[i], "/proc/self/fd/%d", fds[i]);
            read[i] = procpath[i];
        }
    }
    return 0;
}

/* Several files: merged into a memfd, which is mapped (the mapping keeps it alive). */
static int map_merged(vct_input *in, const char *const *paths, size_t n, char *err,
                      size_t errlen)
{
    const char **read = calloc(n, sizeof *read);
    int *fds = malloc(n * sizeof *fds);
    char (*procpath)[32] = calloc(n, sizeof *procpath);
    char why[1024];
    int fd = -1;
    for (size_t i = 0; fds && i < n; i++)
        fds[i] = -1;
    if (!read || !fds || !procpath)
        snprintf(err, errlen, "out of memory");
    else if (cvf_paths(paths, n, read, fds, procpath, err, errlen) == 0 &&
             (fd = vct_cvf_merge_to_memfd(read, n, why, sizeof why)) < 0)
        snprintf(err, errlen, "%s (several inputs are merged: each must be a readable .cvf "
                 "or Chrome-trace JSON)", why);
    for (size_t i = 0; fds && i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(read);
    free(fds);
    free(procpath);
    if (fd < 0)
        return -1;
    int rc = vct_map_fd(fd, &in->data, &in->size);
    if (rc < 0)
        snprintf(err, errlen, "cannot read back the merged trace: %s", strerror(errno));
    close(fd);
    return rc;
}

int vct_input_open(vct_input *in, const char *const *paths, size_t n, char *err, size_t errlen)
{
    memset(in, 0, sizeof *in);
    if (n > 1) {
        snprintf(in->several, sizeof in->several, "%zu files", n);
        if (map_merged(in, paths, n, err, errlen) < 0)
            return -1;
    } else {
        cvf_error cerr;
        in->path = paths[0];
        if (cvf_map_file(in->path, &in->data, &in->size, &cerr) != 0) {
            snprintf(err, errlen, "%s: %s", in->path, cerr.msg);
            return -1;
        }
    }
    in->kind = sniff(in->data, in->size);
    return 0;
}

const char *vct_input_name(const vct_input *in)
{
    return in->path ? in->path : in->several;
}

void vct_input_close(vct_input *in)
{
    cvf_unmap_file(in->data, in->size);
    in->data = NULL;
    in->size = 0;
}
