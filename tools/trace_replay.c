/* `drk trace replay FILE...`: drives every allocator model with a trace's
 * ops, in one streaming pass, and compares what each had to reserve with
 * what was live; `drk trace synth` (trace_synth.c) makes traces. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "alloc/trace.h"
#include "tools/commands.h"
#include "tools/json_read.h"
#include "tools/table.h"
#include "tools/trace_models.h"

#define REPLAY_SCHEMA_VERSION 1
#define DEFAULT_PAGE_SIZE (2u << 20)

static const char replay_synopsis[] =
    "usage: drk trace replay [--json] [--page-size N] [--capacity N] [--reserve N] [--model NAME]... FILE...\n"
    "       drk trace synth [--seed N] [--ops N] [--kind gpt|random] > FILE\n";

void usage_trace(FILE *f)
{
    fputs(replay_synopsis, f);
    fputs("\n"
          "replay reads allocation traces (format: docs/alloc-trace.md; '-' is standard input) and\n"
          "replays each through every allocator model at once. Per model: peak live bytes, peak\n"
          "reserved bytes, fragmentation = 1 - peak live / peak reserved, external fragmentation\n"
          "= 1 - largest free block / free bytes when reserved first reached its peak, and OOMs.\n"
          "\n"
          "  --page-size N  growth step of first-fit (default: the trace's page_size, else 2 MiB)\n"
          "  --capacity N   device bytes a model may reserve; an allocation past it is an OOM: it is\n"
          "                 counted, dropped (its free is ignored) and the replay goes on\n"
          "  --reserve N    drk-heap keeps this many idle bytes in place before it moves pages, as\n"
          "                 DRK_STREAM_RESERVE does in the library (default 0: stitch at once)\n"
          "  --model NAME   replay only this model (repeatable)\n"
          "  --json         print JSON (schema \"drk-trace-replay\", see docs/alloc-trace.md)\n"
          "  N takes a K, M, G or T suffix (powers of 1024).\n"
          "\n"
          "models:\n",
          f);
    for (size_t i = 0; i < trace_nmodels; i++)
        fprintf(f, "  %-20s %s\n", trace_models[i]->name, trace_models[i]->what);
    fputs("\n"
          "synth writes a deterministic synthetic trace to standard output: 'random' (RMM-like\n"
          "random sizes from 256 B to 256 MiB, random frees, a bounded live set) or 'gpt' (GPT-style\n"
          "training steps with a sequence length that varies per step). Default: --kind gpt\n"
          "--seed 1 --ops 100000.\n"
          "\n"
          "Exit status 1 when a trace cannot be read or is malformed (the error names its line).\n",
          f);
}

#define usage_error(...) usage_fail("trace", replay_synopsis, __VA_ARGS__)

static int trace_parse_bytes(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    if (*end) {
        const char *units = "KMGT", *u = strchr(units, *end);
        if (!u || (end[1] && strcmp(end + 1, "iB") != 0))
            return -1;
        shift = 10 * (unsigned)(u - units + 1);
    }
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

/* -------------------------------------------------------------- replay */

typedef struct model_run {
    const trace_model_ops *ops;
    trace_model *m;
    uint64_t live, peak_live, peak_reserved;
    uint64_t free_at_peak, largest_at_peak;
    uint64_t ooms, first_oom_line;
    unsigned char *dropped; /* per slot: its alloc was an OOM */
    size_t ndropped;
} model_run;

typedef struct replay_result {
    uint64_t page_size, ops, allocs, frees, max_live, peak_live, duration_ns;
    drk_trace_header header;
    model_run runs[TRACE_MAX_MODELS];
    size_t nruns;
} replay_result;

static int mark_dropped(model_run *mr, size_t slot, unsigned char v)
{
    if (slot >= mr->ndropped) {
        size_t n = mr->ndropped ? mr->ndropped : 1024;
        while (n <= slot)
            n *= 2;
        unsigned char *p = realloc(mr->dropped, n);
        if (!p)
            return -1;
        memset(p + mr->ndropped, 0, n - mr->ndropped);
        mr->dropped = p, mr->ndropped = n;
    }
    mr->dropped[slot] = v;
    return 0;
}

/* One op into one model; -1 when the host ran out of memory. */
static int step(model_run *mr, const drk_trace_op *op, uint64_t line)
{
    if (mr->ops->clock)
        mr->ops->clock(mr->m, op->t_ns);
    if (drk_trace_is_alloc(op->kind)) {
        int rc = mr->ops->alloc(mr->m, op->slot, op->size, op->stream);
        if (rc == MODEL_NOMEM)
            return -1;
        if (rc == MODEL_OOM) {
            if (!mr->ooms++)
                mr->first_oom_line = line;
            return mark_dropped(mr, op->slot, 1);
        }
        mr->live += op->size;
        if (mr->live > mr->peak_live)
            mr->peak_live = mr->live;
    } else if (op->slot < mr->ndropped && mr->dropped[op->slot]) {
        mr->dropped[op->slot] = 0;
        return 0;
    } else {
        mr->ops->free(mr->m, op->slot, op->size, op->stream);
        mr->live -= op->size;
    }
    uint64_t reserved = mr->ops->reserved(mr->m);
    if (reserved > mr->peak_reserved) {
        mr->peak_reserved = reserved;
        mr->ops->free_space(mr->m, &mr->free_at_peak, &mr->largest_at_peak);
    }
    return 0;
}

static void free_runs(replay_result *res)
{
    for (size_t i = 0; i < res->nruns; i++) {
        if (res->runs[i].m)
            res->runs[i].ops->destroy(res->runs[i].m);
        free(res->runs[i].dropped);
        res->runs[i].m = NULL, res->runs[i].dropped = NULL;
    }
}

/* Replays `path` through `models`; 0, or -1 with `err` set. */
static int replay_file(const char *path, const trace_model_ops *const *models, size_t nmodels, uint64_t page_size,
                       uint64_t capacity, uint64_t reserve, replay_result *res, char *err, size_t errlen)
{
    memset(res, 0, sizeof *res);
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s", strerror(errno));
        return -1;
    }
    drk_trace_reader r;
    int status = -1;
    if (drk_trace_open(&r, f) != 0) {
        snprintf(err, errlen, "%s", r.error);
        goto out;
    }
    res->page_size = page_size ? page_size : r.header.page_size ? r.header.page_size : DEFAULT_PAGE_SIZE;
    if (res->page_size % MODEL_ROUND) {
        snprintf(err, errlen, "page size %" PRIu64 " is not a multiple of %u", res->page_size, MODEL_ROUND);
        goto out;
    }
    trace_model_config cfg = {.page_size = res->page_size, .capacity = capacity, .reserve = reserve};
    for (size_t i = 0; i < nmodels; i++) {
        model_run *mr = &res->runs[res->nruns++];
        mr->ops = models[i];
        if (!(mr->m = models[i]->create(&cfg))) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
    }
    drk_trace_op op;
    uint64_t live = 0;
    int got;
    while ((got = drk_trace_next(&r, &op)) > 0) {
        if (drk_trace_is_alloc(op.kind)) {
            res->allocs++;
            live += op.size;
            if (live > res->peak_live)
                res->peak_live = live;
        } else {
            res->frees++;
            live -= op.size;
        }
        for (size_t i = 0; i < res->nruns; i++)
            if (step(&res->runs[i], &op, r.line) != 0) {
                snprintf(err, errlen, "line %" PRIu64 ": out of memory", r.line);
                goto out;
            }
        res->duration_ns = op.t_ns;
    }
    if (got < 0) {
        snprintf(err, errlen, "%s", r.error);
        goto out;
    }
    res->ops = r.ops;
    res->max_live = r.max_live;
    res->header = r.header;
    status = 0;
out:
    drk_trace_close(&r);
    if (f != stdin)
        fclose(f);
    if (status != 0)
        free_runs(res);
    return status;
}

static double ratio_left(uint64_t part, uint64_t whole) { return whole ? 1.0 - (double)part / (double)whole : 0.0; }

/* --------------------------------------------------------------- output */


static void print_table(const char *path, const replay_result *res)
{
    char a[32], b[32];
    printf("%s: %" PRIu64 " ops (%" PRIu64 " allocs, %" PRIu64 " frees), at most %" PRIu64
           " live, peak live %s, page size %s\n",
           path, res->ops, res->allocs, res->frees, res->max_live, human_bytes(res->peak_live, a, sizeof a),
           human_bytes(res->page_size, b, sizeof b));
    table t;
    table_init(&t, "lrrrrr");
    table_row(&t, (const char *const[]){"model", "peak live", "peak reserved", "fragmentation",
                                        "ext. frag at peak", "OOMs"});
    for (size_t i = 0; i < res->nruns; i++) {
        const model_run *mr = &res->runs[i];
        char live[32], reserved[32], frag[32], ext[32], ooms[32];
        snprintf(frag, sizeof frag, "%.2f%%", 100 * ratio_left(mr->peak_live, mr->peak_reserved));
        snprintf(ext, sizeof ext, "%.2f%%", 100 * ratio_left(mr->largest_at_peak, mr->free_at_peak));
        snprintf(ooms, sizeof ooms, "%" PRIu64, mr->ooms);
        table_row(&t, (const char *const[]){mr->ops->name, human_bytes(mr->peak_live, live, sizeof live),
                                            human_bytes(mr->peak_reserved, reserved, sizeof reserved), frag, ext,
                                            ooms});
    }
    table_print(&t, stdout, "  ");
    table_free(&t);
    for (size_t i = 0; i < res->nruns; i++) {
        const model_run *mr = &res->runs[i];
        if (!mr->ops->calls)
            continue;
        trace_model_calls c;
        mr->ops->calls(mr->m, &c);
        printf("  %s: the allocation calls created %" PRIu64 " pages (%" PRIu64 " handles) and moved %" PRIu64
               " (%" PRIu64 " handles, %" PRIu64 " unmap calls); %" PRIu64 " made ahead, %" PRIu64
               " of them taken; %" PRIu64 " waits: %.1f ms in the driver at an H200's costs\n",
               mr->ops->name, c.pages_created, c.handles_created, c.pages_moved, c.handles_moved, c.unmap_calls,
               c.pages_made_ahead, c.pages_taken_ahead, c.waits, (double)c.driver_ns / 1e6);
    }
}

static void json_trace(const char *path, const replay_result *res, const char *error, int first)
{
    fputs(first ? "\n  {\"path\":" : ",\n  {\"path\":", stdout);
    json_put_string(stdout, path);
    fputs(",\"error\":", stdout);
    json_put_string(stdout, error);
    if (error) {
        fputs(",\"models\":[]}", stdout);
        return;
    }
    const drk_trace_header *h = &res->header;
    printf(",\"page_size\":%" PRIu64 ",\"ops\":%" PRIu64 ",\"allocs\":%" PRIu64 ",\"frees\":%" PRIu64
           ",\"max_live_allocations\":%" PRIu64 ",\"peak_live_bytes\":%" PRIu64 ",\"duration_ns\":%" PRIu64
           ",\"header\":{\"page_size\":%" PRIu64 ",\"device_bytes\":%" PRIu64 ",\"program\":",
           res->page_size, res->ops, res->allocs, res->frees, res->max_live, res->peak_live, res->duration_ns,
           h->page_size, h->device_bytes);
    json_put_string(stdout, h->program[0] ? h->program : NULL);
    fputs(",\"recorded_by\":", stdout);
    json_put_string(stdout, h->recorded_by[0] ? h->recorded_by : NULL);
    fputs("},\"models\":[", stdout);
    for (size_t i = 0; i < res->nruns; i++) {
        const model_run *mr = &res->runs[i];
        printf("%s\n    {\"name\":", i ? "," : "");
        json_put_string(stdout, mr->ops->name);
        printf(",\"peak_live_bytes\":%" PRIu64 ",\"peak_reserved_bytes\":%" PRIu64
               ",\"final_reserved_bytes\":%" PRIu64 ",\"fragmentation\":%.6f,\"free_bytes_at_peak\":%" PRIu64
               ",\"largest_free_at_peak\":%" PRIu64 ",\"external_fragmentation\":%.6f,\"ooms\":%" PRIu64
               ",\"first_oom_line\":",
               mr->peak_live, mr->peak_reserved, mr->ops->reserved(mr->m), ratio_left(mr->peak_live, mr->peak_reserved),
               mr->free_at_peak, mr->largest_at_peak, ratio_left(mr->largest_at_peak, mr->free_at_peak), mr->ooms);
        if (mr->ooms)
            printf("%" PRIu64, mr->first_oom_line);
        else
            fputs("null", stdout);
        if (mr->ops->calls) {
            trace_model_calls c;
            mr->ops->calls(mr->m, &c);
            printf(",\"calls\":{\"pages_created\":%" PRIu64 ",\"pages_moved\":%" PRIu64
                   ",\"handles_created\":%" PRIu64 ",\"handles_moved\":%" PRIu64 ",\"unmap_calls\":%" PRIu64
                   ",\"pages_made_ahead\":%" PRIu64 ",\"pages_taken_ahead\":%" PRIu64 ",\"waits\":%" PRIu64
                   ",\"driver_ns\":%" PRIu64 "}",
                   c.pages_created, c.pages_moved, c.handles_created, c.handles_moved, c.unmap_calls,
                   c.pages_made_ahead, c.pages_taken_ahead, c.waits, c.driver_ns);
        }
        fputc('}', stdout);
    }
    fputs(res->nruns ? "\n  ]}" : "]}", stdout);
}

static const trace_model_ops *find_model(const char *name)
{
    for (size_t i = 0; i < trace_nmodels; i++)
        if (strcmp(trace_models[i]->name, name) == 0)
            return trace_models[i];
    return NULL;
}

static int cmd_replay(int argc, char **argv)
{
    int json = 0, i = 1;
    uint64_t page_size = 0, capacity = 0, reserve = 0;
    const trace_model_ops *chosen[TRACE_MAX_MODELS];
    size_t nchosen = 0;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (a[0] != '-' || !a[1])
            break;
        const char *eq = strchr(a, '=');
        size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
#define IS(opt) (name_len == sizeof(opt) - 1 && strncmp(a, opt, name_len) == 0)
        const char *v = NULL;
        if (IS("--page-size") || IS("--capacity") || IS("--model") || IS("--reserve")) {
            v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
            if (!v)
                return usage_error("%.*s needs a value", (int)name_len, a);
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage_trace(stdout);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (IS("--page-size")) {
            if (trace_parse_bytes(v, &page_size) != 0 || !page_size || page_size % MODEL_ROUND)
                return usage_error("--page-size %s: not a positive multiple of %u bytes", v, MODEL_ROUND);
        } else if (IS("--capacity")) {
            if (trace_parse_bytes(v, &capacity) != 0 || !capacity)
                return usage_error("--capacity %s: not a positive number of bytes", v);
        } else if (IS("--reserve")) {
            if (trace_parse_bytes(v, &reserve) != 0)
                return usage_error("--reserve %s: not a number of bytes", v);
        } else if (IS("--model")) {
            const trace_model_ops *m = find_model(v);
            if (!m)
                return usage_error("--model %s: no such model (see drk trace --help)", v);
            int dup = 0;
            for (size_t k = 0; k < nchosen; k++)
                dup |= chosen[k] == m;
            if (!dup)
                chosen[nchosen++] = m;
        } else {
            return usage_error("unknown option '%s'", a);
        }
#undef IS
    }
    if (i >= argc)
        return usage_error("replay: no FILE given");
    const trace_model_ops *const *models = nchosen ? chosen : trace_models;
    size_t nmodels = nchosen ? nchosen : trace_nmodels;

    int status = 0, printed = 0;
    if (json)
        printf("{\"schema\":\"drk-trace-replay\",\"version\":%d,\"capacity\":%" PRIu64 ",\"traces\":[",
               REPLAY_SCHEMA_VERSION, capacity);
    for (int n = 0; i < argc; i++, n++) {
        replay_result res;
        char err[512] = "";
        if (replay_file(argv[i], models, nmodels, page_size, capacity, reserve, &res, err, sizeof err) != 0) {
            fprintf(stderr, "drk trace replay: %s: %s\n", argv[i], err);
            status = 1;
            if (json)
                json_trace(argv[i], NULL, err, n == 0);
            continue;
        }
        if (json) {
            json_trace(argv[i], &res, NULL, n == 0);
        } else {
            if (printed++)
                putchar('\n');
            print_table(argv[i], &res);
        }
        free_runs(&res);
    }
    if (json)
        fputs("\n]}\n", stdout);
    return status;
}

int cmd_trace(int argc, char **argv)
{
    if (argc < 2)
        return usage_error("replay or synth?");
    const char *sub = argv[1];
    if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0) {
        usage_trace(stdout);
        return 0;
    }
    if (strcmp(sub, "replay") == 0)
        return cmd_replay(argc - 1, argv + 1);
    if (strcmp(sub, "synth") == 0)
        return cmd_trace_synth(argc - 1, argv + 1);
    return usage_error("unknown subcommand '%s' (replay or synth)", sub);
}
