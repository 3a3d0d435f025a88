#include "tools/block_tree.h"

#include <stddef.h>

static int before(const block_tree *t, const block *a, const block *b)
{
    if (t->by_size) {
        if (a->group != b->group)
            return a->group < b->group;
        if (a->size != b->size)
            return a->size < b->size;
    }
    return a->addr < b->addr;
}

static uint64_t max3(uint64_t a, const block *l, const block *r)
{
    if (l && l->max_size > a)
        a = l->max_size;
    if (r && r->max_size > a)
        a = r->max_size;
    return a;
}

static void update(block *n) { n->max_size = max3(n->size, n->left, n->right); }

/* Splits `n` into the nodes before `key` and the rest. */
static void split(const block_tree *t, block *n, const block *key, block **l, block **r)
{
    if (!n) {
        *l = *r = NULL;
    } else if (before(t, n, key)) {
        split(t, n->right, key, &n->right, r);
        update(n);
        *l = n;
    } else {
        split(t, n->left, key, l, &n->left);
        update(n);
        *r = n;
    }
}

static block *merge(block *l, block *r)
{
    if (!l || !r)
        return l ? l : r;
    if (l->prio > r->prio) {
        l->right = merge(l->right, r);
        update(l);
        return l;
    }
    r->left = merge(l, r->left);
    update(r);
    return r;
}

static block *insert(const block_tree *t, block *root, block *n)
{
    if (!root)
        return n;
    if (n->prio > root->prio) {
        split(t, root, n, &n->left, &n->right);
        update(n);
        return n;
    }
    if (before(t, n, root))
        root->left = insert(t, root->left, n);
    else
        root->right = insert(t, root->right, n);
    update(root);
    return root;
}

void block_tree_insert(block_tree *t, block *b)
{
    /* splitmix64 of a counter: deterministic, well-spread priorities */
    uint64_t z = (t->seed += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    b->prio = z ^ (z >> 31);
    b->left = b->right = NULL;
    b->max_size = b->size;
    t->root = insert(t, t->root, b);
}

static block *remove_node(const block_tree *t, block *root, block *b)
{
    if (root == b)
        return merge(b->left, b->right);
    if (!root)
        return NULL; /* not in the tree: a caller's bug, left alone */
    if (before(t, b, root))
        root->left = remove_node(t, root->left, b);
    else
        root->right = remove_node(t, root->right, b);
    update(root);
    return root;
}

void block_tree_remove(block_tree *t, block *b)
{
    t->root = remove_node(t, t->root, b);
    b->left = b->right = NULL;
}

block *block_tree_first_fit(const block_tree *t, uint64_t size)
{
    block *n = t->root;
    if (!n || n->max_size < size)
        return NULL;
    for (;;) {
        if (n->left && n->left->max_size >= size)
            n = n->left;
        else if (n->size >= size)
            return n;
        else
            n = n->right; /* max_size says one is there */
    }
}

block *block_tree_best_fit(const block_tree *t, uint32_t group, uint64_t size)
{
    block key = {.group = group, .size = size, .addr = 0};
    block *best = NULL;
    for (block *n = t->root; n;) {
        if (before(t, n, &key)) {
            n = n->right;
        } else {
            best = n;
            n = n->left;
        }
    }
    return best && best->group == group ? best : NULL;
}
