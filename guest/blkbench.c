/* blkbench: the test initramfs's block-device benchmark, run by test-init
 * for `tinyvmm.test=blkbench` on /dev/vda, the first drive (a scratch
 * image: it is overwritten). One process, O_DIRECT, so what is measured is
 * the virtio-blk path (guest driver + VMM), not the page cache or fork/exec.
 * Prints one line per pattern: "blkbench: <name> <MiB/s> MiB/s <IOPS> IOPS". */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* xorshift: repeatable offsets without libc's rand state. */
static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int run(int fd, const char *name, int write_, size_t bs, uint64_t span, unsigned ops, int random_, void *buf)
{
	uint64_t seed = 0x9e3779b97f4a7c15ULL, blocks = span / bs;
	double t0 = now(), dt;

	for (unsigned i = 0; i < ops; i++) {
		off_t off = (off_t)((random_ ? next(&seed) % blocks : i % blocks) * bs);
		ssize_t n = write_ ? pwrite(fd, buf, bs, off) : pread(fd, buf, bs, off);
		if (n != (ssize_t)bs) {
			printf("blkbench: %s: I/O error at %lld\n", name, (long long)off);
			return -1;
		}
	}
	if (write_)
		fdatasync(fd);
	dt = now() - t0;
	printf("blkbench: %s %.2f MiB/s %.0f IOPS\n", name, ops * (double)bs / dt / 1048576.0, ops / dt);
	return 0;
}

int main(int argc, char **argv)
{
	const char *dev = argc > 1 ? argv[1] : "/dev/vda";
	uint64_t size = 0, span;
	void *buf;
	int fd = open(dev, O_RDWR | O_DIRECT);

	if (fd < 0 || ioctl(fd, BLKGETSIZE64, &size) < 0 || size < (8 << 20)) {
		printf("blkbench: %s: cannot open or too small\n", dev);
		return 1;
	}
	if (posix_memalign(&buf, 4096, 1 << 20))
		return 1;
	memset(buf, 0x5a, 1 << 20);
	span = size < (64ULL << 20) ? size : (64ULL << 20);
	run(fd, "seq-write-1m", 1, 1 << 20, span, (unsigned)(span >> 20), 0, buf);
	run(fd, "seq-read-1m", 0, 1 << 20, span, (unsigned)(span >> 20), 0, buf);
	run(fd, "rand-read-4k", 0, 4096, span, 2000, 1, buf);
	run(fd, "rand-write-4k", 1, 4096, span, 2000, 1, buf);
	printf("blkbench: done\n");
	return 0;
}
