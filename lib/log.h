/*
 * log.h - leveled logging to stderr, as text or one JSON object per line.
 *
 * Owns the service's log format (--log-level, --log-format). Thread-safe:
 * each line is written with a single write() call. One message is one line
 * in both formats: the text format escapes control characters and invalid
 * UTF-8 in the message (strbuf_text_escaped), the JSON format escapes it as
 * a JSON string, so a value taken from a request cannot forge a line.
 */
#ifndef GQA_LOG_H
#define GQA_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

/* "debug", "info", "warn", "error": 0, or -1 for anything else. */
int log_parse_level(const char *name, enum log_level *out);
/* "text" (*json = 0) or "json" (*json = 1): 0, or -1 for anything else. */
int log_parse_format(const char *name, int *json);
void log_configure(enum log_level level, int json);
int log_enabled(enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_debug(...)                       \
    do {                                     \
        if (log_enabled(LOG_DEBUG))          \
            log_msg(LOG_DEBUG, __VA_ARGS__); \
    } while (0)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
