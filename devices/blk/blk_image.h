/* A drive image for the block device: a raw file (or block device) read and
 * written in place, read-only, or copy-on-write over a private overlay.
 *
 * Copy-on-write: the image is opened O_RDONLY and never written. Writes go
 * to a sparse overlay file of the same size, tracked in 4 KiB blocks by a
 * bitmap held in memory: a block is read from the overlay once written,
 * from the image before. A copy-on-write drive may be larger than its
 * image (blk_opts.size): past the image's end it reads zeros until written,
 * and only what the guest writes there takes host disk. A write covering part of a block first copies the
 * block up from the image. Every drive has its own overlay, so VMs sharing
 * one image never see each other's writes.
 *
 * Images are locked with flock(2): shared for read-only and copy-on-write
 * use, exclusive for writing in place, so a second VM cannot write an image
 * another one is using.
 *
 * Offsets and lengths are bytes; callers (virtio-blk) turn sectors into
 * bytes. Not thread-safe: one request at a time.
 */
#ifndef TVM_BLK_IMAGE_H
#define TVM_BLK_IMAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "devices/virtio/fd_watch.h"
#include "vmm/core/err.h"

#define BLK_SECTOR 512     /* bytes per sector; image sizes are multiples */
#define BLK_COW_BLOCK 4096 /* copy-on-write granularity, bytes */

/* How to open a drive (strings borrowed for the call only). */
struct blk_opts {
	const char *path;         /* image file or block device, required */
	const char *id;           /* serial for VIRTIO_BLK_T_GET_ID, at most 20 bytes; NULL: none */
	bool read_only;           /* open O_RDONLY, guest writes fail; wins over cow */
	bool cow;                 /* copy-on-write over a private overlay (see above) */
	const char *overlay_path; /* cow: create the overlay here (must not exist) and keep it
				   * after exit; NULL: an unlinked temporary file */
	const char *overlay_dir;  /* cow, no overlay_path: directory for the temporary file;
				   * NULL: $TMPDIR, else /tmp */
	uint64_t overlay_limit;   /* cow: most bytes of the disk the overlay may hold, counted in
				   * whole 4 KiB blocks (rounded down); 0: the drive's size (what
				   * the guest can fill, so its file system is full first) */
	uint64_t size;            /* cow: bytes the guest sees, a multiple of 512 and at least
				   * the image's size (past its end the drive reads zeros until
				   * written); 0: the image's size */
	/* virtio-blk only (devices/blk/virtio_blk.h): */
	struct tvm_rate_limit limit; /* data bytes and requests; zero: none */
	struct fd_watch_ops io;      /* with a limit: its timer's watch, the queue's kick */
	uint64_t (*clock)(void);     /* NULL: CLOCK_MONOTONIC (tests: a fake clock) */
};

struct blk_image {
	int fd;  /* the image */
	int ofd; /* cow: overlay, else -1 */
	bool read_only;
	bool cow;
	bool keep_overlay;  /* overlay at a user path: flush syncs it */
	uint64_t size;      /* bytes, a positive multiple of BLK_SECTOR */
	uint64_t base_size; /* bytes of the image file itself (cow: <= size) */
	/* Copy-on-write state. */
	uint64_t *map;         /* bit per BLK_COW_BLOCK block: lives in the overlay */
	uint64_t nblocks;      /* blocks covering size (the last may be partial) */
	uint64_t in_overlay;   /* bits set in map */
	uint64_t limit_blocks; /* most bits that may be set (default: nblocks) */
	struct iovec *tmp;     /* IOV_MAX entries for per-run slices of a request */
};

/* Open the drive o->path. The size must be a positive multiple of 512
 * bytes (images of other sizes are rejected, not rounded). Returns 0 or
 * -errno with "drive PATH: reason" in e: -ENOENT/-EACCES (open), -EBUSY
 * (locked by another user), -EINVAL (size, or o->size on a drive that is
 * not copy-on-write or smaller than the image), -EEXIST (overlay_path
 * exists). */
int blk_image_open(struct blk_image *im, const struct blk_opts *o, struct tvm_err *e);
void blk_image_close(struct blk_image *im);

/* Read/write the bytes of iov[0..n) (n <= IOV_MAX) at offset off. The whole
 * range must lie inside the image: -ERANGE (nothing done) otherwise.
 * iov may be modified. Writes on a read-only image: -EROFS. Returns 0 or
 * -errno (-ENOSPC: overlay limit reached, nothing written). */
int blk_image_read(struct blk_image *im, struct iovec *iov, int n, uint64_t off);
int blk_image_write(struct blk_image *im, struct iovec *iov, int n, uint64_t off);

/* Make completed writes durable (fdatasync of the file written; nothing
 * for read-only images and temporary overlays). */
int blk_image_flush(struct blk_image *im);

/* Deallocate [off, off + len) where possible; contents afterwards are
 * unspecified (old data or zeroes). Copy-on-write: overlay blocks fully
 * inside the range go back to reading the image. Same range rules. */
int blk_image_discard(struct blk_image *im, uint64_t off, uint64_t len);

/* Make [off, off + len) read as zeroes (hole punched when the file system
 * can, else zeroes written). Copy-on-write: counts against the limit. */
int blk_image_write_zeroes(struct blk_image *im, uint64_t off, uint64_t len);

/* Snapshot of a copy-on-write drive: write the overlay's blocks into
 * data_fd (a new file, made im->size bytes long, sparse) and give the block
 * map (one bit per BLK_COW_BLOCK block, *nwords 64-bit words, borrowed
 * from im). Returns 0 or -errno (-EINVAL: not copy-on-write). */
int blk_image_export(struct blk_image *im, int data_fd, const uint64_t **map, uint64_t *nwords);

/* Restore: fill the fresh overlay of copy-on-write im from data_fd (made by
 * blk_image_export for an image of the same size) with the blocks set in
 * map. Returns 0, -EINVAL (not copy-on-write, wrong map length, bits past
 * the end, data file of another size), -ENOSPC (over the overlay limit) or
 * -errno of the copy. */
int blk_image_import(struct blk_image *im, int data_fd, const uint64_t *map, uint64_t nwords);

#endif
