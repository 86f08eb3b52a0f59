/* Growing the root file system to its drive at boot: the host may offer a
 * drive larger than the image (copy-on-write, so the room costs nothing
 * until written); the agent grows the mounted ext4 online to fill it. */
#include "guest/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/types.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* Not in the uapi headers glibc ships: fs/ext4/ext4.h. */
#define EXT4_IOC_RESIZE_FS _IOW('f', 16, __u64)

/* Superblock fields (fs/ext4/ext4.h, struct ext4_super_block), little endian. */
#define SB_BLOCKS_LO 0x04
#define SB_LOG_BLOCK_SIZE 0x18
#define SB_MAGIC 0x38
#define SB_COMPAT 0x5c
#define SB_INCOMPAT 0x60
#define SB_RO_COMPAT 0x64
#define SB_VOLUME_NAME 0x78
#define SB_BLOCKS_HI 0x150
#define EXT4_MAGIC 0xef53
#define COMPAT_SPARSE_SUPER2 0x200
#define INCOMPAT_64BIT 0x80
#define RO_COMPAT_BIGALLOC 0x200

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

bool disk_ext4_parse(const uint8_t *sb, size_t len, struct ext4_geom *g)
{
	uint32_t log_bs;

	if (len < EXT4_SB_SIZE || (sb[SB_MAGIC] | sb[SB_MAGIC + 1] << 8) != EXT4_MAGIC)
		return false;
	log_bs = le32(sb + SB_LOG_BLOCK_SIZE);
	if (log_bs > 6) /* 1 KiB .. 64 KiB */
		return false;
	*g = (struct ext4_geom){
		.block_size = 1024u << log_bs,
		.blocks = le32(sb + SB_BLOCKS_LO),
		.is_64bit = le32(sb + SB_INCOMPAT) & INCOMPAT_64BIT,
		/* The kernel refuses to resize these online. */
		.resizable = !(le32(sb + SB_COMPAT) & COMPAT_SPARSE_SUPER2) &&
			     !(le32(sb + SB_RO_COMPAT) & RO_COMPAT_BIGALLOC),
	};
	if (g->is_64bit)
		g->blocks |= (uint64_t)le32(sb + SB_BLOCKS_HI) << 32;
	memcpy(g->label, sb + SB_VOLUME_NAME, 16);
	g->label[16] = 0;
	return g->blocks > 0;
}

uint64_t disk_grow_target(uint64_t dev_bytes, const struct ext4_geom *g)
{
	uint64_t n;

	if (!g->resizable || !g->block_size)
		return 0;
	n = dev_bytes / g->block_size;
	/* Without 64bit block numbers the count must fit 32 bits. */
	if (!g->is_64bit && n > UINT32_MAX)
		n = UINT32_MAX;
	return n > g->blocks ? n : 0;
}

/* "/dev/NAME" of block device dev, from sysfs (no udev links here). */
static bool dev_path(dev_t dev, char *path, size_t len)
{
	char buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(buf, sizeof(buf), "/sys/dev/block/%u:%u/uevent", major(dev), minor(dev));
	fd = open(buf, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	p = strstr(buf, "DEVNAME=");
	if (!p)
		return false;
	p += 8;
	p[strcspn(p, "\n")] = 0;
	return (size_t)snprintf(path, len, "/dev/%s", p) < len;
}

void disk_grow_root(void)
{
	uint8_t sb[EXT4_SB_SIZE];
	struct ext4_geom g;
	char path[128];
	struct statvfs vfs;
	struct stat st;
	uint64_t dev_bytes, target;
	int fd = -1, rootfd = -1;

	if (statvfs("/", &vfs) < 0 || (vfs.f_flag & ST_RDONLY))
		return; /* a read-only drive stays as it is */
	if (stat("/", &st) < 0 || !dev_path(st.st_dev, path, sizeof(path)))
		return; /* not on a block device (initramfs, 9p...) */
	fd = open(path, O_RDONLY | O_CLOEXEC);
	/* The superblock as the mounted file system has it: its buffer lives in
	 * the device's page cache, which this read goes through. */
	if (fd < 0 || pread(fd, sb, sizeof(sb), EXT4_SB_OFFSET) != (ssize_t)sizeof(sb) ||
	    ioctl(fd, BLKGETSIZE64, &dev_bytes) < 0 || !disk_ext4_parse(sb, sizeof(sb), &g))
		goto out;
	/* Only our own images: never resize a file system we did not build
	 * (such as the host's, when the agent runs as PID 1 in a namespace). */
	if (strcmp(g.label, DISK_ROOT_LABEL))
		goto out;
	target = disk_grow_target(dev_bytes, &g);
	if (!target)
		goto out;
	rootfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0 || ioctl(rootfd, EXT4_IOC_RESIZE_FS, &target) < 0)
		agent_log("growing / from %llu to %llu blocks: %s", (unsigned long long)g.blocks,
			  (unsigned long long)target, strerror(errno));
out:
	if (rootfd >= 0)
		close(rootfd);
	if (fd >= 0)
		close(fd);
}
