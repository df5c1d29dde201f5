/*
 * jstream.h - one JSON object that arrives in pieces, taken apart as it comes.
 *
 * Owns the splitting of a top-level JSON object whose bulk is one array
 * member: each element of that array is handed over as soon as its last
 * byte has arrived, and every other member is handed over whole. A list of
 * 160,000 pods (240 MB) therefore never exists in memory at once: only the
 * element being received is buffered. Built on jscan, so everything that is
 * handed over has been validated as JSON; the object's own punctuation is
 * checked here.
 *
 *   struct jstream js;
 *   jstream_init(&js, "items", on_element, on_member, ctx, max_piece);
 *   for each chunk: if (jstream_feed(&js, data, len) != 0) ...js.error...
 *   if (jstream_finish(&js) != 0) ...js.error...   (the text ended here)
 *   jstream_free(&js);
 *
 * Callbacks get the exact text of the value (no surrounding whitespace),
 * valid only during the call; a non-zero return stops the stream, and
 * jstream_feed then returns -1 with error "stopped". Elements and members
 * larger than max_piece bytes fail the stream.
 *
 * Not thread-safe: one stream belongs to one thread.
 */
#ifndef GQA_JSTREAM_H
#define GQA_JSTREAM_H

#include "lib/jscan.h"
#include "lib/strbuf.h"
#include <stddef.h>

typedef int (*jstream_element_fn)(void *ctx, const char *text, size_t len);
typedef int (*jstream_member_fn)(void *ctx, const struct jscan_str *key, const char *text, size_t len);

struct jstream {
    /* configuration */
    const char *array_key; /* the member whose elements are streamed */
    jstream_element_fn on_element;
    jstream_member_fn on_member; /* may be NULL */
    void *ctx;
    size_t max_piece;
    /* state */
    int state;             /* private: where in the object the text is */
    struct strbuf pending; /* bytes received but not yet taken apart */
    size_t retry_at;       /* rescan an unfinished piece once pending holds this much */
    size_t received;       /* bytes fed so far, for error offsets */
    const char *error;     /* static message; NULL while all is well */
    size_t error_offset;   /* where in the whole text */
};

void jstream_init(struct jstream *js, const char *array_key, jstream_element_fn on_element, jstream_member_fn on_member,
                  void *ctx, size_t max_piece);
/* Take the next piece of text. 0, or -1 with js->error set (and every later
 * call returns -1). */
int jstream_feed(struct jstream *js, const char *data, size_t len);
/* The text is complete: 0 when it was exactly one object (whitespace
 * around it allowed), else -1 with js->error. */
int jstream_finish(struct jstream *js);
void jstream_free(struct jstream *js);

#endif
