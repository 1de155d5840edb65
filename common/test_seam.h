/* test_seam.h — where the test suite may reach into vcattach: the fault injections that open a
 * race window or make a read block (tests/system/test_security_sock.py, test_security_tree.py).
 *
 * They exist only in the build for tests, build/seams/vcattach (VC_TEST_SEAMS defined, see
 * tests/tests.mk).  In the vcattach that operators run as root, every seam is the constant
 * "not set": no environment variable is read and no seam's name is in the binary
 * (tests/system/test_build.py checks it), so nobody's environment can slow or steer it.
 *
 *     const char *v = VC_SEAM(MERGE_PAUSE_MS);   // getenv("VCATTACH_TEST_MERGE_PAUSE_MS")
 */
#ifndef VC_TEST_SEAM_H
#define VC_TEST_SEAM_H

#ifdef VC_TEST_SEAMS
#include <stdlib.h>
#define VC_SEAM(name) getenv("VCATTACH_TEST_" #name)
#else
#define VC_SEAM(name) ((const char *)0)
#endif

#endif /* VC_TEST_SEAM_H */
