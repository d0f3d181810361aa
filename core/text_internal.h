/* Private to core/: which characters of a model's text may reach a terminal as they are,
 * shared by the escaping of messages (text.c) and the JSON writer (json.c). */
#ifndef PP_CORE_TEXT_INTERNAL_H
#define PP_CORE_TEXT_INTERNAL_H

#include <stddef.h>

/* The character at p (p[0] != 0): returns its length in bytes, 0 when p[0] does not start
 * well-formed UTF-8 (a stray continuation byte, an overlong form, a surrogate, past
 * U+10FFFF, cut short); *cp is its code point and *safe 1 when it may be printed as is:
 * not a C0 control (newline and tab are, with keep_layout), DEL, a C1 control
 * (U+0080..U+009F) or a bidirectional override or isolate (U+202A..U+202E,
 * U+2066..U+2069), which reorder what a terminal shows around them. */
static inline size_t text_char(const unsigned char *p, int keep_layout, unsigned *cp, int *safe)
{
    unsigned c = p[0];
    if (c < 0x80) {
        *cp = c;
        *safe = (c >= 0x20 && c != 0x7f) || (keep_layout && (c == '\n' || c == '\t'));
        return 1;
    }
    size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!n) return 0;
    unsigned v = c & (0x7fu >> n);
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;   /* also stops at the terminating NUL */
        v = v << 6 | (p[i] & 0x3fu);
    }
    static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_cp[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    *safe = v > 0x9f && !(v >= 0x202a && v <= 0x202e) && !(v >= 0x2066 && v <= 0x2069);
    return n;
}

#endif
