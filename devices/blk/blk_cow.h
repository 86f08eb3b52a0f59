/* Copy-on-write half of blk_image (internal to devices/blk_*.c). The
 * callers in blk_image.c have checked the range and the read-only flag. */
#ifndef TVM_BLK_COW_H
#define TVM_BLK_COW_H

#include "devices/blk/blk_image.h"

/* Create the overlay and bitmap for im (im->fd and im->size set). */
int cow_open(struct blk_image *im, const struct blk_opts *o, struct tvm_err *e);
void cow_close(struct blk_image *im);

int cow_read(struct blk_image *im, struct iovec *iov, int n, uint64_t off, uint64_t len);
int cow_write(struct blk_image *im, struct iovec *iov, int n, uint64_t off, uint64_t len);
int cow_discard(struct blk_image *im, uint64_t off, uint64_t len);
int cow_write_zeroes(struct blk_image *im, uint64_t off, uint64_t len);

/* Snapshot: copy the overlay's blocks to fd (same offsets; fd sized like
 * the image), and load such a file back into a fresh overlay with the
 * block map map[0..nwords). See blk_image_export/import. */
int cow_export(struct blk_image *im, int fd);
int cow_import(struct blk_image *im, int fd, const uint64_t *map, uint64_t nwords);

/* Shared with the in-place path (blk_image.c): punch a hole, ignoring file
 * systems that cannot; and make a range read as zeroes by any means. */
int blk_punch(int fd, uint64_t off, uint64_t len);
int blk_zero_range(int fd, uint64_t off, uint64_t len);

#endif
