/* fuzz_util.h — what the libFuzzer harnesses of tests/fuzz/ share (fuzz_util.c): a private
 * scratch directory, the agent's bytes on a socket as vcattach receives them, a memory
 * file for a .cvf, the check that a .cvf decodes whole, and the offline tools run as the operator
 * runs them.  Each harness is one decoder family (SECURITY.md, "Fuzzing", lists them); this
 * keeps their setup in one place.  Built by tests/fuzz/fuzz.mk. */
#ifndef VC_FUZZ_UTIL_H
#define VC_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* The harness's scratch directory (made once per process, emptied at exit), and
 * path = DIR/name.  Aborts when it cannot be made: a harness without it tests nothing. */
const char *fuzz_path(const char *name, char *path, size_t cap);

/* Writes data to DIR/name (replacing it) and returns the path in path. */
void fuzz_write_file(const char *name, const void *data, size_t size, char *path, size_t cap);

/* stdout to /dev/null: the offline tools print their tables there. */
void fuzz_quiet_stdout(void);

/* A connected Unix stream socket from which vcattach reads `data` as the agent's bytes (the
 * agent's end, *peer, wrote them all and shut down its writing side: EOF after them, never a
 * wait; what vcattach sends, CONFIG and STOP, lands in *peer, which the caller closes).
 * size must fit the socket's buffer (FUZZ_SOCKET_MAX); returns the fd, or -1 when it does
 * not. */
#define FUZZ_SOCKET_MAX (128u << 10)
int fuzz_agent_socket(const void *data, size_t size, int *peer);

/* A memory file for a .cvf to be written into (cvf_sink_fd's ctx is the fd as a pointer). */
int fuzz_memfd(void);

/* Every record of a .cvf decoded and every value read (the bounded reader, common/
 * cvf_reader.h).  Returns the reader's result: 0, or -1 with its message in msg. */
int fuzz_cvf_read_all(const void *cvf, size_t size, unsigned flags, char *msg, size_t cap);

/* The .cvf that vcattach itself wrote into fd (a spool's build, a conversion) must decode:
 * traps with the reader's message otherwise (`what` names the writer).  Any operator tool
 * would refuse such a file. */
void fuzz_require_cvf(int fd, const char *what);

/* The offline tools on a trace file (.cvf or Chrome JSON), as an operator runs them:
 * `summary` and `requests`, then, when summary could read it (the others load it the same
 * way), `convert` to chrome (--tasks --requests) and speedscope, and one variant each of
 * summary (--all --merged, --by interp, --sort cpu --thread), of the compact exports (svg,
 * collapsed) and of a window (--from --to --min-dur, or --from alone), as `variant` chooses.
 * Their verdicts are not judged (a malformed file is an error line): only crashes, leaks and
 * undefined behaviour are. */
void fuzz_offline_tools(const char *path, unsigned variant);

#endif
