/* The agent's root file system growth (guest/agent_disk.c): superblock
 * parsing and the new block count, on hand-made superblocks and, where
 * mke2fs is installed, on a real image made as tools/build-rootfs.sh does. */
#include <check.h>
#include <stdarg.h>
#include <stdlib.h>

#include "guest/agent_disk.c"
#include "tests/unit.h"

void agent_log(const char *fmt, ...)
{
	(void)fmt;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* A superblock of blocks blocks of 1024 << log_bs bytes. */
static void make_sb(uint8_t *sb, uint32_t log_bs, uint64_t blocks, uint32_t incompat)
{
	memset(sb, 0, EXT4_SB_SIZE);
	sb[SB_MAGIC] = 0x53;
	sb[SB_MAGIC + 1] = 0xef;
	put32(sb + SB_LOG_BLOCK_SIZE, log_bs);
	put32(sb + SB_BLOCKS_LO, (uint32_t)blocks);
	put32(sb + SB_BLOCKS_HI, (uint32_t)(blocks >> 32));
	put32(sb + SB_INCOMPAT, incompat);
	memcpy(sb + SB_VOLUME_NAME, "tinyvmm-root", 12);
}

START_TEST(parse_fields)
{
	uint8_t sb[EXT4_SB_SIZE];
	struct ext4_geom g;

	make_sb(sb, 2, 0x100012345ull, INCOMPAT_64BIT);
	ck_assert(disk_ext4_parse(sb, sizeof(sb), &g));
	ck_assert_uint_eq(g.block_size, 4096);
	ck_assert_uint_eq(g.blocks, 0x100012345ull);
	ck_assert(g.is_64bit && g.resizable);
	ck_assert_str_eq(g.label, DISK_ROOT_LABEL);

	/* Without the 64bit feature the high word is not a count. */
	make_sb(sb, 0, 0x100012345ull, 0);
	ck_assert(disk_ext4_parse(sb, sizeof(sb), &g));
	ck_assert_uint_eq(g.block_size, 1024);
	ck_assert_uint_eq(g.blocks, 0x12345);
	ck_assert(!g.is_64bit);

	/* A 16-byte label has no terminator on disk. */
	memcpy(sb + SB_VOLUME_NAME, "0123456789abcdefXYZ", 19);
	ck_assert(disk_ext4_parse(sb, sizeof(sb), &g));
	ck_assert_str_eq(g.label, "0123456789abcdef");
}
END_TEST

START_TEST(parse_rejects)
{
	uint8_t sb[EXT4_SB_SIZE];
	struct ext4_geom g;

	make_sb(sb, 2, 1000, 0);
	ck_assert(!disk_ext4_parse(sb, sizeof(sb) - 1, &g));
	sb[SB_MAGIC] = 0x54;
	ck_assert(!disk_ext4_parse(sb, sizeof(sb), &g));
	make_sb(sb, 7, 1000, 0);
	ck_assert(!disk_ext4_parse(sb, sizeof(sb), &g));
	make_sb(sb, 2, 0, 0);
	ck_assert(!disk_ext4_parse(sb, sizeof(sb), &g));

	/* Features the kernel cannot resize online. */
	make_sb(sb, 2, 1000, 0);
	put32(sb + SB_COMPAT, COMPAT_SPARSE_SUPER2);
	ck_assert(disk_ext4_parse(sb, sizeof(sb), &g));
	ck_assert(!g.resizable);
	make_sb(sb, 2, 1000, 0);
	put32(sb + SB_RO_COMPAT, RO_COMPAT_BIGALLOC);
	ck_assert(disk_ext4_parse(sb, sizeof(sb), &g));
	ck_assert(!g.resizable);
}
END_TEST

START_TEST(grow_target)
{
	struct ext4_geom g = { .block_size = 4096, .blocks = 150000, .is_64bit = true, .resizable = true };

	/* 2 GiB of 4 KiB blocks. */
	ck_assert_uint_eq(disk_grow_target(2ull << 30, &g), 524288);
	/* A partial block at the end is not used. */
	ck_assert_uint_eq(disk_grow_target((2ull << 30) + 4095, &g), 524288);
	/* Same size, smaller, or less than a block more: nothing to do. */
	ck_assert_uint_eq(disk_grow_target(150000ull * 4096, &g), 0);
	ck_assert_uint_eq(disk_grow_target(150000ull * 4096 + 4095, &g), 0);
	ck_assert_uint_eq(disk_grow_target(100ull << 20, &g), 0);
	ck_assert_uint_eq(disk_grow_target(0, &g), 0);
	ck_assert_uint_eq(disk_grow_target(150001ull * 4096, &g), 150001);

	/* 32 TiB: past 2^32 blocks only with 64bit. */
	ck_assert_uint_eq(disk_grow_target(32ull << 40, &g), 1ull << 33);
	g.is_64bit = false;
	ck_assert_uint_eq(disk_grow_target(32ull << 40, &g), UINT32_MAX);

	g.is_64bit = true;
	g.resizable = false;
	ck_assert_uint_eq(disk_grow_target(2ull << 30, &g), 0);
	g = (struct ext4_geom){ .block_size = 0, .blocks = 1, .resizable = true };
	ck_assert_uint_eq(disk_grow_target(2ull << 30, &g), 0);
}
END_TEST

/* mke2fs FEATURES on a fresh sparse 300 MiB file; parses its superblock
 * into g. False if mke2fs is not installed. */
static bool mke2fs_geom(const char *features, struct ext4_geom *g)
{
	char path[] = "/tmp/tinyvmm-test-disk-XXXXXX", cmd[512];
	uint8_t sb[EXT4_SB_SIZE];
	int fd = mkstemp(path), rc;
	bool ok;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 300 << 20), 0);
	snprintf(cmd, sizeof(cmd),
		 "PATH=$PATH:/sbin:/usr/sbin mke2fs -q -F -t ext4 -L tinyvmm-root -b 4096 -i 8192 -m 0 -O %s %s"
		 " >/dev/null 2>&1",
		 features, path);
	rc = system(cmd);
	ok = rc == 0 && pread(fd, sb, sizeof(sb), EXT4_SB_OFFSET) == (ssize_t)sizeof(sb) &&
	     disk_ext4_parse(sb, sizeof(sb), g);
	close(fd);
	unlink(path);
	return ok;
}

START_TEST(real_image)
{
	struct ext4_geom g;

	if (system("PATH=$PATH:/sbin:/usr/sbin command -v mke2fs >/dev/null") != 0)
		return;
	/* As tools/build-rootfs.sh makes the base image. */
	ck_assert(mke2fs_geom("^has_journal,resize_inode,^sparse_super2", &g));
	ck_assert_uint_eq(g.block_size, 4096);
	ck_assert_uint_eq(g.blocks, 300 * 256);
	ck_assert(g.resizable && g.is_64bit);
	ck_assert_str_eq(g.label, DISK_ROOT_LABEL);
	ck_assert_uint_eq(disk_grow_target(2ull << 30, &g), 524288);
	ck_assert_uint_eq(disk_grow_target(300ull << 20, &g), 0);

	ck_assert(mke2fs_geom("^has_journal,sparse_super2", &g));
	ck_assert(!g.resizable);
	ck_assert_uint_eq(disk_grow_target(2ull << 30, &g), 0);
}
END_TEST

static Suite *disk_suite(void)
{
	Suite *s = suite_create("agent_disk");
	TCase *tc = tcase_create("grow");

	tcase_add_test(tc, parse_fields);
	tcase_add_test(tc, parse_rejects);
	tcase_add_test(tc, grow_target);
	tcase_add_test(tc, real_image);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(disk_suite());
}
