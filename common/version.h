/* version.h — the one place that says which vcattach this is.
 * Read by the CLI (--version, trace metadata) and the trace exports (speedscope's "exporter"),
 * so a library that only formats traces need not include the CLI's headers. */
#ifndef VC_VERSION_H
#define VC_VERSION_H

#define VC_VERSION_STRING "0.1.0"

#endif
