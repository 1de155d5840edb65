/* ns_pid_check.c — cli/ns_pid.c against what a hostile agent in a container may send: META
 * and EVENTS frames rewritten to the host's pid stay within their computed bounds, exact
 * matches only are replaced, and a META at the spool's size bound stays within it.  Built
 * plain and with ASan+UBSan (tests/tests.mk); run by tests/system/test_tree_container.py.
 * Prints one line per failed check; exit status 1 if any failed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ns_pid.h"

static int failed;

static void check(int ok, const char *what)
{
    if (!ok) {
        printf("FAILED: %s\n", what);
        failed = 1;
    }
}

static void events_case(const char *in, pid_t host, pid_t own, const char *want)
{
    size_t n = 0;
    char *out = ns_pid_events(in, strlen(in), host, own, &n);
    check(out != NULL, "events: a copy");
    if (out == NULL)
        return;
    int ok = n == strlen(want) && memcmp(out, want, n) == 0;
    if (!ok)
        printf("  in %s\n  got %.*s\n  want %s\n", in, (int)n, out, want);
    check(ok, "events: rewritten as expected");
    free(out);
}

int main(void)
{
    events_case("[{\"pid\":7,\"tid\":7},{\"pid\":7}]", 123456, 7,
                "[{\"pid\":123456,\"tid\":7},{\"pid\":123456}]");
    /* not ours: another number, a prefix of a longer one, a key that only ends in pid */
    events_case("[{\"pid\":70,\"xpid\":7,\"pid\":77}]", 99, 7, "[{\"pid\":70,\"xpid\":7,\"pid\":77}]");
    /* a match at the very end without its delimiter is not one */
    events_case("\"pid\":7", 99, 7, "\"pid\":7");
    events_case("", 99, 7, "");
    /* many matches: the output grows by their count times the difference, no more */
    size_t reps = 100000;
    const char *unit = "\"pid\":1,";
    char *big = malloc(reps * strlen(unit) + 1);
    for (size_t i = 0; i < reps; i++)
        memcpy(big + i * strlen(unit), unit, strlen(unit));
    big[reps * strlen(unit)] = '\0';
    size_t n = 0;
    char *out = ns_pid_events(big, strlen(big), 2147483647, 1, &n);
    check(out != NULL && n == reps * strlen("\"pid\":2147483647,"), "events: many matches");
    free(out);
    free(big);

    /* META: host pid first, the name with its namespace pid after it */
    unsigned char meta[8 + 5];
    unsigned long long own = 7;
    memcpy(meta, &own, 8);
    memcpy(meta + 8, "gunic", 5);
    out = ns_pid_meta(meta, sizeof meta, 4242, 7, &n);
    unsigned long long host = 0;
    if (out)
        memcpy(&host, out, 8);
    check(out != NULL && host == 4242 && n == 8 + 5 + strlen(" (pid 7 in its namespace)") &&
              memcmp(out + 8, "gunic (pid 7 in its namespace)", n - 8) == 0,
          "meta: host pid and suffix");
    free(out);
    check(ns_pid_meta(meta, 7, 4242, 7, &n) == NULL, "meta: shorter than its pid is refused");
    /* a name at the spool's bound: cut so that the rewritten one stays within it */
    size_t bound = 8 + NS_PID_NAME_MAX;
    unsigned char *huge = malloc(bound);
    memset(huge, 'a', bound);
    out = ns_pid_meta(huge, bound, 2147483647, 2147483646, &n);
    check(out != NULL && n <= bound && n > 8, "meta: stays within the spool's bound");
    check(out != NULL && memcmp(out + n - strlen(" in its namespace)"), " in its namespace)",
                                strlen(" in its namespace)")) == 0, "meta: suffix kept");
    free(out);
    free(huge);

    char label[96];
    ns_pid_label(4242, 7, label, sizeof label);
    check(strcmp(label, "4242 (pid 7 in its namespace)") == 0, "label: other namespace");
    ns_pid_label(4242, 4242, label, sizeof label);
    check(strcmp(label, "4242") == 0, "label: same namespace");
    ns_pid_label(4242, 0, label, sizeof label);
    check(strcmp(label, "4242") == 0, "label: unknown");
    if (!failed)
        printf("ns_pid: all checks passed\n");
    return failed;
}
