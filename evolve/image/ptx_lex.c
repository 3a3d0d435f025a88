/* The PTX tokenizer: identifiers (also %registers and $labels), .directives,
 * numbers, strings and single punctuation; comments and blanks skipped. */
#include "evolve/image/ptx_lex.h"

#include <string.h>

#include "evolve/image/bytes.h"

/* Character classes, by table: every token's every byte is classified. */
enum { C_START = 1, C_IDENT = 2 };
static const unsigned char classes[256] = {
    ['a' ... 'z'] = C_START | C_IDENT, ['A' ... 'Z'] = C_START | C_IDENT, ['_'] = C_START | C_IDENT,
    ['$'] = C_START | C_IDENT,         ['%'] = C_START | C_IDENT,         ['0' ... '9'] = C_IDENT,
};

static int is_ident_start(char c) { return classes[(unsigned char)c] & C_START; }
static int is_ident_char(char c) { return classes[(unsigned char)c] & C_IDENT; }

/* Skips blanks and comments; 0, or -1 for an unterminated comment. */
static int skip_space(drk_ptx_lexer *L)
{
    while (L->p < L->end) {
        char c = *L->p;
        if (c == '\n') {
            L->line++;
            L->p++;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            L->p++;
        } else if (c == '/' && L->end - L->p >= 2 && L->p[1] == '/') {
            while (L->p < L->end && *L->p != '\n')
                L->p++;
        } else if (c == '/' && L->end - L->p >= 2 && L->p[1] == '*') {
            unsigned start = L->line;
            L->p += 2;
            while (L->p < L->end && !(*L->p == '*' && L->end - L->p >= 2 && L->p[1] == '/'))
                L->line += *L->p++ == '\n';
            if (L->p >= L->end)
                return drk_fail(L->err, L->errlen, "ptx: line %u: unterminated comment", start);
            L->p += 2;
        } else {
            return 0;
        }
    }
    return 0;
}

static int lex_string(drk_ptx_lexer *L)
{
    L->p++;
    while (L->p < L->end && *L->p != '"' && *L->p != '\n' && *L->p != '\0')
        L->p += (*L->p == '\\' && L->end - L->p >= 2) ? 2 : 1;
    if (L->p >= L->end || *L->p != '"')
        return drk_fail(L->err, L->errlen, "ptx: line %u: unterminated string", L->line);
    L->p++;
    return 0;
}

int drk_ptx_next(drk_ptx_lexer *L)
{
    if (L->failed)
        return -1;
    if (skip_space(L)) {
        L->failed = 1;
        return -1;
    }
    drk_ptx_tok *t = &L->cur;
    t->s = L->p;
    t->line = L->line;
    if (L->p >= L->end || *L->p == '\0') {
        t->kind = DRK_TOK_END;
        t->n = 0;
        return 0;
    }
    char c = *L->p;
    if (c == '.' && L->end - L->p >= 2 && is_ident_start(L->p[1])) {
        t->kind = DRK_TOK_DIR;
        for (L->p++; L->p < L->end && is_ident_char(*L->p); L->p++)
            ;
    } else if (is_ident_start(c)) {
        t->kind = DRK_TOK_IDENT;
        while (L->p < L->end && is_ident_char(*L->p))
            L->p++;
    } else if (c >= '0' && c <= '9') {
        t->kind = DRK_TOK_NUM;
        while (L->p < L->end && (is_ident_char(*L->p) || *L->p == '.'))
            L->p++;
    } else if (c == '"') {
        t->kind = DRK_TOK_STR;
        if (lex_string(L)) {
            L->failed = 1;
            return -1;
        }
    } else {
        t->kind = DRK_TOK_PUNCT;
        L->p++;
    }
    t->n = (size_t)(L->p - t->s);
    return 0;
}

int drk_ptx_tok_uint(const drk_ptx_tok *t, uint64_t max, uint64_t *v)
{
    if (t->kind != DRK_TOK_NUM)
        return 0;
    uint64_t x = 0;
    size_t i = 0;
    unsigned base = 10;
    if (t->n > 2 && t->s[0] == '0' && (t->s[1] == 'x' || t->s[1] == 'X')) {
        base = 16;
        i = 2;
    }
    for (; i < t->n; i++) {
        char c = t->s[i];
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                     : base == 16 && c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : base == 16 && c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                                          : 99;
        if (d >= base || x > (max - d) / base)
            return 0;
        x = x * base + d;
    }
    *v = x;
    return 1;
}

/* The bytes a block's scan stops at. */
static const unsigned char block_stops[256] = {[0] = 1, ['\n'] = 1, ['"'] = 1, ['/'] = 1, ['{'] = 1, ['}'] = 1};

int drk_ptx_skip_block(drk_ptx_lexer *L, const char **close)
{
    size_t depth = 1;
    if (L->failed)
        return -1;
    while (L->p < L->end) {
        while (L->p < L->end && !block_stops[(unsigned char)*L->p])
            L->p++;
        if (L->p >= L->end || !*L->p)
            break;
        char c = *L->p;
        if (c == '/' && L->end - L->p >= 2 && (L->p[1] == '/' || L->p[1] == '*')) {
            if (skip_space(L)) {
                L->failed = 1;
                return -1;
            }
            continue;
        }
        if (c == '"') {
            if (lex_string(L)) {
                L->failed = 1;
                return -1;
            }
            continue;
        }
        if (c == '\n')
            L->line++;
        else if (c == '{')
            depth++;
        else if (c == '}' && --depth == 0) {
            *close = L->p++;
            return drk_ptx_next(L);
        }
        L->p++;
    }
    L->cur = (drk_ptx_tok){DRK_TOK_END, L->p, 0, L->line};
    return -1;
}
