/* fuzz_frames.c — libFuzzer harness: the control protocol's frames as `vcattach trace`
 * receives them from an agent (the target's user's code: SECURITY.md §4).
 *
 * Input: two bytes of the session's shape, then the bytes the agent sends on the control
 * socket (common/protocol.h framing: u32 type | u32 length | payload).
 *   byte 0  how many frames arrive while tracing (trace_stream_pump, one per call) before
 *           the trace's end makes vcattach send STOP and take the rest (ctl_receive);
 *           255: all of them while tracing
 *   byte 1  bit 0: --last 1 µs (every CHUNK rotates the spool: spool_rotate, two
 *           generations built as one); bit 1: a spool capped at 4 KiB (--max-trace-mb
 *           reached: the trace ends there)
 * The session goes through the controller's own code, in order: ctl_accept's HELLO,
 * ctl_configure (CONFIG out, STARTED or ERROR back), trace_stream_pump, ctl_receive after
 * STOP, trace_stream_build of the .cvf, as cli/trace_process.c does; the .cvf built must
 * decode (fuzz_require_cvf); then what vcattach reads in the agent's texts (cli/report.c:
 * END's status, the buffer forecast from a STATUS).  The agent's bytes come through a socket (fuzz_util.c).
 * Built by tests/fuzz/fuzz.mk; seeds in tests/fuzz/corpus/frames. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control_client.h"
#include "fuzz_util.h"
#include "report.h"
#include "trace_sink.h"
#include "trace_stream.h"

/* The .cvf into a memory file behind a struct trace_sink (where vcattach writes OUT). */
static void build_and_check(struct trace_stream *ts)
{
    struct trace_sink sink;
    memset(&sink, 0, sizeof sink);
    sink.fd = fuzz_memfd();
    struct spool_stats st;
    char err[1024];
    if (trace_stream_build(ts, &sink, &st, err, sizeof err) == 0)
        fuzz_require_cvf(sink.fd, "trace_stream_build (vcattach trace)");
    close(sink.fd);
}

static void session(int fd, uint8_t pump_frames, uint8_t shape)
{
    char err[1024], reply[8192] = "";
    static char end_text[8192];
    end_text[0] = '\0';
    struct ctl_conn c;
    ctl_init(&c);
    c.pid = getpid();
    c.fd = fd;
    if (ctl_accept(&c, 1000, NULL, err, sizeof err) != 0 ||
        ctl_configure(&c, "output=control\nstream=1\n", reply, sizeof reply, 1000, NULL, err,
                      sizeof err) != 0) {
        ctl_close(&c);
        return;
    }
    char out[256];
    fuzz_path("out", out, sizeof out);
    struct trace_stream ts;
    uint64_t limit = shape & 2 ? 4096 : (uint64_t)1 << 30;
    uint64_t last_ns = shape & 1 ? 1000 : 0;
    if (trace_stream_open(&ts, out, getpid(), limit, 1, last_ns, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz: %s\n", err);
        abort();
    }
    int how = 0; /* cli/trace_process.c's wait_while_tracing: 0 STOP, 1 END, 2 EOF, -1 */
    for (unsigned k = 0; how == 0 && (pump_frames == 255 || k < pump_frames); k++) {
        int r = trace_stream_pump(&ts, c.fd, 0, end_text, sizeof end_text, err, sizeof err);
        how = r == 2 ? 0 : r < 0 ? (ts.broken ? -1 : 2) : r;
        if (r == 2)
            break; /* the spool is full: stop now */
    }
    int keep = how >= 0;
    if (how == 0) { /* collect_trace: STOP, the rest until END */
        vc_msg_send(c.fd, VC_MSG_STOP, NULL, 0, 1000);
        struct receive_limits lim = {.frame_timeout_ms = 1000, .total_timeout_ms = 10000,
                                     .max_bytes = limit};
        if (ctl_receive(&c, trace_stream_on_data, &ts, end_text, sizeof end_text, &lim, NULL,
                        err, sizeof err) < 0 && ts.broken)
            keep = 0;
    }
    if (keep)
        build_and_check(&ts);
    trace_stream_close(&ts, 1);
    ctl_close(&c);
    /* what vcattach reads in the agent's texts (report.c): END's status, the buffer forecast
     * from a STATUS (STARTED and END stand in: the same key=value form).  Not report_summary:
     * its hint scans /proc for Python children, three quarters of a run's time, and reads
     * END with the same report_u64. */
    report_end_status(end_text);
    report_buffer_forecast(reply, 60000.0, "the end");
    report_buffer_forecast(end_text, 60000.0, "the end");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int peer;
    int fd = fuzz_agent_socket(data + 2, size - 2, &peer);
    if (fd < 0)
        return 0;
    session(fd, data[0], data[1]);
    close(peer);
    return 0;
}
