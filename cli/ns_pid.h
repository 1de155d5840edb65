/* ns_pid.h — a process in another pid namespace, named by the host's pid with its own beside
 * it: in the CLI's lines and in what its agent says about its process (ns_pid.c says why). */
#ifndef VC_NS_PID_H
#define VC_NS_PID_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NS_PID_NAME_MAX 65536 /* a META's name, at most (common/spool.c) */
/* An EVENTS frame rewritten: at most a frame (1 MiB) grown by each "pid" it names (a pid of
 * at most 10 digits for one of at least 1: 9 more bytes for every 8 of input at worst). */
#define NS_PID_EVENTS_MAX ((size_t)3 << 20)

/* "PID" or, when own_pid (the last NSpid field) differs, "PID (pid OWN in its namespace)". */
void ns_pid_label(pid_t pid, pid_t own_pid, char *buf, size_t cap);

/* A META frame (u64 pid | name) with the host's pid and " (pid OWN in its namespace)" after
 * the name: a malloc'd copy (*out_n bytes), or NULL (too short, out of memory: pass the frame
 * on as it came). */
void *ns_pid_meta(const void *in, size_t n, pid_t pid, pid_t own_pid, size_t *out_n);

/* An EVENTS frame (JSON) with every "pid":OWN made "pid":PID: a malloc'd copy (*out_n bytes),
 * or NULL (out of memory, or past NS_PID_EVENTS_MAX: pass the frame on as it came). */
void *ns_pid_events(const void *in, size_t n, pid_t pid, pid_t own_pid, size_t *out_n);

#endif /* VC_NS_PID_H */
