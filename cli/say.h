/* say.h — how vcattach's commands speak to the operator's terminal (say.c): every line on
 * stderr, and every line of the text reports on stdout (summary, requests, a tree's list of
 * processes), is formatted and then passed through the one terminal sanitizer (common/term.h),
 * whatever it holds: an agent's words, a command line, a comm, a loader's error, a path in the
 * target's root, a name in a trace.  So no call site has to know which of its arguments another
 * user controls.  Newlines pass; every other control character, C1 control, bidi override and
 * stray byte becomes a visible escape.
 *
 * Data written to stdout (convert's JSON, collapsed stacks, SVG) does not come here: it is a
 * file's content, escaped for its own format by its exporter.  The live status line, whose
 * "\r" and erase-line sequence are vcattach's own, is written by report.c with no target text.
 */
#ifndef VC_SAY_H
#define VC_SAY_H

/* A message on stderr. */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A line of a text report on stdout. */
void say_out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A name from a trace in a table on stdout: on one row (a newline is escaped too). */
void say_text(const char *s);

#endif /* VC_SAY_H */
