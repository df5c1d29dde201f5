/* log.c - leveled logging in three formats, with structured fields; see log.h. */
#include "lib/log.h"
#include "lib/clock.h"
#include "lib/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static enum log_level min_level = LOG_INFO;
static enum log_format format = LOG_FORMAT_TEXT;

static const char *const level_names[] = {"debug", "info", "warn", "error"};
static const char *const format_names[] = {"text", "json", "klog"};
/* klog's severity letters: debug lines are klog's V(4) Info lines. */
static const char klog_letters[] = {'I', 'I', 'W', 'E'};

int log_parse_level(const char *name, enum log_level *out)
{
    for (int i = LOG_DEBUG; i <= LOG_ERROR; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -1;
}

int log_parse_format(const char *name, int *out)
{
    for (int i = LOG_FORMAT_TEXT; i <= LOG_FORMAT_KLOG; i++) {
        if (strcmp(name, format_names[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    return -1;
}

enum log_level log_level_of_verbosity(int v)
{
    return v >= 4 ? LOG_DEBUG : LOG_INFO;
}

void log_configure(enum log_level level, int fmt)
{
    min_level = level;
    format = fmt >= LOG_FORMAT_TEXT && fmt <= LOG_FORMAT_KLOG ? (enum log_format)fmt : LOG_FORMAT_TEXT;
}

int log_enabled(enum log_level level)
{
    return level >= min_level;
}

static const char *base_name(const char *file)
{
    const char *slash = strrchr(file, '/');
    return slash ? slash + 1 : file;
}

/* The line's start, up to the message. */
static void put_header(struct strbuf *line, enum log_level level, const char *file, int lineno)
{
    int64_t now = clock_realtime_ns();
    time_t secs = (time_t)(now / NS_PER_S);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char when[40];
    if (format == LOG_FORMAT_KLOG) {
        strftime(when, sizeof when, "%m%d %H:%M:%S", &tm);
        strbuf_printf(line, "%c%s.%06d %7ld %s:%d] ", klog_letters[level], when, (int)(now % NS_PER_S / 1000),
                      (long)syscall(SYS_gettid), base_name(file), lineno);
        return;
    }
    size_t n = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + n, sizeof when - n, ".%03dZ", (int)(now % NS_PER_S / NS_PER_MS));
    if (format == LOG_FORMAT_JSON)
        strbuf_printf(line, "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":", when, level_names[level]);
    else
        strbuf_printf(line, "%s %-5s ", when, level_names[level]);
}

/* Values come from requests and the cluster (pod names, paths): escaped,
 * none can end the line early or forge the next one. */
static void put_message(struct strbuf *line, const char *text, size_t len)
{
    if (format == LOG_FORMAT_JSON) {
        strbuf_json_string(line, text);
    } else if (format == LOG_FORMAT_KLOG) {
        strbuf_putc(line, '"');
        strbuf_text_escaped(line, text, len);
        strbuf_putc(line, '"');
    } else {
        strbuf_text_escaped(line, text, len);
    }
}

static void put_field(struct strbuf *line, const char *key, const char *value)
{
    if (!value)
        value = "";
    if (format == LOG_FORMAT_JSON) {
        strbuf_putc(line, ',');
        strbuf_json_string(line, key);
        strbuf_putc(line, ':');
        strbuf_json_string(line, value);
        return;
    }
    strbuf_putc(line, ' ');
    strbuf_text_escaped(line, key, strlen(key));
    strbuf_puts(line, "=\"");
    /* A quote inside the value would end it early for a reader. */
    for (const char *p = value; *p; p++) {
        const char *q = strchr(p, '"');
        size_t run = q ? (size_t)(q - p) : strlen(p);
        strbuf_text_escaped(line, p, run);
        p += run;
        if (!*p)
            break;
        strbuf_puts(line, "\\\"");
    }
    strbuf_putc(line, '"');
}

static void emit(struct strbuf *line)
{
    strbuf_puts(line, format == LOG_FORMAT_JSON ? "}\n" : "\n");
    if (!strbuf_failed(line) && write(STDERR_FILENO, line->data, line->len) < 0) {
        /* Nowhere left to report a failed log write. */
    }
    strbuf_free(line);
}

void log_at(enum log_level level, const char *file, int lineno, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    struct strbuf msg, line;
    strbuf_init(&msg);
    strbuf_init(&line);
    va_list ap;
    va_start(ap, fmt);
    strbuf_vprintf(&msg, fmt, ap);
    va_end(ap);
    put_header(&line, level, file, lineno);
    put_message(&line, msg.data ? msg.data : "", msg.data ? msg.len : 0);
    strbuf_free(&msg);
    emit(&line);
}

void log_fields_at(enum log_level level, const char *file, int lineno, const char *msg, ...)
{
    if (!log_enabled(level))
        return;
    struct strbuf line;
    strbuf_init(&line);
    put_header(&line, level, file, lineno);
    put_message(&line, msg, strlen(msg));
    va_list ap;
    va_start(ap, msg);
    for (const char *key = va_arg(ap, const char *); key; key = va_arg(ap, const char *))
        put_field(&line, key, va_arg(ap, const char *));
    va_end(ap);
    emit(&line);
}
