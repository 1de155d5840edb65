/* method_err.c — the one-line error every injection method fills in (see method.h): a
 * printf-style message into the caller's buffer, always terminated, never longer. */
#include "method.h"

#include <stdarg.h>
#include <stdio.h>

void inject_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}
