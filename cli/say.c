/* say.c — formatted lines through the terminal sanitizer (say.h; the formatting and the
 * sanitizing are common/term.c's vc_term_vprintf, which trace/'s reports print with too). */
#include "say.h"

#include <stdarg.h>
#include <stdio.h>

#include "term.h"

void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vc_term_vprintf(stderr, fmt, ap);
    va_end(ap);
}

void say_out(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vc_term_vprintf(stdout, fmt, ap);
    va_end(ap);
}

void say_text(const char *s)
{
    vc_term_fputs(stdout, s, 0);
}
