/* version.h — the one place that says which vcattach this is.
 * Read by the CLI (--version, trace metadata) and the trace exports (speedscope's "exporter"),
 * so a library that only formats traces need not include the CLI's headers. */
#ifndef VC_VERSION_H
#define VC_VERSION_H

#define VC_VERSION_STRING "0.1.0"

/* The oldest glibc the agents load into, 2.N (their symbol versions are pinned to it by
 * scripts/glibc-floor, agent/agent.mk, which read it here), which preflight asks of a target's
 * libc. */
#define VC_AGENT_GLIBC_FLOOR_MINOR 17

#endif
