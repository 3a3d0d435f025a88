/* Blocks of a modelled address space and a balanced tree of free blocks
 * (a treap whose nodes also carry the largest size below them), for the
 * replay's non-stitching pool models: every lookup is O(log n). */
#ifndef DRK_TOOLS_BLOCK_TREE_H
#define DRK_TOOLS_BLOCK_TREE_H

#include <stdint.h>

typedef struct block block;

struct block {
    uint64_t addr, size;
    block *prev, *next;  /* address neighbours inside one segment (NULL at its ends) */
    void *segment;       /* the owner, for models with segments */
    uint32_t group;      /* ordering group (best-fit: stream and pool) */
    int is_free;
    /* tree links, when free */
    block *left, *right;
    uint64_t prio, max_size;
};

typedef struct block_tree {
    block *root;
    int by_size; /* order by (group, size, addr); else by addr */
    uint64_t seed;
} block_tree;

void block_tree_insert(block_tree *t, block *b);
void block_tree_remove(block_tree *t, block *b);
/* The lowest-addressed block of at least `size` bytes (address order). */
block *block_tree_first_fit(const block_tree *t, uint64_t size);
/* The smallest block of `group` of at least `size` bytes, lowest address
 * first among equals (size order). */
block *block_tree_best_fit(const block_tree *t, uint32_t group, uint64_t size);
/* The largest block in the tree, 0 when empty. */
static inline uint64_t block_tree_max(const block_tree *t) { return t->root ? t->root->max_size : 0; }

#endif
