/* What a virtio-blk device keeps in a snapshot besides its transport
 * state (devices/blk/blk_persist.c). A copy-on-write drive keeps the
 * blocks its overlay holds: a data file (the overlay's blocks at their
 * offsets, sparse, as long as the image) and the block map, one bit per
 * BLK_COW_BLOCK block. Other drives keep nothing.
 *
 * Encoded block map (all integers little endian): u64 word count n, then
 * n u64 words. Where the bytes go (which file, which section) is the
 * snapshot writer's business: they pass through a put callback.
 */
#ifndef TVM_BLK_PERSIST_H
#define TVM_BLK_PERSIST_H

#include <stddef.h>
#include <stdint.h>

#include "devices/blk/virtio_blk.h"

/* Append n bytes at p to the state being written (never fails; a writer
 * records its own errors). */
typedef void (*blk_put_fn)(void *ctx, const void *p, size_t n);

/* Words of the block map of an image of size bytes: the most a saved map
 * for such a drive may hold. */
uint64_t blk_map_words(uint64_t size);

/* Encode map[0..nwords) through put. */
void blk_map_encode(const uint64_t *map, uint64_t nwords, blk_put_fn put, void *ctx);

/* Decode the len bytes at p, holding at most max_words words. The count is
 * checked against the bytes present before anything is allocated. Returns
 * 0 with *map malloc'd (the caller frees it; a word even when *nwords is
 * 0), -EINVAL for malformed bytes or -ENOMEM, with *map NULL. */
int blk_map_decode(const uint8_t *p, size_t len, uint64_t max_words, uint64_t **map, uint64_t *nwords);

/* Save hook, with the device quiet: write the overlay's blocks into
 * data_fd (a new empty file) and give the block map (*nwords words,
 * borrowed from b, valid until its next write). Returns 0 or -errno
 * (-EINVAL: not copy-on-write). */
int virtio_blk_save_blocks(struct virtio_blk *b, int data_fd, const uint64_t **map, uint64_t *nwords);

/* Restore hook, on a freshly opened copy-on-write drive of the snapshot's
 * size: load the blocks set in map from data_fd (written by
 * virtio_blk_save_blocks). Returns 0, -EINVAL (not copy-on-write, wrong
 * map length, bits past the end, data file of another size), -ENOSPC (over
 * the overlay limit) or -errno of the copy. */
int virtio_blk_restore_blocks(struct virtio_blk *b, int data_fd, const uint64_t *map, uint64_t nwords);

#endif
