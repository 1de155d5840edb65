/* human.h — the one set of formatters for numbers people read (human.c): counts, sizes and
 * durations, as every command prints them (the status line, `stop`, `recover`, the summary and
 * requests reports).  One place, so that "1.5s", "12.0 MiB" and "53.310 ms" mean the same in
 * every output and a change of style is made once.
 *
 * Each writes into the caller's buf[0 .. cap) (cut to fit, always NUL-terminated) and returns
 * buf, so that several can stand in one printf.
 */
#ifndef VC_HUMAN_H
#define VC_HUMAN_H

#include <stddef.h>
#include <stdint.h>

/* 1234567 -> "1,234,567" */
const char *vc_human_count(uint64_t v, char *buf, size_t cap);

/* "812 B", "3.4 KiB", "12.0 MiB", "1.25 GiB" */
const char *vc_human_bytes(uint64_t bytes, char *buf, size_t cap);

/* A wall-clock duration for a status line: "500ms", "1.5s", "3m20s", "2h05m". */
const char *vc_human_ms(uint64_t ms, char *buf, size_t cap);

/* A measured time for a report: "2.104 s", "53.310 ms", and below a millisecond "812.4 µs"
 * with us_decimals digits after the point (the summary's spans keep 2, the requests' 1). */
const char *vc_human_us(double us, int us_decimals, char *buf, size_t cap);

#endif /* VC_HUMAN_H */
