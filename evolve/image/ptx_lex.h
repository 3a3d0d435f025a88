/* The PTX tokenizer both PTX readers share (ptx.c: headers; ptx_ir.c:
 * bodies). It knows comments and strings, stops at the end or at a NUL (PTX
 * stored in fatbins ends with one), and never reads past `end`. */
#ifndef DRK_EVOLVE_PTX_LEX_H
#define DRK_EVOLVE_PTX_LEX_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { DRK_TOK_END = 0, DRK_TOK_DIR, DRK_TOK_IDENT, DRK_TOK_NUM, DRK_TOK_STR, DRK_TOK_PUNCT };

typedef struct drk_ptx_tok {
    int kind;
    const char *s;
    size_t n;
    unsigned line;
} drk_ptx_tok;

typedef struct drk_ptx_lexer {
    const char *p, *end;
    unsigned line;
    drk_ptx_tok cur;
    char *err;
    size_t errlen;
    int failed;
} drk_ptx_lexer;

/* Reads the next token into L->cur: DRK_TOK_END at the end. 0, or -1 on a
 * lexical error (an unterminated comment or string; the message in L->err),
 * after which every call fails. */
int drk_ptx_next(drk_ptx_lexer *L);

/* Whether the token is exactly `s` / the punctuation `c` (inline: the
 * readers ask this of every token, mostly of literals). */
static inline int drk_ptx_is(const drk_ptx_tok *t, const char *s)
{
    size_t n = strlen(s);
    return t->n == n && memcmp(t->s, s, n) == 0;
}

static inline int drk_ptx_is_punct(const drk_ptx_tok *t, char c)
{
    return t->kind == DRK_TOK_PUNCT && t->s[0] == c;
}

/* With L->cur on '{': past its matching '}' (*close) without making tokens
 * (the same comments and strings skipped, lines counted), L->cur then the
 * token after it. -1 when the text ends first or on a lexical error. */
int drk_ptx_skip_block(drk_ptx_lexer *L, const char **close);

/* A decimal (or 0x hex) number token, at most `max`. */
int drk_ptx_tok_uint(const drk_ptx_tok *t, uint64_t max, uint64_t *v);

#endif
