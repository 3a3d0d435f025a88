#include "tools/json_read.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *start, *p, *end;
    int depth;
    json_error *err;
    int failed; /* the first error wins; later ones are consequences */
} parser;

static void fail_at(parser *ps, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void fail_at(parser *ps, const char *at, const char *fmt, ...)
{
    if (ps->failed)
        return;
    ps->failed = 1;
    size_t line = 1, col = 1;
    for (const char *q = ps->start; q < at; q++) {
        if (*q == '\n')
            line++, col = 1;
        else
            col++;
    }
    ps->err->line = line;
    ps->err->column = col;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err->msg, sizeof ps->err->msg, fmt, ap);
    va_end(ap);
}

/* The byte at `at` for a message: 'x' when printable, else its code. */
static const char *show_byte(const parser *ps, const char *at, char *buf, size_t n)
{
    if (at >= ps->end)
        snprintf(buf, n, "end of input");
    else if (*at > 0x20 && *at < 0x7f)
        snprintf(buf, n, "'%c'", *at);
    else
        snprintf(buf, n, "byte 0x%02x", (unsigned char)*at);
    return buf;
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int parse_value(parser *ps, json_value *out);

/* Growable byte buffer for a string's decoded text. */
typedef struct sbuf {
    char *b;
    size_t len, cap;
} sbuf;

static int sbuf_put(sbuf *s, const char *src, size_t n)
{
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 32;
        while (cap < s->len + n + 1)
            cap *= 2;
        char *b = realloc(s->b, cap);
        if (!b)
            return -1;
        s->b = b;
        s->cap = cap;
    }
    memcpy(s->b + s->len, src, n);
    s->len += n;
    s->b[s->len] = '\0';
    return 0;
}

static int hex4(const char *p, const char *end, unsigned *out)
{
    if (end - p < 4)
        return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return -1;
    }
    *out = v;
    return 0;
}

static size_t utf8_encode(unsigned cp, char *o)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A \u escape at ps->p (just past the 'u'), with its low half when it is a
 * surrogate pair; appends the code point as UTF-8. */
static int parse_unicode_escape(parser *ps, sbuf *s)
{
    const char *at = ps->p - 2;
    unsigned cp;
    if (hex4(ps->p, ps->end, &cp) != 0)
        return fail_at(ps, at, "invalid \\u escape (needs four hex digits)"), -1;
    ps->p += 4;
    if (cp >= 0xdc00 && cp <= 0xdfff)
        return fail_at(ps, at, "unpaired low surrogate \\u%04x", cp), -1;
    if (cp >= 0xd800 && cp <= 0xdbff) {
        unsigned lo;
        if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' || hex4(ps->p + 2, ps->end, &lo) != 0 ||
            lo < 0xdc00 || lo > 0xdfff)
            return fail_at(ps, at, "unpaired high surrogate \\u%04x", cp), -1;
        ps->p += 6;
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    char o[4];
    if (sbuf_put(s, o, utf8_encode(cp, o)) != 0)
        return fail_at(ps, at, "out of memory"), -1;
    return 0;
}

/* A string at ps->p (on the opening quote). */
static int parse_string(parser *ps, char **out, size_t *out_len)
{
    const char *open = ps->p++;
    sbuf s = {0};
    if (sbuf_put(&s, "", 0) != 0)
        return fail_at(ps, open, "out of memory"), -1;
    for (;;) {
        /* Copy the run of plain bytes up to the next quote, escape or
         * control character in one go. */
        const char *run = ps->p;
        while (ps->p < ps->end && *ps->p != '"' && *ps->p != '\\' && (unsigned char)*ps->p >= 0x20)
            ps->p++;
        if (sbuf_put(&s, run, (size_t)(ps->p - run)) != 0) {
            fail_at(ps, run, "out of memory");
            break;
        }
        if (ps->p >= ps->end) {
            fail_at(ps, open, "unterminated string");
            break;
        }
        char c = *ps->p;
        if (c == '"') {
            ps->p++;
            *out = s.b;
            *out_len = s.len;
            return 0;
        }
        if (c != '\\') {
            fail_at(ps, ps->p, "control character 0x%02x in a string (must be escaped)", (unsigned char)c);
            break;
        }
        if (ps->p + 1 >= ps->end) {
            fail_at(ps, open, "unterminated string");
            break;
        }
        char e = ps->p[1], lit;
        ps->p += 2;
        switch (e) {
        case '"': lit = '"'; break;
        case '\\': lit = '\\'; break;
        case '/': lit = '/'; break;
        case 'b': lit = '\b'; break;
        case 'f': lit = '\f'; break;
        case 'n': lit = '\n'; break;
        case 'r': lit = '\r'; break;
        case 't': lit = '\t'; break;
        case 'u':
            if (parse_unicode_escape(ps, &s) != 0)
                goto error;
            continue;
        default: {
            char b[24];
            fail_at(ps, ps->p - 2, "invalid escape \\%s", show_byte(ps, ps->p - 1, b, sizeof b));
            goto error;
        }
        }
        if (sbuf_put(&s, &lit, 1) != 0) {
            fail_at(ps, ps->p - 2, "out of memory");
            break;
        }
    }
error:
    free(s.b);
    return -1;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int parse_number(parser *ps, json_value *out)
{
    const char *s = ps->p, *q = s;
    int integer = 1, negative = 0;
    if (*q == '-')
        q++, negative = 1;
    if (q < ps->end && *q == '0')
        q++;
    else if (q < ps->end && is_digit(*q))
        while (q < ps->end && is_digit(*q))
            q++;
    else
        return fail_at(ps, s, "invalid number"), -1;
    if (q < ps->end && *q == '.') {
        q++, integer = 0;
        if (q >= ps->end || !is_digit(*q))
            return fail_at(ps, q, "invalid number (digits must follow '.')"), -1;
        while (q < ps->end && is_digit(*q))
            q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        q++, integer = 0;
        if (q < ps->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= ps->end || !is_digit(*q))
            return fail_at(ps, q, "invalid number (digits must follow the exponent)"), -1;
        while (q < ps->end && is_digit(*q))
            q++;
    }
    size_t n = (size_t)(q - s);
    /* strtod needs a terminated copy; the input need not be terminated. */
    char small[64], *buf = n < sizeof small ? small : malloc(n + 1);
    if (!buf)
        return fail_at(ps, s, "out of memory"), -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    out->type = JSON_NUMBER;
    out->u.num.d = strtod(buf, NULL);
    out->u.num.u = 0;
    out->u.num.is_u64 = 0;
    if (buf != small)
        free(buf);
    if (integer && !negative) {
        /* Digits only: exact, so counters above 2^53 keep every unit. */
        uint64_t v = 0;
        int overflow = 0;
        for (const char *d = s; d < q; d++) {
            unsigned digit = (unsigned)(*d - '0');
            if (v > (UINT64_MAX - digit) / 10)
                overflow = 1;
            v = v * 10 + digit;
        }
        out->u.num.u = v;
        out->u.num.is_u64 = !overflow;
    } else if (out->u.num.d >= 0 && out->u.num.d < 18446744073709551616.0 &&
               out->u.num.d == (double)(uint64_t)out->u.num.d) {
        /* 1e3, 2.0, -0: integral, as exact as the double is. */
        out->u.num.u = (uint64_t)out->u.num.d;
        out->u.num.is_u64 = 1;
    }
    ps->p = q;
    return 0;
}

static int parse_array(parser *ps, json_value *out)
{
    const char *open = ps->p++;
    json_value *items = NULL;
    size_t count = 0, cap = 0;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        goto done;
    }
    for (;;) {
        if (count == cap) {
            size_t ncap = cap ? cap * 2 : 4;
            json_value *n = realloc(items, ncap * sizeof *n);
            if (!n) {
                fail_at(ps, ps->p, "out of memory");
                goto error;
            }
            items = n, cap = ncap;
        }
        if (parse_value(ps, &items[count]) != 0)
            goto error;
        count++;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == ']') {
            ps->p++;
            break;
        }
        char b[24];
        if (ps->p >= ps->end)
            fail_at(ps, open, "unterminated array");
        else
            fail_at(ps, ps->p, "expected ',' or ']' after an array item, found %s",
                    show_byte(ps, ps->p, b, sizeof b));
        goto error;
    }
done:
    out->type = JSON_ARRAY;
    out->u.arr.items = items;
    out->u.arr.count = count;
    return 0;
error:
    for (size_t i = 0; i < count; i++)
        json_free(&items[i]);
    free(items);
    return -1;
}

static int parse_object(parser *ps, json_value *out)
{
    const char *open = ps->p++;
    json_member *members = NULL;
    size_t count = 0, cap = 0;
    char b[24];
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        goto done;
    }
    for (;;) {
        skip_ws(ps);
        if (ps->p >= ps->end) {
            fail_at(ps, open, "unterminated object");
            goto error;
        }
        if (*ps->p != '"') {
            fail_at(ps, ps->p, "expected a string key, found %s", show_byte(ps, ps->p, b, sizeof b));
            goto error;
        }
        if (count == cap) {
            size_t ncap = cap ? cap * 2 : 4;
            json_member *n = realloc(members, ncap * sizeof *n);
            if (!n) {
                fail_at(ps, ps->p, "out of memory");
                goto error;
            }
            members = n, cap = ncap;
        }
        json_member *m = &members[count];
        if (parse_string(ps, &m->key, &m->key_len) != 0)
            goto error;
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') {
            fail_at(ps, ps->p, "expected ':' after an object key, found %s", show_byte(ps, ps->p, b, sizeof b));
            free(m->key);
            goto error;
        }
        ps->p++;
        if (parse_value(ps, &m->value) != 0) {
            free(m->key);
            goto error;
        }
        count++;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == '}') {
            ps->p++;
            break;
        }
        if (ps->p >= ps->end)
            fail_at(ps, open, "unterminated object");
        else
            fail_at(ps, ps->p, "expected ',' or '}' after an object member, found %s",
                    show_byte(ps, ps->p, b, sizeof b));
        goto error;
    }
done:
    out->type = JSON_OBJECT;
    out->u.obj.members = members;
    out->u.obj.count = count;
    return 0;
error:
    for (size_t i = 0; i < count; i++) {
        free(members[i].key);
        json_free(&members[i].value);
    }
    free(members);
    return -1;
}

static int parse_literal(parser *ps, const char *word, json_type type, json_value *out)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return fail_at(ps, ps->p, "invalid literal (expected %s)", word), -1;
    ps->p += n;
    out->type = type;
    return 0;
}

static int parse_value(parser *ps, json_value *out)
{
    skip_ws(ps);
    if (ps->p >= ps->end)
        return fail_at(ps, ps->p, "unexpected end of input (expected a value)"), -1;
    int r;
    char b[24];
    switch (*ps->p) {
    case '{':
    case '[':
        if (ps->depth >= JSON_MAX_DEPTH)
            return fail_at(ps, ps->p, "nested deeper than %d levels", JSON_MAX_DEPTH), -1;
        ps->depth++;
        r = *ps->p == '{' ? parse_object(ps, out) : parse_array(ps, out);
        ps->depth--;
        return r;
    case '"':
        out->type = JSON_STRING;
        return parse_string(ps, &out->u.str.s, &out->u.str.len);
    case 't': return parse_literal(ps, "true", JSON_TRUE, out);
    case 'f': return parse_literal(ps, "false", JSON_FALSE, out);
    case 'n': return parse_literal(ps, "null", JSON_NULL, out);
    default:
        if (*ps->p == '-' || is_digit(*ps->p))
            return parse_number(ps, out);
        return fail_at(ps, ps->p, "unexpected %s (expected a value)", show_byte(ps, ps->p, b, sizeof b)), -1;
    }
}

int json_parse(const char *text, size_t len, json_value *out, json_error *err)
{
    parser ps = {text, text, text + len, 0, err, 0};
    memset(err, 0, sizeof *err);
    /* A UTF-8 byte order mark is tolerated, as editors add one. */
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        ps.p += 3;
    json_value v;
    if (parse_value(&ps, &v) != 0)
        return -1;
    skip_ws(&ps);
    if (ps.p < ps.end) {
        char b[24];
        fail_at(&ps, ps.p, "unexpected %s after the document", show_byte(&ps, ps.p, b, sizeof b));
        json_free(&v);
        return -1;
    }
    *out = v;
    return 0;
}

void json_free(json_value *v)
{
    switch (v->type) {
    case JSON_STRING:
        free(v->u.str.s);
        break;
    case JSON_ARRAY:
        for (size_t i = 0; i < v->u.arr.count; i++)
            json_free(&v->u.arr.items[i]);
        free(v->u.arr.items);
        break;
    case JSON_OBJECT:
        for (size_t i = 0; i < v->u.obj.count; i++) {
            free(v->u.obj.members[i].key);
            json_free(&v->u.obj.members[i].value);
        }
        free(v->u.obj.members);
        break;
    default:
        break;
    }
    v->type = JSON_NULL;
}

const json_value *json_get(const json_value *obj, const char *key)
{
    if (!obj || obj->type != JSON_OBJECT)
        return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < obj->u.obj.count; i++)
        if (obj->u.obj.members[i].key_len == n && memcmp(obj->u.obj.members[i].key, key, n) == 0)
            return &obj->u.obj.members[i].value;
    return NULL;
}

const char *json_type_name(json_type t)
{
    static const char *const names[] = {"null", "false", "true", "number", "string", "array", "object"};
    return t <= JSON_OBJECT ? names[t] : "?";
}

void json_put_string(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}
