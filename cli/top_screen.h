/* top_screen.h — the terminal of `vcattach top` (top_screen.c): raw keys without echo, a
 * whole screen redrawn in place (ANSI), and the terminal given back as it was on every way
 * out: the normal one, Ctrl-C and SIGTERM (attach.c's handlers end the trace, then the watcher
 * leaves), and the fatal signals (a handler restores it, then dies of the signal).
 *
 * When stdout is not a terminal nothing of that is done: screens are plain text, one after
 * another, and no key is read.
 */
#ifndef VC_TOP_SCREEN_H
#define VC_TOP_SCREEN_H

#include <stddef.h>

struct top_screen {
    int tty;      /* 1: stdout (and stdin) are a terminal: raw keys, redraw in place */
    int raw;      /* the terminal's mode was changed (and must be given back) */
    int cols, rows;
};

/* Takes the terminal if stdout is one.  0, or -1 with err (its mode could not be set). */
int top_screen_open(struct top_screen *s, char *err, size_t errlen);
/* The next key pressed, or -1 (never blocks; always -1 when not a terminal). */
int top_screen_key(struct top_screen *s);
/* One screen: text is lines ending in '\n', already sanitized (vcattach's own escapes none). */
void top_screen_draw(struct top_screen *s, const char *text);
/* Gives the terminal back (idempotent). */
void top_screen_close(struct top_screen *s);

#endif /* VC_TOP_SCREEN_H */
