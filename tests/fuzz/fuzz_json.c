/* libFuzzer target for the serve daemon's JSON reader and writer
 * (vmm/serve/json.c, compiled in: it is not part of the library). The
 * input is the document. Whatever the bytes: no crash, no read past the
 * input; every accessor works on every token; and a document the reader
 * accepts, written again by the writer token by token and read again, has
 * the same token structure (types, sizes, decoded strings, number text).
 * The writer is also run with a capacity short of the output, which must
 * fail cleanly without writing past it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/serve/json.c"

#define CHECK(x)                 \
	do {                     \
		if (!(x))        \
			abort(); \
	} while (0)

#define NTOK 4096
static struct json_tok t1[NTOK], t2[NTOK];

/* Write token i of d (and its subtree) with w; scratch holds a string. */
static void emit(const struct json_doc *d, int i, struct json_w *w, char *scratch, size_t cap)
{
	const struct json_tok *t = &d->tok[i];
	size_t len;

	switch (t->type) {
	case JSON_NULL: json_w_null(w); break;
	case JSON_FALSE: json_w_bool(w, false); break;
	case JSON_TRUE: json_w_bool(w, true); break;
	case JSON_NUMBER: json_w_number(w, d->buf + t->off, t->len); break;
	case JSON_STRING:
		CHECK(json_get_bytes(d, i, scratch, cap, &len) == 0);
		json_w_string(w, scratch, len);
		break;
	case JSON_ARRAY:
		json_w_arr_begin(w);
		for (int k = json_first(d, i); k >= 0; k = json_next(d, i, k))
			emit(d, k, w, scratch, cap);
		json_w_arr_end(w);
		break;
	case JSON_OBJECT:
		json_w_obj_begin(w);
		for (int k = json_first(d, i); k >= 0; k = json_next(d, i, k)) {
			CHECK(json_get_bytes(d, k, scratch, cap, &len) == 0);
			json_w_key(w, scratch, len);
			emit(d, k + 1, w, scratch, cap);
		}
		json_w_obj_end(w);
		break;
	default: CHECK(0);
	}
}

/* Every accessor on every token: errors only, never a crash. */
static void poke(const struct json_doc *d, char *scratch, size_t cap)
{
	for (uint32_t i = 0; i < d->ntok; i++) {
		const struct json_tok *t = &d->tok[i];
		int64_t v;
		double x;
		bool b;
		size_t len;
		int n = 0;

		CHECK(t->next > i && t->next <= d->ntok && t->off + t->len <= d->len);
		int ri = json_get_int64(d, (int)i, &v);
		CHECK(ri == 0 || ri == -EINVAL || ri == -ERANGE);
		CHECK((ri == -EINVAL) == (t->type != JSON_NUMBER || !t->integer));
		int rd = json_get_double(d, (int)i, &x);
		CHECK(rd == 0 || rd == -EINVAL || rd == -ERANGE);
		CHECK((json_get_bool(d, (int)i, &b) == 0) == (t->type == JSON_TRUE || t->type == JSON_FALSE));
		CHECK(json_is_null(d, (int)i) == (t->type == JSON_NULL));
		int rs = json_get_string(d, (int)i, scratch, cap, &len);
		CHECK(rs == 0 || rs == -EINVAL);
		if (rs == 0)
			CHECK(strlen(scratch) == len && json_str_eq(d, (int)i, scratch, len));
		json_find(d, (int)i, "id");
		for (int k = json_first(d, (int)i); k >= 0; k = json_next(d, (int)i, k))
			n++;
		CHECK((uint32_t)n == ((t->type == JSON_ARRAY || t->type == JSON_OBJECT) ? t->size : 0));
	}
}

static void same_structure(const struct json_doc *a, const struct json_doc *b, char *s1, char *s2, size_t cap)
{
	CHECK(a->ntok == b->ntok);
	for (uint32_t i = 0; i < a->ntok; i++) {
		const struct json_tok *x = &a->tok[i], *y = &b->tok[i];
		size_t l1, l2;

		CHECK(x->type == y->type && x->size == y->size && x->next == y->next && x->integer == y->integer);
		if (x->type == JSON_NUMBER)
			CHECK(x->len == y->len && !memcmp(a->buf + x->off, b->buf + y->off, x->len));
		if (x->type == JSON_STRING) {
			CHECK(json_get_bytes(a, (int)i, s1, cap, &l1) == 0 &&
			      json_get_bytes(b, (int)i, s2, cap, &l2) == 0);
			CHECK(l1 == l2 && !memcmp(s1, s2, l1));
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_doc d, d2;
	struct json_err e;
	struct json_w w;
	char *doc, *out, *s1, *s2;
	size_t cap, olen, len;
	int r;

	doc = malloc(size ? size : 1); /* exact size: ASan catches overreads */
	memcpy(doc, data, size);
	r = json_parse(&d, doc, size, t1, NTOK, 0, &e);
	CHECK(r == 0 || r == -EINVAL || r == -E2BIG);
	if (r) {
		CHECK(e.off <= size && e.msg[0]);
		free(doc);
		return 0;
	}
	/* Decoded strings are never longer than their escaped text. */
	s1 = malloc(size + 1);
	s2 = malloc(size + 1);
	poke(&d, s1, size + 1);

	/* Escaping grows a byte at most 6 times (a control character as
	 * \u00XX), and only what the input had escaped already. */
	cap = 6 * size + 16;
	out = malloc(cap);
	json_w_init(&w, out, cap);
	emit(&d, 0, &w, s1, size + 1);
	CHECK(json_w_finish(&w, &olen) == 0);
	CHECK(json_parse(&d2, out, olen, t2, NTOK, 0, &e) == 0);
	same_structure(&d, &d2, s1, s2, size + 1);

	/* The same with a capacity short of it: a clean failure, a prefix,
	 * nothing written past the capacity. */
	if (olen) {
		size_t short_cap = (size_t)data[0] % olen;
		char *o2 = malloc(olen);

		memset(o2, 0x5a, olen);
		json_w_init(&w, o2, short_cap);
		emit(&d, 0, &w, s1, size + 1);
		CHECK(json_w_finish(&w, &len) == -ENOBUFS && len <= short_cap && !memcmp(o2, out, len));
		for (size_t i = short_cap; i < olen; i++)
			CHECK(o2[i] == 0x5a);
		free(o2);
	}

	/* Small limits refuse or agree. */
	r = json_parse(&d2, doc, size, t2, (uint32_t)(size % 9), 2, &e);
	CHECK(r == -E2BIG || (r == 0 && d2.ntok == d.ntok));
	free(out);
	free(s1);
	free(s2);
	free(doc);
	return 0;
}
