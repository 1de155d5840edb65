/* request_track.h — `vcattach convert --requests`: the requests of a trace as a timeline
 * track of their own in the Chrome-trace output.
 *
 * Each process with requests gets one more thread track named "requests" (a made-up tid,
 * VCT_REQ_TRACK_TID + lane, above any Linux tid), sorted above its real threads, holding one
 * slice per request from its start to its end, named after the entry function; its args say
 * which thread served it, its duration, and whether the trace cut it.  Requests that overlap
 * in time (threaded or async servers) go to further lanes, "requests 2", … so every track's
 * slices stay properly nested.
 */
#ifndef VCT_REQUEST_TRACK_H
#define VCT_REQUEST_TRACK_H

#include "json_text.h"
#include "requests.h"
#include "window.h"

#define VCT_REQ_TRACK_TID 1000000000ull /* Linux tids stay below 2^22 */

/* Appends the track's events to out as JSON objects separated by ",\n" (nothing when there
 * are no requests); a window (NULL: none) keeps the requests overlapping it, clipped.
 * 0, or -1 on allocation failure. */
int vct_request_track_json(const vct_trace *t, const vct_requests *r, const vct_window *w,
                           jtext *out);

#endif /* VCT_REQUEST_TRACK_H */
