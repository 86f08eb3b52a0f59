/* The JSON reader and writer of the serve daemon (vmm/serve/json.c), above
 * all on hostile input. vmm/serve is not part of the library: its source
 * is compiled into this test. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/serve/json.c"
#include "tests/unit.h"

#define NTOK 256
static struct json_tok toks[NTOK];

/* Parse a NUL-terminated literal with the defaults. */
static int jparse(struct json_doc *d, const char *s, struct json_err *e)
{
	return json_parse(d, s, strlen(s), toks, NTOK, 0, e);
}

/* s must be refused with code at byte off (off SIZE_MAX: anywhere). */
static void bad_at(const char *s, size_t n, int code, size_t off)
{
	struct json_doc d;
	struct json_err e;
	int r = json_parse(&d, s, n, toks, NTOK, 0, &e);

	if (r != code || (off != SIZE_MAX && e.off != off))
		ck_abort_msg("'%.*s': got %d at %zu (%s), want %d at %zu", (int)n, s, r, e.off, e.msg, code, off);
	ck_assert_int_ne(e.msg[0], 0);
	ck_assert_uint_eq(d.ntok, 0);
}

static void bad(const char *s)
{
	bad_at(s, strlen(s), -EINVAL, SIZE_MAX);
}

static void good(const char *s)
{
	struct json_doc d;
	struct json_err e;
	int r = jparse(&d, s, &e);

	if (r)
		ck_abort_msg("'%s': %d %s", s, r, e.msg);
}

START_TEST(structure)
{
	struct json_doc d;
	const char *s = " {\"id\": \"sb-1\", \"n\": [1, -2, 3.5e1, true, false, null, {}, []], \"o\": {\"k\": \"v\"}} ";
	int n, k, v;

	ck_assert_int_eq(jparse(&d, s, NULL), 0);
	ck_assert_uint_eq(d.ntok, 17);
	ck_assert_int_eq(d.tok[0].type, JSON_OBJECT);
	ck_assert_uint_eq(d.tok[0].size, 3);
	ck_assert_uint_eq(d.tok[0].next, 17);
	ck_assert_uint_eq(d.tok[0].off, 1);
	ck_assert_uint_eq(d.tok[0].len, strlen(s) - 2);
	n = json_find(&d, 0, "n");
	ck_assert_int_eq(d.tok[n].type, JSON_ARRAY);
	ck_assert_uint_eq(d.tok[n].size, 8);
	static const int types[] = { JSON_NUMBER, JSON_NUMBER, JSON_NUMBER, JSON_TRUE,
				     JSON_FALSE,  JSON_NULL,   JSON_OBJECT, JSON_ARRAY };
	int count = 0;
	for (k = json_first(&d, n); k >= 0; k = json_next(&d, n, k))
		ck_assert_int_eq(d.tok[k].type, types[count++]);
	ck_assert_int_eq(count, 8);
	ck_assert(d.tok[json_first(&d, n)].integer);
	ck_assert(!d.tok[json_first(&d, n) + 2].integer);
	/* Object members: keys, values at key + 1. */
	count = 0;
	for (k = json_first(&d, 0); k >= 0; k = json_next(&d, 0, k)) {
		ck_assert_int_eq(d.tok[k].type, JSON_STRING);
		count++;
	}
	ck_assert_int_eq(count, 3);
	v = json_find(&d, json_find(&d, 0, "o"), "k");
	ck_assert(json_str_eq(&d, v, "v", 1));
	ck_assert_int_eq(json_find(&d, 0, "missing"), -1);
	ck_assert_int_eq(json_find(&d, n, "n"), -1); /* not an object */
	ck_assert_int_eq(json_find(&d, -1, "n"), -1);
	ck_assert_int_eq(json_find(&d, 99, "n"), -1);
	ck_assert_int_eq(json_first(&d, json_find(&d, 0, "id")), -1);
	ck_assert_int_eq(json_first(&d, n + 7), -1); /* {} */
	ck_assert_int_eq(json_next(&d, n, 0), -1);
	ck_assert_int_eq(json_next(&d, 0, 99), -1);
	/* Values "id" is a key's name, not a value to find by "sb-1". */
	ck_assert_int_eq(json_find(&d, 0, "sb-1"), -1);

	/* Scalars at the top. */
	ck_assert_int_eq(jparse(&d, " 7 ", NULL), 0);
	ck_assert_uint_eq(d.ntok, 1);
	ck_assert_int_eq(d.tok[0].type, JSON_NUMBER);
	good("\"x\"");
	good("null");
	good("true");
	good("false");
	good("-0");
	good("0.0e-0");
	good("[\"\\u0000\"]");
	good("{\"\":0}");
	good("[[],[[]],{\"a\":[{}]}]");
}
END_TEST

START_TEST(length_delimited)
{
	struct json_doc d;
	int64_t v;
	char s[] = "[12]34";

	ck_assert_int_eq(json_parse(&d, s + 1, 2, toks, NTOK, 0, NULL), 0);
	ck_assert_int_eq(json_get_int64(&d, 0, &v), 0);
	ck_assert_int_eq(v, 12);
	bad_at(s, 3, -EINVAL, 3);
	bad_at("\"ab\"", 3, -EINVAL, 0);
	bad_at("tru", 3, -EINVAL, 0);
	bad_at("\"\\u12", 5, -EINVAL, 1);
	bad_at("\"\\ud800\\udc0", 12, -EINVAL, 1);
	bad_at("\"\xe2\x82", 3, -EINVAL, 1);
	bad_at("1.", 2, -EINVAL, 2);
	bad_at("-", 1, -EINVAL, 1);
	ck_assert_int_eq(json_parse(&d, NULL, 0, toks, NTOK, 0, NULL), -EINVAL);
	ck_assert_int_eq(json_parse(&d, NULL, 1, toks, NTOK, 0, NULL), -EINVAL);
}
END_TEST

START_TEST(syntax_errors)
{
	bad_at("", 0, -EINVAL, 0);
	bad_at("   ", 3, -EINVAL, 3);
	bad_at("[1,]", 4, -EINVAL, 3);
	bad_at("{\"a\":1,}", 8, -EINVAL, 7);
	bad_at("[1 2]", 5, -EINVAL, 3);
	bad_at("{\"a\" 1}", 7, -EINVAL, 5);
	bad_at("1 2", 3, -EINVAL, 2);
	bad_at("{}x", 3, -EINVAL, 2);
	bad_at("nullx", 5, -EINVAL, 4);
	bad_at("[]]", 3, -EINVAL, 2);
	bad("[,1]");
	bad("{,}");
	bad("{\"a\":}");
	bad("{1:2}");
	bad("{'a':2}");
	bad("['a']");
	bad("[");
	bad("{");
	bad("]");
	bad("}");
	bad("{\"a\"");
	bad("{\"a\":1");
	bad("[1,");
	bad(",");
	bad(":");
	bad("/*x*/1");
	bad("1 // x");
	bad("# x\n1");
	bad("nul");
	bad("tru");
	bad("True");
	bad("NULL");
	bad("NaN");
	bad("Infinity");
	bad("-Infinity");
	bad("undefined");
	bad("\xef\xbb\xbf{}"); /* byte order mark */
	bad("\f1");            /* not JSON whitespace */
	bad("\v1");
	bad("1\xa0");
}
END_TEST

START_TEST(numbers)
{
	bad_at("01", 2, -EINVAL, 0);
	bad_at("-01", 3, -EINVAL, 1);
	bad_at("[00]", 4, -EINVAL, 1);
	bad("+1");
	bad(".5");
	bad("1.");
	bad("1.e5");
	bad("1e");
	bad("1e+");
	bad("1E-");
	bad("0x10");
	bad("- 1");
	bad("--1");
	bad("1.5.5");
	bad("1e5e5");
	good("0");
	good("-0");
	good("-0.0");
	good("1E+2");
	good("1e-2");
	good("10");
	good("1e999");
	good("123456789012345678901234567890");

	struct json_doc d;
	int64_t v;
	double x;
	ck_assert_int_eq(jparse(&d,
				"[9223372036854775807, -9223372036854775808, 9223372036854775808,"
				"-9223372036854775809, -0, 1.0, 1e2, 0, 99999999999999999999999, \"1\", 1E0]",
				NULL),
			 0);
	ck_assert_int_eq(json_get_int64(&d, 1, &v), 0);
	ck_assert(v == INT64_MAX);
	ck_assert_int_eq(json_get_int64(&d, 2, &v), 0);
	ck_assert(v == INT64_MIN);
	ck_assert_int_eq(json_get_int64(&d, 3, &v), -ERANGE);
	ck_assert_int_eq(json_get_int64(&d, 4, &v), -ERANGE);
	ck_assert_int_eq(json_get_int64(&d, 5, &v), 0);
	ck_assert(v == 0);
	ck_assert_int_eq(json_get_int64(&d, 6, &v), -EINVAL);
	ck_assert_int_eq(json_get_int64(&d, 7, &v), -EINVAL);
	ck_assert_int_eq(json_get_int64(&d, 8, &v), 0);
	ck_assert(v == 0);
	ck_assert_int_eq(json_get_int64(&d, 9, &v), -ERANGE);
	ck_assert_int_eq(json_get_int64(&d, 10, &v), -EINVAL);
	ck_assert_int_eq(json_get_int64(&d, 11, &v), -EINVAL);
	ck_assert_int_eq(json_get_int64(&d, 0, &v), -EINVAL);
	ck_assert_int_eq(json_get_int64(&d, -1, &v), -EINVAL);

	ck_assert_int_eq(jparse(&d, "[1e999, -1e999, 1e-999, -0, 0.5, -2.5E+3, \"x\", 1]", NULL), 0);
	ck_assert_int_eq(json_get_double(&d, 1, &x), -ERANGE);
	ck_assert_int_eq(json_get_double(&d, 2, &x), -ERANGE);
	ck_assert_int_eq(json_get_double(&d, 3, &x), 0);
	ck_assert(x == 0.0);
	ck_assert_int_eq(json_get_double(&d, 4, &x), 0);
	ck_assert(x == 0.0 && signbit(x));
	ck_assert_int_eq(json_get_double(&d, 5, &x), 0);
	ck_assert(x == 0.5);
	ck_assert_int_eq(json_get_double(&d, 6, &x), 0);
	ck_assert(x == -2500.0);
	ck_assert_int_eq(json_get_double(&d, 7, &x), -EINVAL);
	ck_assert_int_eq(json_get_double(&d, 8, &x), 0);
	ck_assert(x == 1.0);

	/* A number of 512 characters reads as a double, 513 do not. */
	static char big[600];
	big[0] = '[';
	memset(big + 1, '1', 512);
	memcpy(big + 1, "0.", 2);
	big[513] = ']';
	ck_assert_int_eq(json_parse(&d, big, 514, toks, NTOK, 0, NULL), 0);
	ck_assert_int_eq(json_get_double(&d, 1, &x), 0);
	memset(big + 3, '1', 511);
	big[514] = ']';
	ck_assert_int_eq(json_parse(&d, big, 515, toks, NTOK, 0, NULL), 0);
	ck_assert_int_eq(json_get_double(&d, 1, &x), -ERANGE);
}
END_TEST

START_TEST(bools_and_null)
{
	struct json_doc d;
	bool b = false;

	ck_assert_int_eq(jparse(&d, "[true,false,null,0]", NULL), 0);
	ck_assert_int_eq(json_get_bool(&d, 1, &b), 0);
	ck_assert(b);
	ck_assert_int_eq(json_get_bool(&d, 2, &b), 0);
	ck_assert(!b);
	ck_assert_int_eq(json_get_bool(&d, 3, &b), -EINVAL);
	ck_assert_int_eq(json_get_bool(&d, 4, &b), -EINVAL);
	ck_assert(json_is_null(&d, 3));
	ck_assert(!json_is_null(&d, 4));
	ck_assert(!json_is_null(&d, -1));
	ck_assert(!json_is_null(&d, 5));
}
END_TEST

START_TEST(escapes)
{
	struct json_doc d;
	char out[64], s[8];
	size_t n;

	/* Every byte after a backslash: only the eight of RFC 8259 §7 and u. */
	for (int c = 0; c < 256; c++) {
		struct json_err e;
		int r;

		snprintf(s, sizeof(s), "\"\\%c\"", c);
		s[2] = (char)c;
		r = json_parse(&d, s, 4, toks, NTOK, 0, &e);
		if (c && strchr("\"\\/bfnrt", c))
			ck_assert_int_eq(r, 0);
		else if (r != -EINVAL || e.off != 1)
			ck_abort_msg("escape \\x%02x: %d at %zu", c, r, e.off);
	}
	ck_assert_int_eq(jparse(&d, "\"a\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\u20AC\\ud83d\\ude00z\"", NULL), 0);
	ck_assert_int_eq(json_get_string(&d, 0, out, sizeof(out), &n), 0);
	ck_assert_str_eq(out, "a\"\\/\b\f\n\r\t\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z");
	ck_assert_uint_eq(n, strlen(out));
	ck_assert(json_str_eq(&d, 0, out, n));
	ck_assert(!json_str_eq(&d, 0, out, n - 1));
	ck_assert(!json_str_eq(&d, 0, "a", 1));

	bad_at("\"\\u\"", 4, -EINVAL, 1);
	bad_at("\"\\u12\"", 6, -EINVAL, 1);
	bad_at("\"\\u12G4\"", 8, -EINVAL, 1);
	bad_at("\"\\U0041\"", 8, -EINVAL, 1);
	bad_at("\"\\x41\"", 6, -EINVAL, 1);
	bad_at("\"\\", 2, -EINVAL, 1);
	/* Lone and misordered surrogates. */
	bad_at("\"\\uD800\"", 8, -EINVAL, 1);
	bad_at("\"ab\\ud800x\"", 11, -EINVAL, 3);
	bad_at("\"\\uD800\\u0041\"", 14, -EINVAL, 1);
	bad_at("\"\\uD800\\uD800\"", 14, -EINVAL, 1);
	bad_at("\"\\uDC00\"", 8, -EINVAL, 1);
	bad_at("\"\\uDFFF\\uD800\"", 14, -EINVAL, 1);
	bad_at("\"\\uD800\\n\"", 10, -EINVAL, 1);
	bad_at("\"\\uD800\\u\"", 10, -EINVAL, 1);
	good("\"\\uDBFF\\uDFFF\"");
	good("\"\\uD7FF\\uE000\\uFFFF\"");
	ck_assert_int_eq(jparse(&d, "\"\\uDBFF\\uDFFF\"", NULL), 0);
	ck_assert_int_eq(json_get_string(&d, 0, out, sizeof(out), &n), 0);
	ck_assert_str_eq(out, "\xf4\x8f\xbf\xbf");
	/* Raw control characters. */
	for (int c = 0; c < 0x20; c++) {
		snprintf(s, sizeof(s), "\"a%cb\"", c);
		s[2] = (char)c;
		bad_at(s, 5, -EINVAL, 2);
	}
	good("\"\x7f\"");
}
END_TEST

START_TEST(utf8)
{
	static const char *const invalid[] = {
		"\x80",
		"\xbf",
		"\xc0\x80",
		"\xc1\xbf",
		"\xc2",
		"\xc2\x41",
		"\xe0\x80\x80",
		"\xe0\x9f\xbf",
		"\xed\xa0\x80",
		"\xed\xbf\xbf",
		"\xe2\x82",
		"\xe2\x28\xa1",
		"\xf0\x80\x80\x80",
		"\xf0\x8f\xbf\xbf",
		"\xf4\x90\x80\x80",
		"\xf5\x80\x80\x80",
		"\xf8\x88\x80\x80\x80",
		"\xfe",
		"\xff",
		"\xf0\x90\x80",
	};
	static const char *const valid[] = {
		"\xc2\x80",     "\xdf\xbf",     "\xe0\xa0\x80",     "\xed\x9f\xbf",
		"\xee\x80\x80", "\xef\xbf\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf",
	};
	char s[16];

	for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
		int n = snprintf(s, sizeof(s), "\"a%s\"", invalid[i]);

		bad_at(s, (size_t)n, -EINVAL, 2);
	}
	for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
		snprintf(s, sizeof(s), "\"a%s\"", valid[i]);
		good(s);
	}
}
END_TEST

START_TEST(get_string_limits)
{
	struct json_doc d;
	char out[8];
	size_t n = 9;
	static const char nul[] = "[\"a\\u0000b\", 1, \"\\u00e9\"]";

	ck_assert_int_eq(jparse(&d, "\"abcdefg\"", NULL), 0);
	ck_assert_int_eq(json_get_string(&d, 0, out, 8, &n), 0);
	ck_assert_str_eq(out, "abcdefg");
	ck_assert_int_eq(json_get_string(&d, 0, out, 7, &n), -ENOSPC);
	ck_assert_str_eq(out, "");
	ck_assert_uint_eq(n, 0);
	out[0] = 'X';
	ck_assert_int_eq(json_get_string(&d, 0, out, 0, &n), -ENOSPC);
	ck_assert_int_eq(out[0], 'X');

	ck_assert_int_eq(jparse(&d, nul, NULL), 0);
	ck_assert_int_eq(json_get_string(&d, 1, out, sizeof(out), &n), -EINVAL);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(json_get_bytes(&d, 1, out, sizeof(out), &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert(!memcmp(out, "a\0b", 4));
	ck_assert_int_eq(json_get_string(&d, 2, out, sizeof(out), &n), -EINVAL);
	/* A 2-byte character needs 3 bytes with its NUL. */
	ck_assert_int_eq(json_get_string(&d, 3, out, 3, &n), 0);
	ck_assert_int_eq(json_get_string(&d, 3, out, 2, &n), -ENOSPC);
	ck_assert_int_eq(json_get_string(&d, 0, out, sizeof(out), &n), -EINVAL);
}
END_TEST

/* An object of n members "k0".."k<n-1>" into buf; its parse's result. */
static int members(char *buf, unsigned n, struct json_tok *t, uint32_t max)
{
	struct json_doc d;
	size_t len = 0;

	buf[len++] = '{';
	for (unsigned i = 0; i < n; i++)
		len += (size_t)sprintf(buf + len, "%s\"k%u\":%u", i ? "," : "", i, i);
	buf[len++] = '}';
	return json_parse(&d, buf, len, t, max, 0, NULL);
}

/* The duplicate-key check is quadratic in an object's members: a request
 * of many thousands of keys (seconds of CPU) is refused at the limit. */
START_TEST(member_limit)
{
	static struct json_tok big[4096];
	static char buf[64 * 1024];

	ck_assert_int_eq(members(buf, JSON_MEMBERS_MAX, big, 4096), 0);
	ck_assert_int_eq(members(buf, JSON_MEMBERS_MAX + 1, big, 4096), -E2BIG);
}
END_TEST

/* 32-bit FNV-1a over code points, as json.c hashes keys: public, so
 * collisions can be made (as a hostile client would). */
static uint32_t fnv_step(uint32_t h, uint32_t c)
{
	return (h ^ c) * 16777619u;
}

static bool cp_ok(uint32_t c)
{
	return c >= 0x20 && c < 0x110000 && !(c >= 0xd800 && c <= 0xdfff) && c != '"' && c != '\\';
}

/* Two different 2-code-point strings (UTF-8 in a and b, json.c's
 * put_utf8) that take state h
 * to one state, returned: first code points whose states agree in their
 * top 11 bits (a birthday search), then second ones that cancel the rest. */
static uint32_t collide(uint32_t h, char a[9], char b[9])
{
	static uint32_t seen[2048];
	static uint32_t r = 12345;

	memset(seen, 0, sizeof(seen));
	for (;;) {
		r ^= r << 13, r ^= r >> 17, r ^= r << 5;
		uint32_t x = r % 0x110000, hx = fnv_step(h, x), *slot = &seen[hx >> 21];

		if (!cp_ok(x))
			continue;
		if (*slot && *slot != x) {
			uint32_t x2 = *slot, hx2 = fnv_step(h, x2);

			for (uint32_t y = 0x20; y < 0x7f; y++) {
				uint32_t y2 = y ^ hx ^ hx2;

				if (!cp_ok(y) || !cp_ok(y2))
					continue;
				size_t na = put_utf8(x, (unsigned char *)a), nb = put_utf8(x2, (unsigned char *)b);
				na += put_utf8(y, (unsigned char *)a + na), nb += put_utf8(y2, (unsigned char *)b + nb);
				a[na] = b[nb] = 0;
				ck_assert_uint_eq(fnv_step(hx, y), fnv_step(hx2, y2));
				return fnv_step(hx, y);
			}
		}
		*slot = x;
	}
}

/* 256 distinct keys, all of one hash, each behind 600 escaped characters:
 * the duplicate check would decode every pair (32640 of them, about 0.25 s
 * for one 1 MiB request); it stops at the document's length instead. */
START_TEST(keys_made_to_collide_cost_no_more_than_the_document)
{
	static char buf[1 << 20], blocks[8][2][9];
	static struct json_tok t[1024];
	struct json_err e = { 0 };
	struct json_doc d;
	uint32_t h = 2166136261u;
	size_t n = 0;

	for (int i = 0; i < 600; i++)
		h = fnv_step(h, 'A');
	for (int l = 0; l < 8; l++)
		h = collide(h, blocks[l][0], blocks[l][1]);
	buf[n++] = '{';
	for (unsigned k = 0; k < 256; k++) {
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s\"", k ? "," : "");
		for (int i = 0; i < 600; i++)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\\u0041");
		for (int l = 0; l < 8; l++)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s", blocks[l][k >> l & 1]);
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\":0");
	}
	buf[n++] = '}';
	ck_assert_uint_lt(n, sizeof(buf));
	ck_assert_int_eq(json_parse(&d, buf, n, t, 1024, 0, &e), -E2BIG);
	ck_assert_msg(strstr(e.msg, "too many object keys alike"), "%s", e.msg);
	/* a few such keys are fine: their pairs are few */
	n = (size_t)snprintf(buf, sizeof(buf), "{\"%s\":0,\"%s\":1}", blocks[0][0], blocks[0][1]);
	ck_assert_int_eq(json_parse(&d, buf, n, t, 1024, 0, NULL), 0);
}
END_TEST

START_TEST(duplicate_keys)
{
	bad_at("{\"a\":1,\"a\":2}", 13, -EINVAL, 7);
	bad("{\"a\":1,\"\\u0061\":2}");
	bad("{\"\\u0061\":1,\"a\":2}");
	bad("{\"\xc3\xa9\":1,\"\\u00e9\":2}");
	bad("{\"\xf0\x9f\x98\x80\":1,\"\\ud83d\\ude00\":2}");
	bad("{\"\\n\":1,\"\\u000a\":2}");
	bad("{\"\\/\":1,\"/\":2}");
	bad("{\"a\":1,\"b\":{},\"c\":[1,{\"a\":1}],\"a\":2}");
	bad("{\"\":1,\"\":2}");
	good("{\"a\":{\"a\":1}}");
	good("{\"a\":1,\"b\":{\"a\":2}}");
	good("[{\"a\":1},{\"a\":1}]");
	good("{\"a\":1,\"ab\":2,\"b\":3,\"\\u0062a\":4}");
	good("{\"\\u00e9\":1,\"\\u00e8\":2}");
}
END_TEST

static int nest(char *buf, unsigned depth, const char *open, const char *close, struct json_tok *t, uint32_t max,
		unsigned limit)
{
	struct json_doc d;
	size_t n = 0, ol = strlen(open), cl = strlen(close);

	for (unsigned i = 0; i < depth; i++, n += ol)
		memcpy(buf + n, open, ol);
	for (unsigned i = 0; i < depth; i++, n += cl)
		memcpy(buf + n, close, cl);
	return json_parse(&d, buf, n, t, max, limit, NULL);
}

START_TEST(depth_limit)
{
	static char buf[1 << 20];
	static struct json_tok big[70000];
	struct json_doc d;

	ck_assert_int_eq(nest(buf, 32, "[", "]", toks, NTOK, 0), 0);
	ck_assert_int_eq(nest(buf, 33, "[", "]", toks, NTOK, 0), -E2BIG);
	ck_assert_int_eq(nest(buf, 32, "{\"k\":", "}", toks, NTOK, 0), -EINVAL); /* "{}" needs a value */
	ck_assert_int_eq(nest(buf, 31, "{\"k\":[", "]}", toks, NTOK, 0), -E2BIG);
	ck_assert_int_eq(nest(buf, 16, "{\"k\":[", "]}", toks, NTOK, 0), 0);
	ck_assert_int_eq(nest(buf, 1, "[", "]", toks, NTOK, 1), 0);
	ck_assert_int_eq(nest(buf, 2, "[", "]", toks, NTOK, 1), -E2BIG);
	ck_assert_int_eq(nest(buf, 1024, "[", "]", big, 70000, JSON_DEPTH_MAX), 0);
	ck_assert_int_eq(nest(buf, 1025, "[", "]", big, 70000, JSON_DEPTH_MAX), -E2BIG);
	ck_assert_int_eq(nest(buf, 1, "[", "]", toks, NTOK, JSON_DEPTH_MAX + 1), -EINVAL);
	/* Far past the limit: refused without going deep. */
	memset(buf, '[', sizeof(buf));
	ck_assert_int_eq(json_parse(&d, buf, sizeof(buf), toks, NTOK, 0, NULL), -E2BIG);
	memset(buf, '{', sizeof(buf));
	ck_assert_int_eq(json_parse(&d, buf, sizeof(buf), toks, NTOK, 0, NULL), -EINVAL);
	/* Scalars need no depth. */
	ck_assert_int_eq(json_parse(&d, "1", 1, toks, NTOK, 1, NULL), 0);
}
END_TEST

START_TEST(token_limit)
{
	struct json_doc d;
	struct json_err e;

	ck_assert_int_eq(json_parse(&d, "[1,2,3]", 7, toks, 4, 0, &e), 0);
	ck_assert_uint_eq(d.ntok, 4);
	ck_assert_int_eq(json_parse(&d, "[1,2,3]", 7, toks, 3, 0, &e), -E2BIG);
	ck_assert_uint_eq(e.off, 5);
	ck_assert_int_eq(json_parse(&d, "{\"a\":1}", 7, toks, 3, 0, &e), 0);
	ck_assert_int_eq(json_parse(&d, "{\"a\":1}", 7, toks, 2, 0, &e), -E2BIG);
	ck_assert_int_eq(json_parse(&d, "{\"a\":1}", 7, toks, 1, 0, &e), -E2BIG);
	ck_assert_int_eq(json_parse(&d, "1", 1, toks, 1, 0, &e), 0);
	ck_assert_int_eq(json_parse(&d, "1", 1, toks, 0, 0, &e), -E2BIG);
	ck_assert_int_eq(json_parse(&d, "1", 1, NULL, 0, 0, &e), -E2BIG);
}
END_TEST

START_TEST(error_messages)
{
	struct json_doc d;
	struct json_err e;

	ck_assert_int_eq(jparse(&d, "{\"a\" 1}", &e), -EINVAL);
	ck_assert_str_eq(e.msg, "byte 5: expected ':' after an object key");
	ck_assert_int_eq(jparse(&d, "[1,2", &e), -EINVAL);
	ck_assert_str_eq(e.msg, "byte 4: expected ',' or ']' in an array");
	ck_assert_int_eq(jparse(&d, "", &e), -EINVAL);
	ck_assert_str_eq(e.msg, "byte 0: expected a value, found the end of the input");
	/* text starting with n, t or f is no misspelt literal (helper-64) */
	ck_assert_int_eq(jparse(&d, "not json", &e), -EINVAL);
	ck_assert_str_eq(e.msg, "byte 0: expected a value (object, array, string, number, true, false, null)");
}
END_TEST

/* Write a document that uses every writer call. */
static void write_doc(struct json_w *w)
{
	static const unsigned char bytes[] = { 0, 1, 2, 0xfe, 0xff };

	json_w_obj_begin(w);
	json_w_key(w, "id", 2);
	json_w_string(w, "sb-\"1\"\\\n\x01\x7f\xc3\xa9\xff", 13);
	json_w_key(w, "n", 1);
	json_w_arr_begin(w);
	json_w_int(w, INT64_MIN);
	json_w_int(w, 0);
	json_w_uint(w, UINT64_MAX);
	json_w_double(w, -2.5);
	json_w_number(w, "1e-7", 4);
	json_w_bool(w, true);
	json_w_bool(w, false);
	json_w_null(w);
	json_w_arr_begin(w);
	json_w_arr_end(w);
	json_w_obj_begin(w);
	json_w_obj_end(w);
	json_w_arr_end(w);
	json_w_key(w, "data", 4);
	json_w_base64(w, bytes, sizeof(bytes));
	json_w_key(w, "\t", 1);
	json_w_string(w, "", 0);
	json_w_obj_end(w);
}

START_TEST(writer_output)
{
	char buf[512];
	struct json_w w;
	size_t len;
	struct json_doc d;
	const char *want =
		"{\"id\":\"sb-\\\"1\\\"\\\\\\n\\u0001\x7f\xc3\xa9\xef\xbf\xbd\",\"n\":[-9223372036854775808,0,"
		"18446744073709551615,-2.5,1e-7,true,false,null,[],{}],\"data\":\"AAEC/v8=\",\"\\t\":\"\"}";

	json_w_init(&w, buf, sizeof(buf));
	write_doc(&w);
	ck_assert_int_eq(json_w_finish(&w, &len), 0);
	ck_assert_uint_eq(len, strlen(want));
	ck_assert(!memcmp(buf, want, len));
	ck_assert_int_eq(json_parse(&d, buf, len, toks, NTOK, 0, NULL), 0);
	ck_assert_uint_eq(d.ntok, 19);
}
END_TEST

START_TEST(writer_every_capacity)
{
	char full[512], buf[600];
	struct json_w w;
	size_t need, len;

	json_w_init(&w, full, sizeof(full));
	write_doc(&w);
	ck_assert_int_eq(json_w_finish(&w, &need), 0);
	for (size_t cap = 0; cap <= need + 1; cap++) {
		memset(buf, 0xa5, sizeof(buf));
		json_w_init(&w, buf, cap);
		write_doc(&w);
		int r = json_w_finish(&w, &len);

		if (cap < need) {
			ck_assert_int_eq(r, -ENOBUFS);
			ck_assert_uint_le(len, cap);
		} else {
			ck_assert_int_eq(r, 0);
			ck_assert_uint_eq(len, need);
		}
		ck_assert(!memcmp(buf, full, len)); /* what fitted is a prefix */
		for (size_t k = cap; k < sizeof(buf); k++)
			if ((unsigned char)buf[k] != 0xa5)
				ck_abort_msg("capacity %zu: byte %zu written", cap, k);
	}
	/* No buffer at all. */
	json_w_init(&w, NULL, 100);
	json_w_null(&w);
	ck_assert_int_eq(json_w_finish(&w, &len), -ENOBUFS);
}
END_TEST

START_TEST(writer_misuse)
{
	char buf[64];
	struct json_w w;
	size_t len;

	json_w_init(&w, buf, sizeof(buf));
	json_w_obj_begin(&w);
	json_w_int(&w, 1); /* a value where a key is due */
	ck_assert_int_eq(json_w_finish(&w, &len), -EINVAL);

	json_w_init(&w, buf, sizeof(buf));
	json_w_arr_begin(&w);
	json_w_key(&w, "a", 1);
	ck_assert_int_eq(json_w_finish(&w, &len), -EINVAL);

	json_w_init(&w, buf, sizeof(buf));
	json_w_arr_begin(&w);
	json_w_obj_end(&w);
	ck_assert_int_eq(json_w_finish(&w, &len), -EINVAL);

	json_w_init(&w, buf, sizeof(buf));
	json_w_obj_begin(&w);
	json_w_key(&w, "a", 1);
	json_w_key(&w, "b", 1);
	ck_assert_int_eq(json_w_finish(&w, &len), -EINVAL);

	json_w_init(&w, buf, sizeof(buf));
	json_w_obj_begin(&w);
	json_w_key(&w, "a", 1);
	json_w_obj_end(&w);
	ck_assert_int_eq(json_w_finish(&w, &len), -EINVAL);

	json_w_init(&w, buf, sizeof(buf));
	json_w_null(&w);
	json_w_null(&w); /* two top-level values */
	ck_assert_int_eq(json_w_finish(&w, &len), -EINVAL);

	json_w_init(&w, buf, sizeof(buf));
	json_w_arr_end(&w);
	ck_assert_int_eq(json_w_finish(&w, &len), -EINVAL);

	json_w_init(&w, buf, sizeof(buf));
	json_w_arr_begin(&w);
	ck_assert_int_eq(json_w_finish(&w, &len), -EINVAL); /* still open */

	json_w_init(&w, buf, sizeof(buf));
	ck_assert_int_eq(json_w_finish(&w, &len), -EINVAL); /* nothing */

	json_w_init(&w, buf, sizeof(buf));
	json_w_double(&w, NAN);
	ck_assert_int_eq(json_w_finish(&w, &len), -EINVAL);
	json_w_init(&w, buf, sizeof(buf));
	json_w_double(&w, -INFINITY);
	ck_assert_int_eq(json_w_finish(&w, &len), -EINVAL);

	static const char *const nonums[] = { "", "-", "01", "1.", "+1", "1e", "NaN", "1 ", " 1", "0x1", ".5" };
	for (size_t i = 0; i < sizeof(nonums) / sizeof(nonums[0]); i++) {
		json_w_init(&w, buf, sizeof(buf));
		json_w_number(&w, nonums[i], strlen(nonums[i]));
		ck_assert_int_eq(json_w_finish(&w, &len), -EINVAL);
	}

	/* Too deep. */
	static char deep[256];
	json_w_init(&w, deep, sizeof(deep));
	for (int i = 0; i < JSON_W_DEPTH; i++)
		json_w_arr_begin(&w);
	for (int i = 0; i < JSON_W_DEPTH; i++)
		json_w_arr_end(&w);
	ck_assert_int_eq(json_w_finish(&w, &len), 0);
	json_w_init(&w, deep, sizeof(deep));
	for (int i = 0; i <= JSON_W_DEPTH; i++)
		json_w_arr_begin(&w);
	ck_assert_int_eq(json_w_finish(&w, &len), -EINVAL);

	/* The first error sticks. */
	json_w_init(&w, buf, 2);
	json_w_string(&w, "abc", 3);
	json_w_init(&w, buf, 2);
	json_w_arr_begin(&w);
	json_w_string(&w, "abc", 3);
	json_w_obj_end(&w);
	ck_assert_int_eq(json_w_finish(&w, &len), -ENOBUFS);
}
END_TEST

START_TEST(writer_strings)
{
	char buf[128];
	struct json_w w;
	size_t len;
	struct json_doc d;
	char out[64];
	size_t n;

	/* Every control character, escaped and read back. */
	char ctl[32];
	for (int i = 0; i < 32; i++)
		ctl[i] = (char)i;
	char big[256];
	json_w_init(&w, big, sizeof(big));
	json_w_string(&w, ctl, 32);
	ck_assert_int_eq(json_w_finish(&w, &len), 0);
	ck_assert_int_eq(json_parse(&d, big, len, toks, NTOK, 0, NULL), 0);
	ck_assert_int_eq(json_get_bytes(&d, 0, out, sizeof(out), &n), 0);
	ck_assert_uint_eq(n, 32);
	ck_assert(!memcmp(out, ctl, 32));
	ck_assert(!memcmp(big, "\"\\u0000\\u0001", 13));

	/* Invalid UTF-8 byte by byte replaced; a truncated sequence at the end too. */
	json_w_init(&w, buf, sizeof(buf));
	json_w_string(&w,
		      "a\xc0\x80"
		      "b\xe2\x82",
		      6);
	ck_assert_int_eq(json_w_finish(&w, &len), 0);
	ck_assert_uint_eq(len, 2 + 2 + 4 * 3);
	ck_assert(!memcmp(buf,
			  "\"a\xef\xbf\xbd\xef\xbf\xbd"
			  "b\xef\xbf\xbd\xef\xbf\xbd\"",
			  len));
	/* Surrogates encoded in UTF-8 are invalid too. */
	json_w_init(&w, buf, sizeof(buf));
	json_w_string(&w, "\xed\xa0\x80", 3);
	ck_assert_int_eq(json_w_finish(&w, &len), 0);
	ck_assert_int_eq(json_parse(&d, buf, len, toks, NTOK, 0, NULL), 0);
	ck_assert_int_eq(json_get_string(&d, 0, out, sizeof(out), &n), 0);
	ck_assert_str_eq(out, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
}
END_TEST

START_TEST(base64)
{
	static const char *const vec[][2] = { { "", "" },
					      { "f", "Zg==" },
					      { "fo", "Zm8=" },
					      { "foo", "Zm9v" },
					      { "foob", "Zm9vYg==" },
					      { "fooba", "Zm9vYmE=" },
					      { "foobar", "Zm9vYmFy" } };
	char out[16];
	size_t n;

	for (size_t i = 0; i < 7; i++) {
		size_t l = strlen(vec[i][1]);

		memset(out, 0xa5, sizeof(out));
		ck_assert_int_eq(json_base64_encode(vec[i][0], strlen(vec[i][0]), out, l, &n), 0);
		ck_assert_uint_eq(n, l);
		ck_assert(!memcmp(out, vec[i][1], l));
		ck_assert_int_eq((unsigned char)out[l], 0xa5);
		if (l) {
			memset(out, 0xa5, sizeof(out));
			ck_assert_int_eq(json_base64_encode(vec[i][0], strlen(vec[i][0]), out, l - 1, &n), -ENOSPC);
			ck_assert_uint_eq(n, 0);
			ck_assert_int_eq((unsigned char)out[0], 0xa5);
		}
	}
	ck_assert_int_eq(json_base64_encode("x", SIZE_MAX, out, sizeof(out), &n), -ENOSPC);
	ck_assert_int_eq(json_base64_encode("x", SIZE_MAX / 4 * 3 + 3, out, sizeof(out), &n), -ENOSPC);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("json");
	TCase *tc = tcase_create("json");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, structure);
	tcase_add_test(tc, length_delimited);
	tcase_add_test(tc, syntax_errors);
	tcase_add_test(tc, numbers);
	tcase_add_test(tc, bools_and_null);
	tcase_add_test(tc, escapes);
	tcase_add_test(tc, utf8);
	tcase_add_test(tc, get_string_limits);
	tcase_add_test(tc, duplicate_keys);
	tcase_add_test(tc, keys_made_to_collide_cost_no_more_than_the_document);
	tcase_add_test(tc, member_limit);
	tcase_add_test(tc, depth_limit);
	tcase_add_test(tc, token_limit);
	tcase_add_test(tc, error_messages);
	tcase_add_test(tc, writer_output);
	tcase_add_test(tc, writer_every_capacity);
	tcase_add_test(tc, writer_misuse);
	tcase_add_test(tc, writer_strings);
	tcase_add_test(tc, base64);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
