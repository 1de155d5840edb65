/* top_screen.c — the terminal of `vcattach top` (top_screen.h).
 *
 * Raw mode here is "no line editing, no echo" (ICANON, ECHO off; VMIN 0, VTIME 0 so a read
 * never waits); ISIG stays on, so Ctrl-C is a SIGINT like everywhere else in vcattach and ends
 * the trace through attach.c's flag.  Ctrl-Z is ignored while the terminal is ours: a stopped
 * vcattach would leave the target's agent waiting with a terminal in raw mode.  The screen is
 * the alternate one (the operator's scrollback is left as it was), the cursor hidden.
 */
#include "top_screen.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

static struct termios saved;
static volatile sig_atomic_t restore_pending;
static struct sigaction old_fatal[4], old_tstp;
static const int fatal[4] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE};

static const char leave_seq[] = "\033[?25h\033[?1049l";

/* Async-signal-safe: the terminal's mode and screen back, then the signal's own death. */
static void on_fatal(int sig)
{
    if (restore_pending) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
        ssize_t w = write(STDOUT_FILENO, leave_seq, sizeof leave_seq - 1);
        (void)w;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void size_of(struct top_screen *s)
{
    struct winsize ws;
    s->cols = 100;
    s->rows = 40;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20 && ws.ws_row > 5) {
        s->cols = ws.ws_col;
        s->rows = ws.ws_row;
    }
}

int top_screen_open(struct top_screen *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->tty = isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
    s->cols = 160;
    s->rows = 30;
    if (!s->tty)
        return 0;
    size_of(s);
    if (tcgetattr(STDIN_FILENO, &saved) != 0) {
        snprintf(err, errlen, "cannot read the terminal's mode: %m");
        return -1;
    }
    struct termios raw = saved;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 4; i++)
        sigaction(fatal[i], &sa, &old_fatal[i]);
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGTSTP, &ign, &old_tstp);
    restore_pending = 1;
    if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) != 0) {
        snprintf(err, errlen, "cannot set the terminal's mode: %m");
        top_screen_close(s);
        return -1;
    }
    s->raw = 1;
    fputs("\033[?1049h\033[?25l", stdout);
    fflush(stdout);
    return 0;
}

int top_screen_key(struct top_screen *s)
{
    if (!s->raw)
        return -1;
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    unsigned char c;
    if (poll(&p, 1, 0) != 1 || read(STDIN_FILENO, &c, 1) != 1)
        return -1;
    return c;
}

void top_screen_draw(struct top_screen *s, const char *text)
{
    if (!s->tty) {
        fputs(text, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        return;
    }
    size_of(s);
    fputs("\033[H", stdout);
    int row = 0;
    for (const char *p = text; *p && row < s->rows; row++) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        fwrite(p, 1, n, stdout);
        fputs("\033[K", stdout); /* the rest of the line: what the last screen left there */
        if (row + 1 < s->rows)
            fputs("\r\n", stdout);
        p += n + (nl != NULL);
    }
    fputs("\033[J", stdout);
    fflush(stdout);
}

void top_screen_close(struct top_screen *s)
{
    if (!restore_pending)
        return;
    if (s->raw) {
        fputs(leave_seq, stdout);
        fflush(stdout);
    }
    tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
    restore_pending = 0;
    s->raw = 0;
    for (int i = 0; i < 4; i++)
        sigaction(fatal[i], &old_fatal[i], NULL);
    sigaction(SIGTSTP, &old_tstp, NULL);
}
