/* unwind_access.h — libunwind-ptrace accessors that never open a file of the target.
 *
 * libunwind-ptrace's own find_proc_info and get_proc_name open the module of every frame by
 * its path in /proc/PID/maps (through /proc/PID/root) and mmap it.  That path is the target's
 * user's to choose: a FIFO named "libx.so (deleted)" made open() block forever with every
 * thread of the target stopped, and a file truncated while mapped would SIGBUS vcattach.
 * These accessors find the unwind table (.eh_frame_hdr, PT_GNU_EH_FRAME) in the target's
 * MEMORY instead, from the module's ELF and program headers as loaded, and leave frame names
 * to our own ELF index (elf.c, pread into our buffers, regular files only). */
#ifndef VC_UNWIND_ACCESS_H
#define VC_UNWIND_ACCESS_H

#include <libunwind-ptrace.h>

#include "proc.h"

/* The accessors for unw_create_addr_space(); every callback's arg is a _UPT_create() handle.
 * maps must describe the target while the accessors are in use (set by unwind_access_use). */
extern unw_accessors_t unwind_access_accessors;

/* The process (pid) whose memory the accessors read, and the maps they look modules up in,
 * for one unwinding of its stopped threads: pages read are kept until the next call (pid 0,
 * NULL maps when done). */
void unwind_access_use(pid_t pid, const struct proc_maps *maps);

#endif /* VC_UNWIND_ACCESS_H */
