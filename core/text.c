/* Text from model files made safe for a terminal: names of nodes, tensors and dims are
 * the file's bytes, and an ESC or a broken UTF-8 sequence in one must not reach the
 * user's terminal as is. Error messages, log lines and the partition table go through here. */
#include <onnxpipe/core.h>

#include <string.h>

/* Length of the character at p if it may be printed as is, 0 if its first byte is to be
 * escaped. Kept: printable ASCII, newline and tab when keep_layout, and well-formed UTF-8
 * (no overlong forms, surrogates or code points past U+10FFFF) other than the C1 controls
 * U+0080..U+009F and the bidirectional overrides and isolates U+202A..U+202E,
 * U+2066..U+2069, which reorder what a terminal shows around them. */
static size_t printable_len(const unsigned char *p, int keep_layout)
{
    unsigned c = p[0];
    if (c < 0x80) return (c >= 0x20 && c != 0x7f) || (keep_layout && (c == '\n' || c == '\t'));
    size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!n) return 0;   /* a continuation byte, an overlong lead (0xc0, 0xc1) or past U+10FFFF */
    unsigned cp = c & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;   /* also stops at the terminating NUL */
        cp = cp << 6 | (p[i] & 0x3f);
    }
    static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    if (cp <= 0x9f || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)) return 0;
    return n;
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
