/* Text from model files made safe for a terminal: names of nodes, tensors and dims are
 * the file's bytes, and an ESC or a broken UTF-8 sequence in one must not reach the
 * user's terminal as is. Error messages, log lines and the partition table go through here. */
#include "text_internal.h"

#include <onnxpipe/core.h>
#include <onnxpipe/core_util.h>

#include <string.h>

/* Length of the character at p if it may be printed as is, 0 if its first byte is to
 * be escaped (the next bytes of an unsafe character are stray continuation bytes, so
 * they are escaped in turn). */
static size_t printable_len(const unsigned char *p, int keep_layout)
{
    unsigned cp;
    int safe;
    size_t n = text_char(p, keep_layout, &cp, &safe);
    return safe ? n : 0;
}

static const char hex[] = "0123456789abcdef";

const char *pp_text_escape(const char *s, int keep_layout, char *buf, size_t len)
{
    if (!len) return buf;
    size_t k = 0;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        size_t n = printable_len(p, keep_layout);
        if (n) {
            if (k + n >= len) break;   /* a whole character or none */
            memcpy(buf + k, p, n);
            k += n;
            p += n;
        } else {
            if (k + 4 >= len) break;
            buf[k++] = '\\', buf[k++] = 'x', buf[k++] = hex[*p >> 4], buf[k++] = hex[*p & 15];
            p++;
        }
    }
    buf[k] = '\0';
    return buf;
}

void pp_text_fputs(const char *s, int keep_layout, FILE *out)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        const unsigned char *run = p;   /* the longest printable run, written at once */
        for (size_t n; (n = printable_len(p, keep_layout)) != 0;) p += n;
        if (p > run) fwrite(run, 1, (size_t)(p - run), out);
        if (*p) {
            fprintf(out, "\\x%c%c", hex[*p >> 4], hex[*p & 15]);
            p++;
        }
    }
}
