#include "devices/blk/blk_persist.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "devices/blk/blk_impl.h"

#define CHUNK 512 /* words converted per put */

uint64_t blk_map_words(uint64_t size)
{
	uint64_t blocks = size / BLK_COW_BLOCK + (size % BLK_COW_BLOCK != 0);

	return (blocks + 63) / 64;
}

void blk_map_encode(const uint64_t *map, uint64_t nwords, blk_put_fn put, void *ctx)
{
	uint64_t le[CHUNK];

	le[0] = htole64(nwords);
	put(ctx, le, 8);
	for (uint64_t i = 0; i < nwords;) {
		size_t n = nwords - i < CHUNK ? (size_t)(nwords - i) : CHUNK;

		for (size_t k = 0; k < n; k++)
			le[k] = htole64(map[i + k]);
		put(ctx, le, n * 8);
		i += n;
	}
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

int blk_map_decode(const uint8_t *p, size_t len, uint64_t max_words, uint64_t **map, uint64_t *nwords)
{
	uint64_t n;

	*map = NULL;
	*nwords = 0;
	if (len < 8)
		return -EINVAL;
	n = get_u64(p);
	/* Exactly n words follow: checked before allocating. */
	if (n > max_words || n != (len - 8) / 8 || (len - 8) % 8)
		return -EINVAL;
	*map = malloc(n ? n * 8 : 8);
	if (!*map)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++)
		(*map)[i] = get_u64(p + 8 + i * 8);
	*nwords = n;
	return 0;
}

int virtio_blk_save_blocks(struct virtio_blk *b, int data_fd, const uint64_t **map, uint64_t *nwords)
{
	return blk_image_export(&b->img, data_fd, map, nwords);
}

int virtio_blk_restore_blocks(struct virtio_blk *b, int data_fd, const uint64_t *map, uint64_t nwords)
{
	return blk_image_import(&b->img, data_fd, map, nwords);
}

long blk_save(void *dev, void *buf, size_t cap)
{
	return vq_throttle_save(&((struct virtio_blk *)dev)->thr, buf, cap);
}

int blk_restore(void *dev, const void *buf, size_t len)
{
	return vq_throttle_restore(&((struct virtio_blk *)dev)->thr, buf, len);
}
