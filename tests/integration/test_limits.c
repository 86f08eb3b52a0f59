/* Disk limits end to end (issue 13: rate limiters, disk quota): one VM
 * boots the real guest with the base image as root and four scratch
 * drives, all copy-on-write:
 *   /dev/vdb  32 MiB of zeroes, bw=2M (2 MiB per second, a second's burst)
 *   /dev/vdc  32 MiB of zeroes, no limit
 *   /dev/vdd  64 MiB of zeroes, overlay limit 8 MiB, overlay kept in a file
 *   /dev/vde  8 MiB ext4, default overlay limit (the drive), overlay in a file
 *   /dev/vdf  32 MiB of zeroes, bw=256K
 * Rates are the guest's own: dd's "copied, T s" (guest clock). Nothing is
 * asserted on the host's wall clock. I/O is direct and in 1 MiB requests:
 * the guest kernel is emulated here, and 64 KiB requests keep it below
 * 0.5 MiB/s whatever the limit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integration/it_common.h"
#include "vmm/tinyvmm.h"

#define BOOT_MS 600000
#define MIB (1024.0 * 1024.0)
#define QUOTA (8ull << 20)
#define EXT4_SIZE (8ull << 20)

static struct tvm_vm *vm;
static struct tvm_config cfg;
static char dir[64], snap[128];
static char img_zero_a[128], img_zero_b[128], img_zero_c[128], img_quota[128], img_ext4[128], ovl_quota[128],
	ovl_ext4[128];

static void make_file(char *path, size_t cap, const char *name, uint64_t size)
{
	int fd;

	snprintf(path, cap, "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	close(fd);
}

static void make_ext4(void)
{
	char cmd[512];

	make_file(img_ext4, sizeof(img_ext4), "ext4.img", EXT4_SIZE);
	snprintf(cmd, sizeof(cmd), "PATH=$PATH:/sbin:/usr/sbin mkfs.ext4 -q -F -b 4096 -O ^has_journal '%s'", img_ext4);
	ck_assert_int_eq(system(cmd), 0);
}

/* The overlay file of drive dev takes at most limit bytes of the host's disk. */
static void expect_overlay_within(const char *dev, const char *path, uint64_t limit)
{
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	fprintf(stderr, "  overlay of %s: %llu bytes allocated, limit %llu\n", dev,
		(unsigned long long)st.st_blocks * 512, (unsigned long long)limit);
	ck_assert_uint_le((uint64_t)st.st_blocks * 512, limit);
}

static struct tvm_rate_limit bw(uint64_t bytes_per_s)
{
	return (struct tvm_rate_limit){ .bytes = { .size = bytes_per_s, .refill_ms = 1000 } }; /* as bw= gives */
}

static void setup(void)
{
	struct tvm_err e = { 0 };

	snprintf(dir, sizeof(dir), "/tmp/tinyvmm-it-limits-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	make_file(img_zero_a, sizeof(img_zero_a), "zero-a.img", 32ull << 20);
	make_file(img_zero_b, sizeof(img_zero_b), "zero-b.img", 32ull << 20);
	make_file(img_zero_c, sizeof(img_zero_c), "zero-c.img", 32ull << 20);
	make_file(img_quota, sizeof(img_quota), "quota.img", 64ull << 20);
	make_ext4();
	snprintf(ovl_quota, sizeof(ovl_quota), "%s/quota.overlay", dir);
	snprintf(ovl_ext4, sizeof(ovl_ext4), "%s/ext4.overlay", dir);
	snprintf(snap, sizeof(snap), "%s/snap", dir);

	tvm_config_init(&cfg);
	cfg.kernel_path = it_guest("vmlinux");
	cfg.cmdline = "console=ttyS0 reboot=k panic=-1 quiet";
	cfg.drives[0] = (struct tvm_drive){ .path = getenv("TINYVMM_ROOTFS"), .cow = 1 };
	ck_assert_msg(cfg.drives[0].path, "TINYVMM_ROOTFS is not set (run through make integration)");
	cfg.drives[1] = (struct tvm_drive){ .path = img_zero_a, .cow = 1, .limit = bw(2 << 20) };
	cfg.drives[2] = (struct tvm_drive){ .path = img_zero_b, .cow = 1 };
	cfg.drives[3] =
		(struct tvm_drive){ .path = img_quota, .cow = 1, .overlay_path = ovl_quota, .overlay_limit = QUOTA };
	cfg.drives[4] = (struct tvm_drive){ .path = img_ext4, .cow = 1, .overlay_path = ovl_ext4 };
	cfg.drives[5] = (struct tvm_drive){ .path = img_zero_c, .cow = 1, .limit = bw(256 << 10) };
	cfg.nr_drives = 6;
	cfg.root_drive = 1;
	cfg.ttl_ms = 1800000; /* whatever happens to the test, the VM goes */
	ck_assert_msg(tvm_vm_create(&cfg, &vm, &e) == 0, "create: %s", e.msg);
	ck_assert_msg(tvm_vm_start(vm, &e) == 0, "start: %s", e.msg);
}

static void teardown(void)
{
	char cmd[128];

	tvm_vm_destroy(vm);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Run the shell script as root in v; its output (both streams) in o. */
static struct tvm_job_result sh(struct tvm_vm *v, const char *script, struct it_out *o)
{
	const char *argv[] = { "sh", "-c", script, NULL };
	struct tvm_job j = { .argv = argv, .on_output = it_collect, .ctx = o, .uid = TVM_ID_ROOT, .gid = TVM_ID_ROOT };
	struct tvm_job_result r;
	struct tvm_agent *a;
	struct tvm_err e = { 0 };

	ck_assert_msg(tvm_vm_agent_connect(v, BOOT_MS, &a, &e) == 0, "agent: %s", e.msg);
	ck_assert_msg(tvm_agent_exec(a, &j, &r, &e) == 0, "exec: %s", e.msg);
	tvm_agent_close(a);
	return r;
}

/* The next job runs (the VMM and the guest are fine). */
static void expect_alive(struct tvm_vm *v)
{
	struct it_out o = { 0 };
	struct tvm_job_result r = sh(v, "echo alive", &o);

	ck_assert_int_eq(r.exit_code, 0);
	ck_assert_str_eq(it_str(&o, 1), "alive\n");
	it_out_free(&o);
}

/* Read n blocks of bs KiB of dev with O_DIRECT, after drain blocks
 * unmeasured (what the bucket holds; or a warm-up: the VM's first reads
 * are the slowest); the rate dd measured, in MiB/s, from its "BYTES bytes
 * ... copied, SECONDS s" line. */
static double read_rate(struct tvm_vm *v, const char *dev, unsigned bs, unsigned drain, unsigned n)
{
	char script[512];
	struct it_out o = { 0 };
	struct tvm_job_result r;
	const char *line;
	unsigned long long bytes;
	double secs;

	snprintf(script, sizeof(script),
		 "dd if=%s of=/dev/null bs=%uk count=%u iflag=direct 2>/dev/null; "
		 "dd if=%s of=/dev/null bs=%uk skip=%u count=%u iflag=direct 2>&1",
		 dev, bs, drain, dev, bs, drain, n);
	r = sh(v, script, &o);
	ck_assert_msg(r.exit_code == 0, "dd: %s", it_str(&o, 1));
	line = strstr(it_str(&o, 1), " bytes ");
	ck_assert_msg(line != NULL, "dd printed: %s", it_str(&o, 1));
	while (line > it_str(&o, 1) && line[-1] != '\n')
		line--;
	ck_assert_int_eq(sscanf(line, "%llu bytes", &bytes), 1);
	line = strstr(line, "copied, ");
	ck_assert_msg(line && sscanf(line, "copied, %lf s", &secs) == 1 && secs > 0, "dd printed: %s", it_str(&o, 1));
	ck_assert_uint_eq(bytes, (unsigned long long)n * bs * 1024);
	fprintf(stderr, "  %s: %llu bytes in %.2f s (guest clock): %.2f MiB/s\n", dev, bytes, secs, bytes / secs / MIB);
	it_out_free(&o);
	return bytes / secs / MIB;
}

/* A drive limited to want MiB/s read at got, an unlimited one at free_rate
 * just before: never faster than the limit, and at the limit (within 20%)
 * when the guest can read at twice that; on a host too slow or loaded for
 * that (the guest's kernel is emulated here: each request costs it
 * hundreds of ms) only the first holds, and it says so. */
static void expect_limited(double got, double free_rate, double want)
{
	ck_assert_msg(got <= 1.2 * want, "%.2f MiB/s: over the limit of %.2f", got, want);
	if (free_rate >= 2 * want)
		ck_assert_msg(got >= 0.8 * want, "%.2f MiB/s is not within 20%% of %.2f", got, want);
	else
		fprintf(stderr,
			"  unlimited reads at %.2f MiB/s: the guest cannot read fast enough here to check that "
			"%.2f MiB/s is reached\n",
			free_rate, want);
}

/* Requests the drive's limiter held, from the metrics JSON. */
static unsigned long long held(struct tvm_vm *v, const char *drive)
{
	char path[128], key[64], *json, *at, *end;
	struct tvm_err e = { 0 };
	unsigned long long n = 0;

	snprintf(path, sizeof(path), "%s/metrics.json", dir);
	ck_assert_msg(tvm_vm_write_metrics(v, path, &e) == 0, "metrics: %s", e.msg);
	json = it_slurp(path);
	snprintf(key, sizeof(key), "\"name\":\"%s\"", drive);
	at = strstr(json, key);
	ck_assert_msg(at != NULL, "no %s in %s", drive, json);
	if ((end = strstr(at + 1, "{\"name\"")))
		*end = 0; /* the next device's */
	ck_assert_msg((at = strstr(at, "\"io\":{\"throttled\":")), "no limiter of %s in %s", drive, json);
	ck_assert_int_eq(sscanf(at, "\"io\":{\"throttled\":%llu", &n), 1);
	free(json);
	return n;
}

/* bw=2M: a sequential direct read (1 MiB requests) of the limited drive
 * runs at 2 MiB/s (after the bucket's second of burst, drained first), its
 * limiter holding requests, where the same read of an unlimited drive is
 * faster. The same with bw=256K and 64 KiB requests, a rate this host's
 * guest can exceed. */
START_TEST(drive_bandwidth_limit)
{
	double free_rate = read_rate(vm, "/dev/vdc", 1024, 1, 8);
	double limited = read_rate(vm, "/dev/vdb", 1024, 3, 24);

	expect_limited(limited, free_rate, 2.0);
	if (free_rate > 2.0) {
		ck_assert_msg(free_rate > limited, "unlimited %.2f MiB/s, limited %.2f", free_rate, limited);
		ck_assert_uint_gt(held(vm, "virtio-blk1"), 0);
	}
	free_rate = read_rate(vm, "/dev/vdc", 64, 16, 32);
	expect_limited(read_rate(vm, "/dev/vdf", 64, 6, 48), free_rate, 0.25);
	ck_assert_uint_gt(held(vm, "virtio-blk5"), 0);
}
END_TEST

/* A guest writing its raw drive past the overlay limit: its writes fail
 * (EIO), the host overlay stays within the limit, the VM goes on. */
START_TEST(overlay_limit_refuses_writes)
{
	struct it_out o = { 0 };
	struct tvm_job_result r = sh(vm, "dd if=/dev/zero of=/dev/vdd bs=1M count=16 oflag=direct 2>&1", &o);

	ck_assert_int_ne(r.exit_code, 0);
	ck_assert_msg(strstr(it_str(&o, 1), "Input/output error"), "dd printed: %s", it_str(&o, 1));
	ck_assert_msg(strstr(it_str(&o, 1), "8388608 bytes"), "dd printed: %s", it_str(&o, 1)); /* 8 MiB went */
	expect_overlay_within("/dev/vdd", ovl_quota, QUOTA);
	it_out_free(&o);
	expect_alive(vm);
}
END_TEST

/* With the default limit (the drive's size) a guest filling a file
 * system gets ENOSPC from it; the host overlay holds no more than the
 * drive; the next job runs. */
START_TEST(full_disk_gets_enospc)
{
	struct it_out o = { 0 };
	struct tvm_job_result r =
		sh(vm,
		   "mkdir -p /mnt/q && mount /dev/vde /mnt/q && "
		   "dd if=/dev/zero of=/mnt/q/fill bs=1M oflag=direct 2>&1; echo dd=$?; umount /mnt/q",
		   &o);

	ck_assert_int_eq(r.exit_code, 0);
	ck_assert_msg(strstr(it_str(&o, 1), "No space left on device"), "job printed: %s", it_str(&o, 1));
	ck_assert_msg(strstr(it_str(&o, 1), "dd=1"), "job printed: %s", it_str(&o, 1));
	expect_overlay_within("/dev/vde", ovl_ext4, EXT4_SIZE);
	it_out_free(&o);
	expect_alive(vm);
}
END_TEST

/* Timer fds this process holds (the limiters' and the lifetime's). */
static unsigned timerfds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	unsigned n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d))) {
		char path[300], target[64];
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len > 0) {
			target[len] = 0;
			n += strcmp(target, "anon_inode:[timerfd]") == 0;
		}
	}
	closedir(d);
	return n;
}

/* A snapshot restored with another limit obeys the new one: 256 KiB/s
 * where 2 MiB/s was saved (low enough for any host this runs on). The
 * restored VM's limiter timer is gone with it. */
START_TEST(restored_with_new_limit)
{
	struct tvm_config o;
	struct tvm_vm *r;
	struct tvm_err e = { 0 };
	double free_rate;
	unsigned before;

	ck_assert_msg(tvm_vm_snapshot(vm, snap, &e) == 0, "snapshot: %s", e.msg);
	o = cfg;
	o.drives[1].limit = bw(256 << 10); /* less than a request: each passes, then the drive owes */
	o.drives[3].overlay_path = o.drives[4].overlay_path = NULL; /* the kept overlays are the first VM's */
	o.drives[5].limit = (struct tvm_rate_limit){ 0 };           /* keeps its saved 256K */
	before = timerfds();
	ck_assert_msg(tvm_vm_restore(&o, snap, &r, &e) == 0, "restore: %s", e.msg);
	ck_assert_msg(tvm_vm_start(r, &e) == 0, "start: %s", e.msg);
	/* Its lifetime's, vdb's limiter's and vdf's (the saved limit adopted);
	 * drives without limits have none. */
	ck_assert_uint_eq(timerfds(), before + 3);
	held(r, "virtio-blk5");
	free_rate = read_rate(r, "/dev/vdc", 1024, 1, 4);
	expect_limited(read_rate(r, "/dev/vdb", 1024, 1, 6), free_rate, 0.25);
	ck_assert_uint_gt(held(r, "virtio-blk1"), 0); /* 1 MiB requests: each one overdraws */
	tvm_vm_destroy(r);
	ck_assert_uint_eq(timerfds(), before);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("limits");
	TCase *tc = tcase_create("disk");

	tcase_set_timeout(tc, 1800);
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_test(tc, drive_bandwidth_limit);
	tcase_add_test(tc, overlay_limit_refuses_writes);
	tcase_add_test(tc, full_disk_gets_enospc);
	tcase_add_test(tc, restored_with_new_limit);
	suite_add_tcase(s, tc);
	return it_run_suite(s);
}
