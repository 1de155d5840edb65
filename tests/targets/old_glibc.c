/* old_glibc.c — a stand-in for an old glibc's libc.so.6 (built with old_glibc.map): a library
 * that defines the symbol versions GLIBC_2.2.5 to GLIBC_2.12 (CentOS 6's glibc) and nothing
 * newer, which libc_standin.c maps as its libc.  One symbol per version node, so that each is
 * defined; nothing calls them. */
int old_glibc_2_2_5;
int old_glibc_2_12;
