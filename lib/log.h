/*
 * log.h - leveled logging to stderr: text, JSON, or klog's text format.
 *
 * Owns the service's log format (--log-level, --log-format, --v).
 * Thread-safe: each line is written with a single write() call. One
 * message is one line in every format: text and klog escape control
 * characters and invalid UTF-8 (strbuf_text_escaped), JSON escapes them as
 * a JSON string, so a value taken from a request cannot forge a line.
 *
 * A line may carry structured fields (log_fields: key/value pairs, for the
 * pod, node, GPUs and reason of a decision). They are written as
 *   text:  2026-11-27T07:35:33.838Z info  msg pod="default/p" node="n1"
 *   json:  {"time":"...","level":"info","msg":"msg","pod":"default/p","node":"n1"}
 *   klog:  I1127 07:35:33.838001   21912 placement.c:123] "msg" pod="default/p" node="n1"
 * klog's header is Kubernetes components' (severity letter, MMDD, time to
 * the microsecond, thread id, file:line).
 */
#ifndef GQA_LOG_H
#define GQA_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

enum log_format { LOG_FORMAT_TEXT = 0, LOG_FORMAT_JSON, LOG_FORMAT_KLOG };

/* "debug", "info", "warn", "error": 0, or -1 for anything else. */
int log_parse_level(const char *name, enum log_level *out);
/* "text", "json" or "klog": 0, or -1 for anything else. */
int log_parse_format(const char *name, int *format);
/* klog's verbosity (--v N, 0..10): 4 and above log debug lines, as
 * Kubernetes components log their detail at -v=4. */
enum log_level log_level_of_verbosity(int v);
void log_configure(enum log_level level, int format);
int log_enabled(enum log_level level);
void log_at(enum log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A message and key/value pairs (const char *), ended by a NULL key; a
 * NULL value is written as "". */
void log_fields_at(enum log_level level, const char *file, int line, const char *msg, ...) __attribute__((sentinel));

#define log_msg(level, ...) log_at((level), __FILE__, __LINE__, __VA_ARGS__)
#define log_fields(level, msg, ...)                                               \
    do {                                                                          \
        if (log_enabled(level))                                                   \
            log_fields_at((level), __FILE__, __LINE__, (msg), __VA_ARGS__, NULL); \
    } while (0)

#define log_debug(...)                       \
    do {                                     \
        if (log_enabled(LOG_DEBUG))          \
            log_msg(LOG_DEBUG, __VA_ARGS__); \
    } while (0)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
