/* The snapshot state file: container round trip, and refusal of every
 * damaged form (truncation at every length, every single-bit flip, another
 * version, section lengths past the end), of malformed sections, and of a
 * memory file of the wrong size. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit.h"
#include "vmm/core/crc32c.h"
#include "vmm/snapshot/dev_state.h"
#include "vmm/core/guest_mem.h"
#include "vmm/snapshot/snapshot_config.h"
#include "vmm/snapshot/snapshot_diff.h"
#include "vmm/snapshot/snapshot_format.h"
#include "vmm/snapshot/vcpu_state.h"

/* A small file: two sections with a few fields. */
static void small_file(struct snap_w *w)
{
	snap_w_init(w);
	snap_w_begin(w, SNAP_UART, 0);
	snap_w_u32(w, 0xdeadbeef);
	snap_w_str(w, "hello");
	snap_w_str(w, NULL);
	snap_w_end(w);
	snap_w_begin(w, SNAP_VIRTIO, 3);
	snap_w_u64(w, 0x0123456789abcdefULL);
	snap_w_end(w);
	ck_assert_int_eq(snap_w_finish(w, NULL), 0);
}

/* Recompute the CRC after editing a header field, so that the field
 * itself is what gets refused. */
static void reseal(uint8_t *p, size_t len)
{
	uint32_t c;

	memset(p + 24, 0, 4);
	c = crc32c(0, p, len);
	memcpy(p + 24, &c, 4); /* little-endian host */
}

START_TEST(crc32c_known_value)
{
	/* RFC 3720 B.4: 32 bytes of zeroes. */
	uint8_t z[32] = { 0 };

	ck_assert_uint_eq(crc32c(0, "123456789", 9), 0xe3069283);
	ck_assert_uint_eq(crc32c(0, z, sizeof(z)), 0x8a9136aa);
}
END_TEST

START_TEST(round_trip)
{
	struct snap_w w;
	struct snap_file f;
	struct snap_r r;
	char buf[16];
	const struct snap_section *s;

	small_file(&w);
	ck_assert_int_eq(snap_parse(w.p, w.len, "t", &f, NULL), 0);
	ck_assert_uint_eq(f.n, 2);
	s = snap_find(&f, SNAP_UART, 0);
	ck_assert_ptr_nonnull(s);
	snap_r_init(&r, s);
	ck_assert_uint_eq(snap_r_u32(&r), 0xdeadbeef);
	ck_assert_str_eq(snap_r_str(&r, buf, sizeof(buf)), "hello");
	ck_assert_ptr_null(snap_r_str(&r, buf, sizeof(buf)));
	ck_assert(snap_r_done(&r));
	snap_r_init(&r, snap_find(&f, SNAP_VIRTIO, 3));
	ck_assert_uint_eq(snap_r_u64(&r), 0x0123456789abcdefULL);
	ck_assert(snap_r_done(&r));
	ck_assert_ptr_null(snap_find(&f, SNAP_VIRTIO, 2));
	snap_file_free(&f);
	snap_w_free(&w);
}
END_TEST

START_TEST(reader_refuses_overruns)
{
	struct snap_w w;
	struct snap_file f;
	struct snap_r r;
	char tiny[4];

	small_file(&w);
	ck_assert_int_eq(snap_parse(w.p, w.len, "t", &f, NULL), 0);
	snap_r_init(&r, snap_find(&f, SNAP_UART, 0));
	snap_r_u32(&r);
	snap_r_str(&r, tiny, sizeof(tiny)); /* "hello" does not fit */
	ck_assert(!snap_r_done(&r));
	snap_r_init(&r, snap_find(&f, SNAP_VIRTIO, 3));
	snap_r_u64(&r);
	ck_assert_uint_eq(snap_r_u32(&r), 0); /* past the end: zero, marked bad */
	ck_assert(!snap_r_done(&r));
	snap_r_init(&r, NULL); /* a missing section is bad too */
	ck_assert(!snap_r_done(&r));
	snap_file_free(&f);
	snap_w_free(&w);
}
END_TEST

START_TEST(truncated_at_every_length)
{
	struct snap_w w;
	struct snap_file f;
	struct tvm_err e = { 0 };

	small_file(&w);
	for (size_t n = 0; n < w.len; n++) {
		uint8_t *copy = malloc(n ? n : 1); /* exact size: ASan sees any overread */

		memcpy(copy, w.p, n);
		ck_assert_int_eq(snap_parse(copy, n, "state", &f, &e), -EINVAL);
		ck_assert_ptr_nonnull(strstr(e.msg, "state: "));
		free(copy);
	}
	snap_w_free(&w);
}
END_TEST

START_TEST(every_bit_flip_refused)
{
	struct snap_w w;
	struct snap_file f;

	small_file(&w);
	for (size_t i = 0; i < w.len * 8; i++) {
		w.p[i / 8] ^= (uint8_t)(1u << (i % 8));
		ck_assert_int_lt(snap_parse(w.p, w.len, "t", &f, NULL), 0);
		w.p[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	ck_assert_int_eq(snap_parse(w.p, w.len, "t", &f, NULL), 0);
	snap_file_free(&f);
	snap_w_free(&w);
}
END_TEST

START_TEST(checksum_message)
{
	struct snap_w w;
	struct snap_file f;
	struct tvm_err e = { 0 };

	small_file(&w);
	w.p[w.len - 9] ^= 0x40;
	ck_assert_int_eq(snap_parse(w.p, w.len, "dir/state", &f, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "dir/state: checksum mismatch (file damaged)");
	snap_w_free(&w);
}
END_TEST

START_TEST(wrong_version)
{
	struct snap_w w;
	struct snap_file f;
	struct tvm_err e = { 0 };

	small_file(&w);
	w.p[8] = SNAP_VERSION + 1;
	reseal(w.p, w.len);
	ck_assert_int_eq(snap_parse(w.p, w.len, "s", &f, &e), -EPROTONOSUPPORT);
	ck_assert_ptr_nonnull(strstr(e.msg, "version"));
	snap_w_free(&w);
}
END_TEST

START_TEST(oversized_section_lengths)
{
	static const uint64_t lens[] = { UINT64_MAX, UINT64_MAX - 7, 1ULL << 40, 64, 13 };
	struct snap_w w;
	struct snap_file f;

	small_file(&w);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		uint8_t *p = malloc(w.len);

		memcpy(p, w.p, w.len);
		memcpy(p + SNAP_HEADER_SIZE + 8, &lens[i], 8); /* first section's length */
		reseal(p, w.len);
		ck_assert_int_eq(snap_parse(p, w.len, "s", &f, NULL), -EINVAL);
		free(p);
	}
	/* More sections than the file holds, and more than the cap. */
	w.p[12] = 3;
	reseal(w.p, w.len);
	ck_assert_int_eq(snap_parse(w.p, w.len, "s", &f, NULL), -EINVAL);
	w.p[12] = 0xff, w.p[13] = 0xff;
	reseal(w.p, w.len);
	ck_assert_int_eq(snap_parse(w.p, w.len, "s", &f, NULL), -EINVAL);
	snap_w_free(&w);
}
END_TEST

static void config_section(struct snap_w *w, const struct tvm_config *c)
{
	uint64_t sizes[TVM_MAX_DRIVES] = { 1 << 20 };

	snap_w_init(w);
	snap_config_write(w, c, true, "console=ttyS0", sizes);
	ck_assert_int_eq(snap_w_finish(w, NULL), 0);
}

START_TEST(config_round_trip_and_overrides)
{
	struct tvm_config c, o, out;
	struct snap_w w;
	struct snap_file f;
	struct snap_config *sc = malloc(sizeof(*sc));

	tvm_config_init(&c);
	c.kernel_path = "/k";
	c.mem_mib = 128;
	c.cpus = 2;
	c.drives[0] = (struct tvm_drive){ .path = "/base.img", .cow = 1, .id = "root" };
	c.nr_drives = 1;
	c.root_drive = 1;
	config_section(&w, &c);
	ck_assert_int_eq(snap_parse(w.p, w.len, "s", &f, NULL), 0);
	ck_assert_int_eq(snap_config_read(snap_find(&f, SNAP_CONFIG, 0), sc, NULL), 0);
	ck_assert_uint_eq(sc->mem_mib, 128);
	ck_assert_uint_eq(sc->cpus, 2);
	ck_assert_uint_eq(sc->d[0].size, 1 << 20);
	ck_assert_str_eq(sc->d[0].id, "root");
	tvm_config_init(&o);
	o.vsock_uds = "/tmp/x.sock";
	o.drives[0] = (struct tvm_drive){ .path = "/other-name.img", .limit = { .ops = { .size = 100 } } };
	o.nr_drives = 1;
	o.mem_mib = 4096; /* ignored: memory is the snapshot's */
	ck_assert_int_eq(snap_config_apply(sc, &o, &out, NULL), 0);
	ck_assert_uint_eq(out.mem_mib, 128);
	ck_assert_str_eq(out.drives[0].path, "/other-name.img");
	ck_assert_uint_eq(out.drives[0].limit.ops.size, 100); /* the caller's rate limit */
	ck_assert_int_eq(out.drives[0].cow, 1);
	ck_assert_str_eq(out.vsock_uds, "/tmp/x.sock");
	ck_assert_int_eq(out.quirks, TVM_QUIRKS_ON);
	o.nr_drives = 2;
	ck_assert_int_eq(snap_config_apply(sc, &o, &out, NULL), -EINVAL);
	/* read-only asked of a drive the snapshot has writable: refused, not
	 * quietly writable */
	struct tvm_err e = { 0 };
	o.nr_drives = 1;
	o.drives[0].read_only = 1;
	ck_assert_int_eq(snap_config_apply(sc, &o, &out, &e), -EINVAL);
	ck_assert_str_eq(e.msg,
			 "drive 0: given read-only, but the snapshot has it writable (a restore keeps a drive's mode)");
	snap_file_free(&f);
	snap_w_free(&w);
	free(sc);
}
END_TEST

/* A config section plus a SNAP_NET section for c's network, parsed back. */
static void net_sections(struct snap_w *w, struct snap_file *f, const struct tvm_config *c, struct snap_config *sc)
{
	uint64_t sizes[TVM_MAX_DRIVES] = { 0 };

	snap_w_init(w);
	snap_config_write(w, c, false, "console=ttyS0", sizes);
	snap_net_write(w, &c->net, "02:74:76:00:00:03");
	ck_assert_int_eq(snap_w_finish(w, NULL), 0);
	ck_assert_int_eq(snap_parse(w->p, w->len, "s", f, NULL), 0);
	ck_assert_int_eq(snap_config_read(snap_find(f, SNAP_CONFIG, 0), sc, NULL), 0);
	ck_assert_int_eq(snap_net_read(snap_find(f, SNAP_NET, 0), sc, NULL), 0);
}

START_TEST(net_round_trip_and_restore_rules)
{
	struct tvm_config c, o, out;
	struct snap_w w;
	struct snap_file f;
	struct snap_config *sc = malloc(sizeof(*sc));
	struct tvm_err e = { 0 };

	tvm_config_init(&c);
	c.kernel_path = "/k";
	c.net = (struct tvm_net){ .enabled = 1,
				  .tap = "tap-old",
				  .mtu = 1400,
				  .no_offload = 1,
				  .allow = { "10.0.0.0/8:443/tcp" },
				  .nr_allow = 1,
				  .guest_ip = "10.0.2.15/24" };
	net_sections(&w, &f, &c, sc);
	ck_assert(sc->net.present);
	ck_assert_str_eq(sc->net.mac, "02:74:76:00:00:03");

	/* The guest-visible device is the snapshot's; TAP and policy are the
	 * caller's, and none given means none (allow all, as at boot). */
	tvm_config_init(&o);
	o.net = (struct tvm_net){ .enabled = 1,
				  .tap = "tap-new",
				  .allow = { "192.168.0.1" },
				  .nr_allow = 1,
				  .tx = { .bytes = { .size = 1 << 20 } } };
	ck_assert_int_eq(snap_config_apply(sc, &o, &out, NULL), 0);
	ck_assert_uint_eq(out.net.tx.bytes.size, 1 << 20); /* the caller's rate limit */
	ck_assert_int_eq(out.net.enabled, 1);
	ck_assert_str_eq(out.net.tap, "tap-new");
	ck_assert_str_eq(out.net.mac, "02:74:76:00:00:03");
	ck_assert_uint_eq(out.net.mtu, 1400);
	ck_assert_int_eq(out.net.no_offload, 1);
	ck_assert_uint_eq(out.net.nr_allow, 1);
	ck_assert_str_eq(out.net.allow[0], "192.168.0.1");
	ck_assert_ptr_null(out.net.guest_ip); /* the guest has its address already */
	o.net = (struct tvm_net){ .enabled = 1 };
	ck_assert_int_eq(snap_config_apply(sc, &o, &out, NULL), 0);
	ck_assert_ptr_null(out.net.tap);
	ck_assert_uint_eq(out.net.nr_allow + out.net.nr_dns + (unsigned)out.net.deny_all, 0);

	/* No network asked for: refused, not a TAP made behind the caller's back. */
	ck_assert_int_eq(snap_config_apply(sc, NULL, &out, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "give it a TAP"));
	tvm_config_init(&o);
	ck_assert_int_eq(snap_config_apply(sc, &o, &out, NULL), -EINVAL);

	/* What the guest already has cannot be changed by a restore. */
	o.net = (struct tvm_net){ .enabled = 1, .guest_ip = "10.0.2.16/24" };
	ck_assert_int_eq(snap_config_apply(sc, &o, &out, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "come from the snapshot"));
	o.net = (struct tvm_net){ .enabled = 1, .mtu = 1300 };
	ck_assert_int_eq(snap_config_apply(sc, &o, &out, NULL), -EINVAL);
	/* A MAC of its own (a fork's child) is the caller's to give. */
	o.net = (struct tvm_net){ .enabled = 1, .mac = "02:00:00:00:00:09" };
	ck_assert_int_eq(snap_config_apply(sc, &o, &out, NULL), 0);
	ck_assert_str_eq(out.net.mac, "02:00:00:00:00:09");

	/* Without a SNAP_NET section the restore has no network and may not add one. */
	sc->net.present = false;
	o.net = (struct tvm_net){ .enabled = 1, .tap = "tap-new" };
	ck_assert_int_eq(snap_config_apply(sc, &o, &out, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "no network device"));
	ck_assert_int_eq(snap_config_apply(sc, NULL, &out, NULL), 0);
	ck_assert_int_eq(out.net.enabled, 0);
	snap_file_free(&f);
	snap_w_free(&w);
	free(sc);
}
END_TEST

/* Every truncation of the net section, values out of range: refused with
 * -EINVAL, never read past the section. */
START_TEST(net_section_hostile)
{
	struct tvm_config c;
	struct snap_w w;
	struct snap_file f;
	struct snap_config *sc = malloc(sizeof(*sc));
	const struct snap_section *s;
	struct snap_section cut;
	uint8_t *body;

	tvm_config_init(&c);
	c.net = (struct tvm_net){ .enabled = 1 };
	net_sections(&w, &f, &c, sc);
	s = snap_find(&f, SNAP_NET, 0);
	for (size_t n = 0; n < s->len; n++) {
		cut = *s;
		cut.len = n;
		body = malloc(n ? n : 1); /* exactly n bytes: ASan sees any read past them */
		memcpy(body, s->data, n);
		cut.data = body;
		ck_assert_int_eq(snap_net_read(&cut, sc, NULL), -EINVAL);
		free(body);
	}
	body = malloc(s->len);
	cut = *s;
	cut.data = body;
	memcpy(body, s->data, s->len);
	body[4] = 2; /* no_offload: not a flag */
	ck_assert_int_eq(snap_net_read(&cut, sc, NULL), -EINVAL);
	memcpy(body, s->data, s->len);
	body[2] = 1; /* MTU 65536 */
	ck_assert_int_eq(snap_net_read(&cut, sc, NULL), -EINVAL);
	memcpy(body, s->data, s->len);
	body[8] = 16; /* MAC string one short */
	ck_assert_int_eq(snap_net_read(&cut, sc, NULL), -EINVAL);
	memcpy(body, s->data, s->len);
	ck_assert_int_eq(snap_net_read(&cut, sc, NULL), 0); /* the unchanged copy parses */
	free(body);
	snap_file_free(&f);
	snap_w_free(&w);
	free(sc);
}
END_TEST

START_TEST(config_out_of_range)
{
	struct tvm_config c;
	struct snap_w w;
	struct snap_file f;
	struct snap_config *sc = malloc(sizeof(*sc));
	struct tvm_err e = { 0 };

	tvm_config_init(&c);
	c.cpus = 0;
	config_section(&w, &c);
	ck_assert_int_eq(snap_parse(w.p, w.len, "s", &f, NULL), 0);
	ck_assert_int_eq(snap_config_read(snap_find(&f, SNAP_CONFIG, 0), sc, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "out of range"));
	snap_file_free(&f);
	snap_w_free(&w);
	free(sc);
}
END_TEST

START_TEST(vcpu_section_checked)
{
	struct vcpu_state *s = calloc(1, sizeof(*s)), *back = malloc(sizeof(*back));
	struct snap_w w;
	struct snap_file f;

	s->flags = VCPU_HAS_XCRS;
	s->regs.rip = 0xffffffff81000000ULL;
	s->nmsrs = 2;
	s->msrs[0] = (struct kvm_msr_entry){ .index = 0x10, .data = 42 };
	s->msrs[1] = (struct kvm_msr_entry){ .index = 0x6e0, .data = 43 };
	snap_w_init(&w);
	vcpu_state_write(&w, 0, s);
	ck_assert_int_eq(snap_w_finish(&w, NULL), 0);
	ck_assert_int_eq(snap_parse(w.p, w.len, "s", &f, NULL), 0);
	ck_assert_int_eq(vcpu_state_read(snap_find(&f, SNAP_VCPU, 0), back, NULL), 0);
	ck_assert_uint_eq(back->regs.rip, s->regs.rip);
	ck_assert_uint_eq(back->msrs[1].data, 43);
	/* One byte short, an MSR count past the cap, unknown flags. */
	struct snap_section sec = *snap_find(&f, SNAP_VCPU, 0);
	sec.len--;
	ck_assert_int_eq(vcpu_state_read(&sec, back, NULL), -EINVAL);
	sec.len++;
	uint8_t *p = malloc(sec.len);
	memcpy(p, sec.data, sec.len);
	sec.data = p;
	uint32_t huge = VCPU_STATE_MAX_MSRS + 1;
	memcpy(p + sec.len - 4 - 2 * 12, &huge, 4);
	ck_assert_int_eq(vcpu_state_read(&sec, back, NULL), -EINVAL);
	memcpy(p, snap_find(&f, SNAP_VCPU, 0)->data, sec.len);
	p[0] = 0x80;
	ck_assert_int_eq(vcpu_state_read(&sec, back, NULL), -EINVAL);
	free(p);
	ck_assert_int_eq(vcpu_state_read(NULL, back, NULL), -EINVAL);
	snap_file_free(&f);
	snap_w_free(&w);
	free(s);
	free(back);
}
END_TEST

START_TEST(disk_map_count_checked_before_allocation)
{
	uint64_t map[2] = { 1, 2 }, *back, n;
	struct snap_w w;
	struct snap_file f;
	struct snap_section sec;
	uint8_t *p;

	snap_w_init(&w);
	dev_state_write_disk(&w, 0, map, 2);
	ck_assert_int_eq(snap_w_finish(&w, NULL), 0);
	ck_assert_int_eq(snap_parse(w.p, w.len, "s", &f, NULL), 0);
	ck_assert_int_eq(dev_state_read_disk(snap_find(&f, SNAP_DISK, 0), 2, &back, &n, NULL), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(back[1], 2);
	free(back);
	/* More words than the image has blocks for. */
	ck_assert_int_eq(dev_state_read_disk(snap_find(&f, SNAP_DISK, 0), 1, &back, &n, NULL), -EINVAL);
	/* A count far past the bytes present. */
	sec = *snap_find(&f, SNAP_DISK, 0);
	p = malloc(sec.len);
	memcpy(p, sec.data, sec.len);
	memset(p, 0xff, 8);
	sec.data = p;
	ck_assert_int_eq(dev_state_read_disk(&sec, UINT64_MAX, &back, &n, NULL), -EINVAL);
	ck_assert_ptr_null(back);
	free(p);
	snap_file_free(&f);
	snap_w_free(&w);
}
END_TEST

/* A diff of a VM restored from a diff: the pages it wrote and those the
 * old diff laid, each once, in order (either list may be empty). */
START_TEST(diff_pages_union)
{
	static const uint64_t a[] = { 0, 3, 4, 9, 200 }, b[] = { 1, 3, 9, 10, 11, 300 };
	static const uint64_t ab[] = { 0, 1, 3, 4, 9, 10, 11, 200, 300 };
	static const struct {
		const uint64_t *x, *y, *want;
		uint64_t nx, ny, n;
	} cases[] = {
		{ a, b, ab, 5, 6, 9 },   { b, a, ab, 6, 5, 9 }, { a, NULL, a, 5, 0, 5 },
		{ NULL, b, b, 0, 6, 6 }, { a, a, a, 5, 5, 5 },  { NULL, NULL, NULL, 0, 0, 0 },
	};

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t *u, n;

		ck_assert_int_eq(snap_pages_union(cases[i].x, cases[i].nx, cases[i].y, cases[i].ny, &u, &n), 0);
		ck_assert_msg(n == cases[i].n, "case %u: %llu pages, want %llu", i, (unsigned long long)n,
			      (unsigned long long)cases[i].n);
		if (n)
			ck_assert_mem_eq(u, cases[i].want, n * sizeof(*u));
		else
			ck_assert_ptr_null(u);
		free(u);
	}
}
END_TEST

START_TEST(memory_file_of_wrong_size)
{
	char path[] = "/tmp/tinyvmm-test-mem-XXXXXX";
	int fd = mkstemp(path);
	struct guest_mem m;
	struct tvm_err e = { 0 };

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 16 << 20), 0);
	close(fd);
	ck_assert_int_eq(gm_init_file(&m, path, 32 << 20, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, path));
	ck_assert_int_eq(gm_init_file(&m, path, 16 << 20, &e), 0);
	ck_assert_uint_eq(m.size, 16 << 20);
	gm_destroy(&m);
	unlink(path);
	ck_assert_int_eq(gm_init_file(&m, path, 16 << 20, &e), -ENOENT);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("snapshot_format");
	TCase *tc = tcase_create("format");

	tcase_add_test(tc, crc32c_known_value);
	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, reader_refuses_overruns);
	tcase_add_test(tc, truncated_at_every_length);
	tcase_add_test(tc, every_bit_flip_refused);
	tcase_add_test(tc, checksum_message);
	tcase_add_test(tc, wrong_version);
	tcase_add_test(tc, oversized_section_lengths);
	tcase_add_test(tc, config_round_trip_and_overrides);
	tcase_add_test(tc, config_out_of_range);
	tcase_add_test(tc, net_round_trip_and_restore_rules);
	tcase_add_test(tc, net_section_hostile);
	tcase_add_test(tc, vcpu_section_checked);
	tcase_add_test(tc, disk_map_count_checked_before_allocation);
	tcase_add_test(tc, memory_file_of_wrong_size);
	tcase_add_test(tc, diff_pages_union);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
