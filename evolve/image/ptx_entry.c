/* A module's PTX cut down to one kernel (ptx_entry.h). An entry runs from
 * its linkage directives (.visible, .weak) through its body's closing brace
 * or a declaration's semicolon; blocks are skipped whole, so an ".entry" in
 * a function body, comment or string is never taken for one. Header
 * directives (.version, .target) end in no semicolon, so statements are
 * not delimited otherwise. */
#include "evolve/image/ptx_entry.h"

#include <stdlib.h>
#include <string.h>

#include "evolve/image/ptx_lex.h"

static int linkage(const drk_ptx_tok *t)
{
    return t->kind == DRK_TOK_DIR && (drk_ptx_is(t, ".visible") || drk_ptx_is(t, ".weak") ||
                                      drk_ptx_is(t, ".extern") || drk_ptx_is(t, ".common"));
}

char *drk_ptx_only_entry(const char *ptx, size_t len, const char *name, size_t *out_len)
{
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    drk_ptx_lexer L = {.p = ptx, .end = ptx + len, .line = 1};
    size_t o = 0;
    const char *copied = ptx;  /* text before this is in out, or left out */
    const char *lead = NULL;   /* the first of the linkage directives just read */
    const char *entry = NULL;  /* the entry being read: where it starts */
    int named = 0, want_name = 0, found = 0, relex = 0;
    for (;;) {
        if (relex)
            relex = 0; /* L.cur is already the token after a block */
        else if (drk_ptx_next(&L) != 0)
            goto fail;
        drk_ptx_tok *t = &L.cur;
        if (t->kind == DRK_TOK_END)
            break;
        if (!entry) {
            if (linkage(t)) {
                lead = lead ? lead : t->s;
            } else if (t->kind == DRK_TOK_DIR && drk_ptx_is(t, ".entry")) {
                entry = lead ? lead : t->s;
                want_name = 1;
                lead = NULL;
            } else {
                lead = NULL;
                if (drk_ptx_is_punct(t, '{')) { /* a function's body, or any other block */
                    const char *close;
                    if (drk_ptx_skip_block(&L, &close) != 0)
                        goto fail;
                    relex = 1;
                }
            }
            continue;
        }
        if (want_name) {
            named = t->kind == DRK_TOK_IDENT && strlen(name) == t->n && memcmp(t->s, name, t->n) == 0;
            want_name = 0;
            continue;
        }
        const char *end = NULL;
        if (drk_ptx_is_punct(t, ';')) {
            end = t->s + 1;
        } else if (drk_ptx_is_punct(t, '{')) {
            const char *close;
            if (drk_ptx_skip_block(&L, &close) != 0)
                goto fail;
            end = close + 1;
            relex = 1;
            found |= named;
        }
        if (!end)
            continue;
        if (!named) { /* another kernel: its text goes */
            memcpy(out + o, copied, (size_t)(entry - copied));
            o += (size_t)(entry - copied);
            copied = end;
        }
        entry = NULL, named = 0;
    }
    if (!found)
        goto fail;
    const char *stop = memchr(copied, '\0', (size_t)(ptx + len - copied));
    size_t rest = (size_t)((stop ? stop : ptx + len) - copied);
    memcpy(out + o, copied, rest);
    o += rest;
    out[o] = '\0';
    *out_len = o;
    return out;
fail:
    free(out);
    return NULL;
}
