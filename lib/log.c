/* log.c - leveled logging; see log.h. */
#include "lib/log.h"
#include "lib/clock.h"
#include "lib/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level min_level = LOG_INFO;
static int json_format;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

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

int log_parse_format(const char *name, int *json)
{
    if (strcmp(name, "text") != 0 && strcmp(name, "json") != 0)
        return -1;
    *json = strcmp(name, "json") == 0;
    return 0;
}

void log_configure(enum log_level level, int json)
{
    min_level = level;
    json_format = json;
}

int log_enabled(enum log_level level)
{
    return level >= min_level;
}

static void format_time(char *buf, size_t size)
{
    int64_t now = clock_realtime_ns();
    time_t secs = (time_t)(now / NS_PER_S);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, size - n, ".%03dZ", (int)(now % NS_PER_S / NS_PER_MS));
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    char when[40];
    format_time(when, sizeof(when));
    struct strbuf msg, line;
    strbuf_init(&msg);
    strbuf_init(&line);
    va_list ap;
    va_start(ap, fmt);
    strbuf_vprintf(&msg, fmt, ap);
    va_end(ap);
    const char *text = msg.data ? msg.data : "";
    if (json_format) {
        strbuf_printf(&line, "{\"time\":\"%s\",\"level\":\"%s\",\"msg\":", when, level_names[level]);
        strbuf_json_string(&line, text);
        strbuf_puts(&line, "}\n");
    } else {
        /* Values come from requests and the cluster (pod names, paths):
         * escaped, none can end the line early or forge the next one. */
        strbuf_printf(&line, "%s %-5s ", when, level_names[level]);
        strbuf_text_escaped(&line, text, msg.len);
        strbuf_putc(&line, '\n');
    }
    if (!strbuf_failed(&line) && write(STDERR_FILENO, line.data, line.len) < 0) {
        /* Nowhere left to report a failed log write. */
    }
    strbuf_free(&msg);
    strbuf_free(&line);
}
