/* agent_symbols.h — internal: where the agent's exported symbols are in a process that has
 * it mapped (agent_symbols.c): for the ptrace method (vc_agent_connect, vc_agent_loaded) and
 * for the hold of a young process (vc_agent_phase, hold.c). */
#ifndef VC_AGENT_SYMBOLS_H
#define VC_AGENT_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The target addresses of names[0..n) in the agent agent_path (the target's view of it) as
 * pid has it mapped: from the mapped file's .dynsym and its map base; addrs[i] is 0 for a
 * name it does not export.  0, or -errno with one line in err (not mapped, unreadable). */
int agent_symbols(pid_t pid, const char *agent_path, const char *const *names, uint64_t *addrs,
                  size_t n, char *err, size_t errlen);

#endif /* VC_AGENT_SYMBOLS_H */
