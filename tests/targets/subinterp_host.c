/* subinterp_host.c — a C host that serves requests from a sub-interpreter the way mod_wsgi's
 * daemon processes do (tests/system/test_subinterp.py): Py_Initialize, one Py_NewInterpreter (which
 * shares the main GIL from 3.12 on: the "legacy" config), worker threads made by C (not by
 * threading), each with a thread state of its own in the sub-interpreter (PyThreadState_New),
 * taken and let go around every request (PyEval_AcquireThread / PyEval_ReleaseThread).
 * libpython is opened with dlopen (argv[1]) and only stable-ABI functions are used, so one
 * build serves every shared libpython.
 *
 *   subinterp_host LIBPYTHON THREADS REQUESTS CALLS
 *
 * Prints "ready", waits for a line "go" on stdin; then, on the main thread in the
 * sub-interpreter, waits (at most 20 s) until our sys.monitoring tool is there; then THREADS
 * workers run REQUESTS requests each, each calling work() CALLS times; prints
 * {"count": work() calls, "sum": their results} and waits for a line "check" on stdin; runs a
 * statement in the sub-interpreter and prints {"tools": its sys.monitoring tool names};
 * ends the sub-interpreter and Python, and exits 0. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void PyThreadState;
typedef void PyInterpreterState;

static void (*py_initialize)(void);
static int (*py_finalize)(void);
static PyThreadState *(*new_interpreter)(void);
static void (*end_interpreter)(PyThreadState *);
static PyThreadState *(*save_thread)(void);
static void (*restore_thread)(PyThreadState *);
static PyThreadState *(*tstate_new)(PyInterpreterState *);
static void (*tstate_clear)(PyThreadState *);
static void (*tstate_delete_current)(void);
static PyInterpreterState *(*interp_get)(void);
static PyThreadState *(*tstate_swap)(PyThreadState *);
static PyThreadState *(*tstate_get)(void);
static void (*acquire_thread)(PyThreadState *);
static void (*release_thread)(PyThreadState *);
static int (*run_string)(const char *);

static PyInterpreterState *g_sub;
static int g_requests, g_calls;

static const char WORK[] =
    "import sys, json, time\n"
    "COUNT = 0\n"
    "TOTALS = []\n"
    "def work(x):\n"
    "    global COUNT\n"
    "    COUNT += 1\n"
    "    return (x * 7 + 3) % 1009\n"
    "def request(n):\n"
    /* list.append, not `TOTAL += sum(...)`: the GIL may pass to another worker inside sum()
     * (a loaded machine descheduled this one for a switch interval), and a += across that
     * loses the other's update (the host's own race, not the trace's) */
    "    TOTALS.append(sum(work(i) for i in range(n)))\n";

static void *worker(void *arg)
{
    (void)arg;
    char code[64];
    snprintf(code, sizeof code, "request(%d)\n", g_calls);
    PyThreadState *ts = tstate_new(g_sub); /* its own state in the sub-interpreter */
    for (int r = 0; r < g_requests; r++) {
        acquire_thread(ts);
        run_string(code);
        release_thread(ts);
    }
    acquire_thread(ts);
    tstate_clear(ts);
    tstate_delete_current(); /* and lets the GIL go */
    return NULL;
}

/* A line from stdin, read with read(2): a thread waiting in stdio holds its lock, which is no
 * safe point to inject at (a host waits in a system call, as this one does). */
static int wait_line(const char *want)
{
    char line[64];
    size_t n = 0;
    while (n + 1 < sizeof line) {
        ssize_t r = read(0, line + n, 1);
        if (r <= 0)
            return -1;
        if (line[n] == '\n')
            break;
        n++;
    }
    line[n] = '\0';
    return strcmp(line, want) == 0 ? 0 : -1;
}

#define SYM(var, name)                                                                        \
    do {                                                                                      \
        *(void **)(&var) = dlsym(py, name);                                                   \
        if (var == NULL) {                                                                    \
            fprintf(stderr, "subinterp_host: %s missing\n", name);                          \
            return 1;                                                                         \
        }                                                                                     \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 5)
        return 2;
    int nthreads = atoi(argv[2]);
    g_requests = atoi(argv[3]);
    g_calls = atoi(argv[4]);
    if (nthreads < 1 || nthreads > 64)
        return 2;
    void *py = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (py == NULL) {
        fprintf(stderr, "subinterp_host: %s\n", dlerror());
        return 1;
    }
    SYM(py_initialize, "Py_Initialize");
    SYM(py_finalize, "Py_FinalizeEx");
    SYM(new_interpreter, "Py_NewInterpreter");
    SYM(end_interpreter, "Py_EndInterpreter");
    SYM(save_thread, "PyEval_SaveThread");
    SYM(restore_thread, "PyEval_RestoreThread");
    SYM(tstate_new, "PyThreadState_New");
    SYM(tstate_clear, "PyThreadState_Clear");
    SYM(tstate_delete_current, "PyThreadState_DeleteCurrent");
    SYM(interp_get, "PyInterpreterState_Get");
    SYM(tstate_swap, "PyThreadState_Swap");
    SYM(tstate_get, "PyThreadState_Get");
    SYM(acquire_thread, "PyEval_AcquireThread");
    SYM(release_thread, "PyEval_ReleaseThread");
    SYM(run_string, "PyRun_SimpleString");

    py_initialize();
    PyThreadState *main_ts = tstate_get();
    PyThreadState *sub_ts = new_interpreter(); /* current now, GIL held */
    if (sub_ts == NULL)
        return 1;
    g_sub = interp_get();
    if (run_string(WORK) != 0)
        return 1;
    save_thread();
    printf("ready\n");
    fflush(stdout);
    if (wait_line("go") != 0)
        return 1;

    restore_thread(sub_ts);
    run_string("deadline = time.monotonic() + 20\n"
               "while sys.monitoring.get_tool(2) != 'vcattach' and time.monotonic() < deadline:\n"
               "    time.sleep(0.01)\n");
    save_thread();
    pthread_t th[64];
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&th[i], NULL, worker, NULL) != 0)
            return 1;
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    restore_thread(sub_ts);
    run_string("print(json.dumps({'count': COUNT, 'sum': sum(TOTALS)}), flush=True)\n");
    save_thread();

    if (wait_line("check") != 0)
        return 1;
    restore_thread(sub_ts);
    run_string("pass\n"); /* a request of ours still queued here runs first */
    run_string("print(json.dumps({'tools': [sys.monitoring.get_tool(i) for i in range(6)]}), "
               "flush=True)\n");
    end_interpreter(sub_ts);
    tstate_swap(main_ts);
    return py_finalize() < 0 ? 1 : 0;
}
