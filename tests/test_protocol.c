/* The host <-> agent wire codec (guest/protocol.c): round trips, framing
 * errors, limits and hostile payloads. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "guest/protocol.h"
#include "tests/unit.h"

static const uint8_t all_types[] = {
	TVP_HELLO,       TVP_READY,     TVP_OK,       TVP_ERROR,  TVP_EXEC,     TVP_STDIN,
	TVP_STDIN_CLOSE, TVP_STDOUT,    TVP_STDERR,   TVP_RESULT, TVP_KILL,     TVP_PUT_FILE,
	TVP_GET_FILE,    TVP_FILE_DATA, TVP_FILE_END, TVP_SEED,   TVP_SHUTDOWN, TVP_NET,
};
#define NTYPES (sizeof(all_types) / sizeof(all_types[0]))

static const char *const argv_s[] = { "/usr/bin/python3", "-c", "print('hi')", "", NULL };
static const char *const env_s[] = { "GLIBC_TUNABLES=glibc.cpu.x86_avx=0", "EMPTY=", NULL };
static const uint8_t bin[] = { 0, 1, 2, 0xff, 0, 'x' };

/* A message of the given type with every field set. */
static struct tvp_msg sample(uint8_t type)
{
	struct tvp_msg m = { .type = type, .id = 0x01020304u + type };
	struct tvp_bytes b = { bin, sizeof(bin) };

	switch (type) {
	case TVP_HELLO: m.hello = (struct tvp_hello){ TVP_VERSION, 7, tvp_cstr("tinyvmm-host 0.1") }; break;
	case TVP_READY:
		m.ready = (struct tvp_ready){ 1, TVP_CAP_SYSTEM, TVP_MAX_PAYLOAD, 123456789012ull, tvp_cstr("agent") };
		break;
	case TVP_OK: m.ok = (struct tvp_ok){ TVP_PUT_FILE, 1ull << 40 }; break;
	case TVP_ERROR: m.error = (struct tvp_error){ TVP_ERR_SPAWN, -2, tvp_cstr("execve x: No such file") }; break;
	case TVP_EXEC:
		m.flags = TVP_EXEC_STDIN_STREAM | TVP_EXEC_KEEP_GROUP;
		m.exec = (struct tvp_exec){
			.uid = 1000,
			.gid = TVP_ID_DEFAULT,
			.timeout_ms = 30000,
			.stdout_cap = 1 << 20,
			.stderr_cap = 99,
			.mem_max = 5ull << 32, /* past 32 bits: the field is a u64 */
			.pids_max = 64,
			.cwd = tvp_cstr("/home/user"),
			.argv = { .count = 4, .items = argv_s },
			.env = { .count = 2, .items = env_s },
			.stdin_data = b,
		};
		break;
	case TVP_STDIN:
	case TVP_STDOUT:
	case TVP_STDERR:
	case TVP_FILE_DATA: m.data.data = b; break;
	case TVP_RESULT:
		m.flags = TVP_RESULT_TIMED_OUT | TVP_RESULT_STDERR_TRUNC;
		m.result = (struct tvp_result){ 137, 9, 1, 2, 3, 4, 5ull << 33, 6 };
		break;
	case TVP_KILL: m.kill.signal = 15; break;
	case TVP_PUT_FILE:
		m.flags = TVP_PUT_MKDIRS;
		m.put = (struct tvp_put_file){ 0755, 0, 0, tvp_cstr("/tmp/a b/c") };
		break;
	case TVP_GET_FILE: m.get = (struct tvp_get_file){ 5u << 20, 1000, 1000, tvp_cstr("/etc/hostname") }; break;
	case TVP_FILE_END: m.file_end = (struct tvp_file_end){ 1ull << 35, 0644 }; break;
	case TVP_SEED: m.seed = (struct tvp_seed){ 1700000000123456789ull, b }; break;
	case TVP_NET: m.net = (struct tvp_net){ tvp_cstr("10.0.0.6/30,gw=10.0.0.5,mac=02:01:02:03:04:05") }; break;
	}
	return m;
}

/* Encode into a fresh malloc'd buffer. */
static uint8_t *encode(const struct tvp_msg *m, size_t *len)
{
	uint8_t *buf;

	ck_assert_int_eq(tvp_encode(m, NULL, 0, len), TVP_E_NOSPACE);
	buf = malloc(*len);
	ck_assert_int_eq(tvp_encode(m, buf, *len, len), 0);
	return buf;
}

/* Decoder + parse of one whole frame; the status of the parse. */
static int decode_one(const uint8_t *frame, size_t len, struct tvp_decoder *d, struct tvp_msg *m)
{
	struct tvp_frame f;

	tvp_decoder_init(d, 0);
	ck_assert_uint_eq(tvp_decoder_feed(d, frame, len), len);
	ck_assert_int_eq(tvp_decoder_next(d, &f), 1);
	return tvp_parse(&f, m, NULL, 0);
}

/* ---- a raw frame builder for hostile input ---- */

struct raw {
	uint8_t b[8192];
	size_t n;
};

static void raw_u32(struct raw *r, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		r->b[r->n++] = (uint8_t)(v >> (8 * i));
}

static void raw_str(struct raw *r, const char *s, size_t len)
{
	raw_u32(r, (uint32_t)len);
	memcpy(r->b + r->n, s, len);
	r->n += len;
}

static void raw_begin(struct raw *r, uint8_t type)
{
	memset(r, 0, sizeof(*r));
	r->n = TVP_HDR_SIZE;
	r->b[2] = type;
}

/* EXEC payload with the fixed fields (uid, gid, timeout, two caps, u64
 * mem_max, pids_max) and cwd "/" written. */
static void raw_exec_head(struct raw *r)
{
	raw_begin(r, TVP_EXEC);
	for (int i = 0; i < 8; i++)
		raw_u32(r, 0);
	raw_str(r, "/", 1);
}

/* Parse r as a frame; returns the status, err gets the description. */
static int raw_parse(struct raw *r, char *err, size_t errlen)
{
	struct tvp_frame f = { .type = r->b[2],
			       .flags = 0,
			       .id = 9,
			       .len = (uint32_t)(r->n - TVP_HDR_SIZE),
			       .payload = r->b + TVP_HDR_SIZE };
	struct tvp_msg m;

	return tvp_parse(&f, &m, err, errlen);
}

/* ---- tests ---- */

START_TEST(roundtrip_every_type)
{
	for (size_t i = 0; i < NTYPES; i++) {
		struct tvp_msg m = sample(all_types[i]), back;
		struct tvp_decoder d;
		size_t len, len2;
		uint8_t *a = encode(&m, &len), *b;

		ck_assert_msg(decode_one(a, len, &d, &back) == 0, "type %s", tvp_type_name(m.type));
		ck_assert_uint_eq(back.type, m.type);
		ck_assert_uint_eq(back.flags, m.flags);
		ck_assert_uint_eq(back.id, m.id);
		b = encode(&back, &len2);
		ck_assert_uint_eq(len2, len);
		ck_assert_msg(!memcmp(a, b, len), "type %s re-encodes differently", tvp_type_name(m.type));
		free(a);
		free(b);
		tvp_decoder_free(&d);
	}
}
END_TEST

START_TEST(roundtrip_fields)
{
	struct tvp_msg m = sample(TVP_EXEC), back;
	struct tvp_decoder d;
	size_t len;
	uint8_t *a = encode(&m, &len);
	char **argv, **env;

	ck_assert_int_eq(decode_one(a, len, &d, &back), 0);
	ck_assert_uint_eq(back.exec.uid, 1000);
	ck_assert_uint_eq(back.exec.gid, TVP_ID_DEFAULT);
	ck_assert_uint_eq(back.exec.timeout_ms, 30000);
	ck_assert_uint_eq(back.exec.stdout_cap, 1 << 20);
	ck_assert_uint_eq(back.exec.stderr_cap, 99);
	ck_assert_uint_eq(back.exec.mem_max, 5ull << 32);
	ck_assert_uint_eq(back.exec.pids_max, 64);
	ck_assert_uint_eq(back.exec.cwd.len, 10);
	ck_assert(!memcmp(back.exec.cwd.p, "/home/user", 10));
	ck_assert_uint_eq(back.exec.stdin_data.len, sizeof(bin));
	ck_assert(!memcmp(back.exec.stdin_data.p, bin, sizeof(bin)));
	argv = tvp_strvec_dup(&back.exec.argv);
	env = tvp_strvec_dup(&back.exec.env);
	ck_assert_ptr_nonnull(argv);
	for (int i = 0; i < 4; i++)
		ck_assert_str_eq(argv[i], argv_s[i]);
	ck_assert_ptr_null(argv[4]);
	ck_assert_str_eq(env[0], env_s[0]);
	ck_assert_str_eq(env[1], "EMPTY=");
	ck_assert_ptr_null(env[2]);
	free(argv);
	free(env);
	free(a);
	tvp_decoder_free(&d);

	m = sample(TVP_RESULT);
	a = encode(&m, &len);
	ck_assert_int_eq(decode_one(a, len, &d, &back), 0);
	ck_assert_int_eq(back.result.exit_code, 137);
	ck_assert_uint_eq(back.result.signal, 9);
	ck_assert_uint_eq(back.result.stdout_bytes, 5ull << 33);
	ck_assert_uint_eq(back.result.stderr_bytes, 6);
	free(a);
	tvp_decoder_free(&d);

	m = sample(TVP_ERROR);
	a = encode(&m, &len);
	ck_assert_int_eq(decode_one(a, len, &d, &back), 0);
	ck_assert_int_eq(back.error.sys_errno, -2);
	free(a);
	tvp_decoder_free(&d);
}
END_TEST

START_TEST(header_layout)
{
	struct tvp_msg m = { .type = TVP_KILL, .id = 0xa1b2c3d4, .kill = { 9 } };
	static const uint8_t want[] = { TVP_MAGIC, TVP_VERSION, TVP_KILL, 0, 0xd4, 0xc3, 0xb2, 0xa1,
					4,         0,           0,        0, 9,    0,    0,    0 };
	uint8_t buf[32];
	size_t len;

	ck_assert_int_eq(tvp_encode(&m, buf, sizeof(buf), &len), 0);
	ck_assert_uint_eq(len, sizeof(want));
	ck_assert(!memcmp(buf, want, len));
	/* Too small a buffer: the size needed, nothing written past it. */
	memset(buf, 0xee, sizeof(buf));
	ck_assert_int_eq(tvp_encode(&m, buf, 15, &len), TVP_E_NOSPACE);
	ck_assert_uint_eq(len, 16);
	ck_assert_uint_eq(buf[15], 0xee);
}
END_TEST

/* Every proper prefix of a frame is "need more", never a frame or error. */
START_TEST(truncated_frames_every_cut)
{
	for (size_t i = 0; i < NTYPES; i++) {
		struct tvp_msg m = sample(all_types[i]);
		size_t len;
		uint8_t *a = encode(&m, &len);

		for (size_t cut = 0; cut < len; cut++) {
			struct tvp_decoder d;
			struct tvp_frame f;

			tvp_decoder_init(&d, 0);
			ck_assert_uint_eq(tvp_decoder_feed(&d, a, cut), cut);
			ck_assert_int_eq(tvp_decoder_next(&d, &f), 0);
			ck_assert_uint_eq(tvp_decoder_feed(&d, a + cut, len - cut), len - cut);
			ck_assert_int_eq(tvp_decoder_next(&d, &f), 1);
			tvp_decoder_free(&d);
		}
		free(a);
	}
}
END_TEST

/* A payload cut short (header length agreeing) is a parse error for every
 * type with fixed fields; one extra byte is one too. */
START_TEST(truncated_payloads_every_cut)
{
	for (size_t i = 0; i < NTYPES; i++) {
		struct tvp_msg m = sample(all_types[i]), back;
		bool rest =
			m.type == TVP_STDIN || m.type == TVP_STDOUT || m.type == TVP_STDERR || m.type == TVP_FILE_DATA;
		size_t len;
		uint8_t *a = encode(&m, &len), *big = malloc(len + 1);
		struct tvp_frame f = { .type = m.type, .flags = m.flags, .payload = a + TVP_HDR_SIZE };

		for (size_t cut = 0; cut < len - TVP_HDR_SIZE; cut++) {
			f.len = (uint32_t)cut;
			ck_assert_int_eq(tvp_parse(&f, &back, NULL, 0) != 0, !rest);
		}
		memcpy(big, a, len);
		big[len] = 0;
		f.payload = big + TVP_HDR_SIZE;
		f.len = (uint32_t)(len + 1 - TVP_HDR_SIZE);
		ck_assert_int_eq(tvp_parse(&f, &back, NULL, 0), rest ? 0 : TVP_E_TRAILING);
		free(a);
		free(big);
	}
}
END_TEST

START_TEST(oversized_length)
{
	uint8_t hdr[TVP_HDR_SIZE];
	struct tvp_decoder d;
	struct tvp_frame f;
	size_t avail;

	tvp_put_header(hdr, TVP_STDIN, 0, 1, TVP_MAX_PAYLOAD + 1);
	tvp_decoder_init(&d, 0);
	tvp_decoder_feed(&d, hdr, sizeof(hdr));
	ck_assert_int_eq(tvp_decoder_next(&d, &f), TVP_E_TOO_BIG);
	ck_assert_ptr_nonnull(strstr(tvp_decoder_error(&d), "1048577"));
	/* Sticky: nothing more goes in or out, no buffer is grown. */
	ck_assert_uint_eq(tvp_decoder_feed(&d, hdr, sizeof(hdr)), 0);
	ck_assert_ptr_null(tvp_decoder_space(&d, &avail));
	ck_assert_int_eq(tvp_decoder_next(&d, &f), TVP_E_TOO_BIG);
	ck_assert_uint_le(d.cap, 64 << 10);
	tvp_decoder_free(&d);

	/* 0xffffffff, and a smaller per-decoder limit. */
	tvp_put_header(hdr, TVP_STDIN, 0, 1, 0xffffffffu);
	tvp_decoder_init(&d, 0);
	tvp_decoder_feed(&d, hdr, sizeof(hdr));
	ck_assert_int_eq(tvp_decoder_next(&d, &f), TVP_E_TOO_BIG);
	tvp_decoder_free(&d);
	tvp_put_header(hdr, TVP_STDIN, 0, 1, 101);
	tvp_decoder_init(&d, 100);
	tvp_decoder_feed(&d, hdr, sizeof(hdr));
	ck_assert_int_eq(tvp_decoder_next(&d, &f), TVP_E_TOO_BIG);
	tvp_decoder_free(&d);

	/* The encoder refuses to build one. */
	{
		uint8_t *big = calloc(1, TVP_MAX_PAYLOAD + 1);
		struct tvp_msg m = { .type = TVP_STDOUT, .data = { { big, TVP_MAX_PAYLOAD + 1 } } };
		size_t len;

		ck_assert_int_eq(tvp_encode(&m, NULL, 0, &len), TVP_E_TOO_BIG);
		m.data.data.len = TVP_MAX_PAYLOAD;
		ck_assert_int_eq(tvp_encode(&m, NULL, 0, &len), TVP_E_NOSPACE);
		ck_assert_uint_eq(len, TVP_HDR_SIZE + TVP_MAX_PAYLOAD);
		free(big);
	}
}
END_TEST

START_TEST(bad_magic_and_version)
{
	struct tvp_msg m = sample(TVP_KILL);
	struct tvp_decoder d;
	struct tvp_frame f;
	size_t len;
	uint8_t *a = encode(&m, &len);

	a[0] = 'G';
	tvp_decoder_init(&d, 0);
	tvp_decoder_feed(&d, a, len);
	ck_assert_int_eq(tvp_decoder_next(&d, &f), TVP_E_BAD_MAGIC);
	ck_assert_ptr_nonnull(strstr(tvp_decoder_error(&d), "magic"));
	tvp_decoder_free(&d);

	a[0] = TVP_MAGIC;
	a[1] = TVP_VERSION + 1;
	tvp_decoder_init(&d, 0);
	tvp_decoder_feed(&d, a, len);
	ck_assert_int_eq(tvp_decoder_next(&d, &f), TVP_E_BAD_VERSION);
	tvp_decoder_free(&d);
	free(a);
}
END_TEST

/* An unknown type is a parse error of that frame only: the stream goes on. */
START_TEST(unknown_types)
{
	struct tvp_msg m = sample(TVP_KILL), back;
	struct tvp_decoder d;
	struct tvp_frame f;
	uint8_t unk[TVP_HDR_SIZE + 2];
	char err[96];
	size_t len;
	uint8_t *a = encode(&m, &len);

	ck_assert_ptr_null(tvp_type_name(0x7f));
	ck_assert_ptr_null(tvp_type_name(0));
	ck_assert_ptr_null(tvp_type_name(0xff));
	tvp_put_header(unk, 0xff, 0, 1, 2);
	unk[TVP_HDR_SIZE] = unk[TVP_HDR_SIZE + 1] = 0;
	tvp_decoder_init(&d, 0);
	ck_assert_uint_eq(tvp_decoder_feed(&d, unk, sizeof(unk)), sizeof(unk));
	ck_assert_uint_eq(tvp_decoder_feed(&d, a, len), len);
	ck_assert_int_eq(tvp_decoder_next(&d, &f), 1);
	ck_assert_int_eq(tvp_parse(&f, &back, err, sizeof(err)), TVP_E_UNKNOWN_TYPE);
	ck_assert_str_eq(err, "unknown message type 0xff");
	ck_assert_int_eq(tvp_decoder_next(&d, &f), 1);
	ck_assert_int_eq(tvp_parse(&f, &back, NULL, 0), 0);
	ck_assert_uint_eq(back.kill.signal, 15);
	tvp_decoder_free(&d);
	free(a);

	m.type = 0x55;
	ck_assert_int_eq(tvp_encode(&m, NULL, 0, &len), TVP_E_UNKNOWN_TYPE);
}
END_TEST

START_TEST(bad_flags)
{
	struct tvp_msg m = sample(TVP_EXEC), back;
	struct tvp_frame f;
	size_t len;
	uint8_t *a;

	m.flags |= 0x80;
	ck_assert_int_eq(tvp_encode(&m, NULL, 0, &len), TVP_E_BAD_FLAGS);
	m.flags = 0;
	a = encode(&m, &len);
	f = (struct tvp_frame){ TVP_EXEC, 0x04, 1, (uint32_t)(len - TVP_HDR_SIZE), a + TVP_HDR_SIZE };
	ck_assert_int_eq(tvp_parse(&f, &back, NULL, 0), TVP_E_BAD_FLAGS);
	f.type = TVP_SHUTDOWN;
	f.flags = 1;
	f.len = 0;
	ck_assert_int_eq(tvp_parse(&f, &back, NULL, 0), TVP_E_BAD_FLAGS);
	free(a);
}
END_TEST

START_TEST(counts_over_caps)
{
	struct raw r;
	char err[160];

	/* argv: 0 entries, cap + 1 entries, a count the payload cannot hold. */
	raw_exec_head(&r);
	raw_u32(&r, 0);
	raw_u32(&r, 0);
	raw_u32(&r, 0);
	ck_assert_int_eq(raw_parse(&r, err, sizeof(err)), TVP_E_LIMIT);
	ck_assert_str_eq(err, "EXEC: argv is empty");

	raw_exec_head(&r);
	raw_u32(&r, TVP_MAX_ARGC + 1);
	ck_assert_int_eq(raw_parse(&r, err, sizeof(err)), TVP_E_LIMIT);
	ck_assert_str_eq(err, "EXEC: argv has more entries than its limit");

	raw_exec_head(&r);
	raw_u32(&r, TVP_MAX_ARGC);
	raw_str(&r, "a", 1);
	ck_assert_int_eq(raw_parse(&r, err, sizeof(err)), TVP_E_TRUNCATED);

	/* env over its cap */
	raw_exec_head(&r);
	raw_u32(&r, 1);
	raw_str(&r, "a", 1);
	raw_u32(&r, TVP_MAX_ENVC + 1);
	ck_assert_int_eq(raw_parse(&r, err, sizeof(err)), TVP_E_LIMIT);

	/* lengths over caps, including ones that would wrap an offset */
	raw_exec_head(&r);
	raw_u32(&r, 1);
	raw_u32(&r, 0xffffffffu);
	ck_assert_int_eq(raw_parse(&r, err, sizeof(err)), TVP_E_LIMIT);
	raw_exec_head(&r);
	raw_u32(&r, 1);
	raw_u32(&r, TVP_MAX_ARG_LEN);
	ck_assert_int_eq(raw_parse(&r, err, sizeof(err)), TVP_E_TRUNCATED);

	raw_begin(&r, TVP_SEED);
	raw_u32(&r, 0);
	raw_u32(&r, 0);
	raw_u32(&r, TVP_MAX_ENTROPY + 1);
	r.n += TVP_MAX_ENTROPY + 1;
	ck_assert_int_eq(raw_parse(&r, err, sizeof(err)), TVP_E_LIMIT);
	ck_assert_str_eq(err, "SEED: entropy is longer than its limit");

	raw_begin(&r, TVP_NET);
	raw_u32(&r, TVP_MAX_NET + 1);
	memset(r.b + r.n, '1', TVP_MAX_NET + 1);
	r.n += TVP_MAX_NET + 1;
	ck_assert_int_eq(raw_parse(&r, err, sizeof(err)), TVP_E_LIMIT);
	raw_begin(&r, TVP_NET);
	raw_str(&r, "10.0.0.2/30\0,gw=1.2.3.4", 23);
	ck_assert_int_eq(raw_parse(&r, err, sizeof(err)), TVP_E_BAD_STRING);

	raw_begin(&r, TVP_GET_FILE);
	raw_u32(&r, 0);
	raw_u32(&r, 0);
	raw_u32(&r, 0);
	raw_u32(&r, 0);
	raw_u32(&r, TVP_MAX_PATH + 1);
	memset(r.b + r.n, 'a', TVP_MAX_PATH + 1);
	r.b[r.n] = '/';
	r.n += TVP_MAX_PATH + 1;
	ck_assert_int_eq(raw_parse(&r, err, sizeof(err)), TVP_E_LIMIT);
}
END_TEST

START_TEST(encoder_enforces_caps)
{
	struct tvp_msg m = sample(TVP_EXEC);
	char *path = malloc(TVP_MAX_PATH + 2);
	const char **many = calloc(TVP_MAX_ARGC + 2, sizeof(char *));
	size_t len;

	memset(path, 'a', TVP_MAX_PATH + 1);
	path[0] = '/';
	path[TVP_MAX_PATH + 1] = 0;
	m.exec.cwd = tvp_cstr(path);
	ck_assert_int_eq(tvp_encode(&m, NULL, 0, &len), TVP_E_LIMIT);
	m = sample(TVP_EXEC);
	for (int i = 0; i <= TVP_MAX_ARGC; i++)
		many[i] = "x";
	m.exec.argv = (struct tvp_strvec){ .count = TVP_MAX_ARGC + 1, .items = many };
	ck_assert_int_eq(tvp_encode(&m, NULL, 0, &len), TVP_E_LIMIT);
	m.exec.argv.count = TVP_MAX_ARGC;
	ck_assert_int_eq(tvp_encode(&m, NULL, 0, &len), TVP_E_NOSPACE);
	m.exec.argv.count = 0;
	ck_assert_int_eq(tvp_encode(&m, NULL, 0, &len), TVP_E_LIMIT);
	m = sample(TVP_EXEC);
	m.exec.env = (struct tvp_strvec){ .count = 1, .items = (const char *const[]){ "NOEQUALS" } };
	ck_assert_int_eq(tvp_encode(&m, NULL, 0, &len), TVP_E_BAD_STRING);
	m = sample(TVP_PUT_FILE);
	m.put.path = tvp_cstr("relative/path");
	ck_assert_int_eq(tvp_encode(&m, NULL, 0, &len), TVP_E_BAD_STRING);
	m.put.path = tvp_cstr(NULL);
	ck_assert_int_eq(tvp_encode(&m, NULL, 0, &len), TVP_E_BAD_STRING);
	free(path);
	free(many);
}
END_TEST

START_TEST(embedded_nul_and_bad_strings)
{
	struct tvp_msg m = sample(TVP_ERROR);
	struct raw r;
	char err[160];
	size_t len;

	m.error.message = (struct tvp_str){ "a\0b", 3 };
	ck_assert_int_eq(tvp_encode(&m, NULL, 0, &len), TVP_E_BAD_STRING);

	raw_begin(&r, TVP_ERROR);
	raw_u32(&r, 1);
	raw_u32(&r, 0);
	raw_str(&r, "a\0b", 3);
	ck_assert_int_eq(raw_parse(&r, err, sizeof(err)), TVP_E_BAD_STRING);
	ck_assert_str_eq(err, "ERROR: message contains a NUL byte");

	raw_exec_head(&r);
	raw_u32(&r, 2);
	raw_str(&r, "sh", 2);
	raw_str(&r, "-c\0rm", 5);
	ck_assert_int_eq(raw_parse(&r, err, sizeof(err)), TVP_E_BAD_STRING);

	static const char *const bad_env[] = { "NOEQUALS", "=value", "A\0B=c" };
	for (int i = 0; i < 3; i++) {
		raw_exec_head(&r);
		raw_u32(&r, 1);
		raw_str(&r, "sh", 2);
		raw_u32(&r, 1);
		raw_str(&r, bad_env[i], i == 2 ? 5 : strlen(bad_env[i]));
		raw_u32(&r, 0);
		ck_assert_int_eq(raw_parse(&r, err, sizeof(err)), TVP_E_BAD_STRING);
	}

	raw_begin(&r, TVP_PUT_FILE);
	raw_u32(&r, 0644);
	raw_u32(&r, 0);
	raw_u32(&r, 0);
	raw_str(&r, "", 0);
	ck_assert_int_eq(raw_parse(&r, err, sizeof(err)), TVP_E_BAD_STRING);
	ck_assert_str_eq(err, "PUT_FILE: path is not an absolute path");

	/* Bytes fields may hold NULs. */
	raw_begin(&r, TVP_SEED);
	raw_u32(&r, 0);
	raw_u32(&r, 0);
	raw_str(&r, "\0\0\0", 3);
	ck_assert_int_eq(raw_parse(&r, err, sizeof(err)), 0);
}
END_TEST

/* A stream of every type, fed one byte at a time, and in odd-sized pieces
 * through the zero-copy space/commit interface. */
START_TEST(incremental_feeds)
{
	uint8_t *stream = NULL;
	size_t total = 0;

	for (size_t i = 0; i < NTYPES; i++) {
		struct tvp_msg m = sample(all_types[i]);
		size_t len;
		uint8_t *a = encode(&m, &len);

		stream = realloc(stream, total + len);
		memcpy(stream + total, a, len);
		total += len;
		free(a);
	}
	for (int mode = 0; mode < 2; mode++) {
		struct tvp_decoder d;
		struct tvp_frame f;
		struct tvp_msg m;
		size_t off = 0, nframes = 0, step = 1;
		int rc;

		tvp_decoder_init(&d, 0);
		while (off < total) {
			size_t avail, n;
			uint8_t *p;

			if (mode == 0) {
				off += tvp_decoder_feed(&d, stream + off, 1);
			} else {
				p = tvp_decoder_space(&d, &avail);
				if (p) {
					n = step < avail ? step : avail;
					n = n < total - off ? n : total - off;
					memcpy(p, stream + off, n);
					tvp_decoder_commit(&d, n);
					off += n;
					step = step * 3 % 97 + 1;
				}
			}
			while ((rc = tvp_decoder_next(&d, &f)) == 1) {
				ck_assert_uint_eq(f.type, all_types[nframes]);
				ck_assert_int_eq(tvp_parse(&f, &m, NULL, 0), 0);
				nframes++;
			}
			ck_assert_int_eq(rc, 0);
		}
		ck_assert_uint_eq(nframes, NTYPES);
		ck_assert_uint_eq(tvp_decoder_pending(&d), 0);
		tvp_decoder_free(&d);
	}
	free(stream);
}
END_TEST

/* The decoder grows for a big frame and gives the memory back after it. */
START_TEST(decoder_buffer_bounded)
{
	uint8_t *payload = calloc(1, TVP_MAX_PAYLOAD);
	struct tvp_msg m = { .type = TVP_FILE_DATA, .id = 1, .data = { { payload, TVP_MAX_PAYLOAD } } };
	struct tvp_decoder d;
	struct tvp_frame f;
	size_t len, off = 0, avail;
	uint8_t *a = encode(&m, &len);

	tvp_decoder_init(&d, 0);
	while (off < len)
		off += tvp_decoder_feed(&d, a + off, len - off);
	ck_assert_uint_eq(d.cap, TVP_HDR_SIZE + TVP_MAX_PAYLOAD);
	ck_assert_int_eq(tvp_decoder_next(&d, &f), 1);
	ck_assert_uint_eq(f.len, TVP_MAX_PAYLOAD);
	ck_assert_ptr_nonnull(tvp_decoder_space(&d, &avail));
	ck_assert_uint_le(d.cap, 64 << 10);
	tvp_decoder_free(&d);
	free(a);
	free(payload);
}
END_TEST

START_TEST(strvec_iteration)
{
	struct tvp_strvec v = { .count = 4, .items = argv_s };
	struct tvp_strvec_iter it = { 0 };
	struct tvp_str s;
	int n = 0;

	while (tvp_strvec_next(&v, &it, &s))
		ck_assert_uint_eq(s.len, strlen(argv_s[n++]));
	ck_assert_int_eq(n, 4);
	/* Malformed wire form: the iterator and dup stop safely. */
	static const uint8_t wire[] = { 2, 0, 0, 0, 'h', 'i', 200, 0, 0, 0, 'x' };
	v = (struct tvp_strvec){ .count = 2, .wire = wire, .wire_len = sizeof(wire) };
	memset(&it, 0, sizeof(it));
	ck_assert(tvp_strvec_next(&v, &it, &s));
	ck_assert(!tvp_strvec_next(&v, &it, &s));
	ck_assert_ptr_null(tvp_strvec_dup(&v));
	v.count = 1;
	char **one = tvp_strvec_dup(&v);
	ck_assert_str_eq(one[0], "hi");
	ck_assert_ptr_null(one[1]);
	free(one);
}
END_TEST

/* Frames built by hand may have no payload pointer at all. */
START_TEST(empty_payloads)
{
	struct tvp_frame f = { .type = TVP_SHUTDOWN };
	struct tvp_msg m;

	ck_assert_int_eq(tvp_parse(&f, &m, NULL, 0), 0);
	f.type = TVP_STDIN;
	ck_assert_int_eq(tvp_parse(&f, &m, NULL, 0), 0);
	ck_assert_uint_eq(m.data.data.len, 0);
	f.type = TVP_EXEC;
	ck_assert_int_eq(tvp_parse(&f, &m, NULL, 0), TVP_E_TRUNCATED);
	f.len = 5;
	ck_assert_int_eq(tvp_parse(&f, &m, NULL, 0), TVP_E_TRUNCATED);
	f.len = TVP_MAX_PAYLOAD + 1;
	ck_assert_int_eq(tvp_parse(&f, &m, NULL, 0), TVP_E_TOO_BIG);
}
END_TEST

START_TEST(names_and_errors)
{
	for (size_t i = 0; i < NTYPES; i++)
		ck_assert_ptr_nonnull(tvp_type_name(all_types[i]));
	ck_assert_str_eq(tvp_type_name(TVP_EXEC), "EXEC");
	for (int s = 0; s >= TVP_E_NOMEM; s--)
		ck_assert_str_ne(tvp_strerror(s), "unknown error");
	ck_assert_str_eq(tvp_strerror(-100), "unknown error");
}
END_TEST

static Suite *protocol_suite(void)
{
	Suite *s = suite_create("protocol");
	TCase *tc = tcase_create("codec");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, roundtrip_every_type);
	tcase_add_test(tc, roundtrip_fields);
	tcase_add_test(tc, header_layout);
	tcase_add_test(tc, truncated_frames_every_cut);
	tcase_add_test(tc, truncated_payloads_every_cut);
	tcase_add_test(tc, oversized_length);
	tcase_add_test(tc, bad_magic_and_version);
	tcase_add_test(tc, unknown_types);
	tcase_add_test(tc, bad_flags);
	tcase_add_test(tc, counts_over_caps);
	tcase_add_test(tc, encoder_enforces_caps);
	tcase_add_test(tc, embedded_nul_and_bad_strings);
	tcase_add_test(tc, incremental_feeds);
	tcase_add_test(tc, decoder_buffer_bounded);
	tcase_add_test(tc, strvec_iteration);
	tcase_add_test(tc, empty_payloads);
	tcase_add_test(tc, names_and_errors);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(protocol_suite());
}
