/* JSON for the `tinyvmm serve` daemon (RFC 8259): a strict reader that
 * tokenizes a whole document into a caller's fixed token array (no
 * allocation), accessors over those tokens, and a writer into a caller's
 * fixed buffer. Documents come from clients we do not trust: depth and
 * token count are bounded, every error names the byte offset and what was
 * expected, nothing aborts.
 */
#ifndef TVM_SERVE_JSON_H
#define TVM_SERVE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum json_type {
	JSON_NULL,
	JSON_FALSE,
	JSON_TRUE,
	JSON_NUMBER,
	JSON_STRING,
	JSON_ARRAY,
	JSON_OBJECT,
};

/* One value (or object key, a JSON_STRING) of a parsed document, in
 * document order (a container before its children). off/len: its bytes in
 * the document; for a string, the text between the quotes, still escaped.
 * size: elements of an array, members of an object. next: the index of the
 * first token after this one's subtree. An object's children are key,
 * value, key, value, ... */
struct json_tok {
	uint8_t type; /* enum json_type */
	bool escaped; /* string: has a backslash */
	bool integer; /* number: no fraction, no exponent */
	uint32_t size;
	uint32_t next;
	uint32_t hash; /* object key: of its decoded text (the duplicate check's first look) */
	size_t off, len;
};

/* An error: the byte offset and one line naming what was expected. */
struct json_err {
	size_t off;
	char msg[112];
};

/* A parsed document: the caller's buffer (not copied, must outlive the
 * tokens) and token array. */
struct json_doc {
	const char *buf;
	size_t len;
	struct json_tok *tok;
	uint32_t ntok;
};

#define JSON_DEPTH_DEFAULT 32
#define JSON_DEPTH_MAX 1024
/* Members of one object: the duplicate-key check is quadratic in them. */
#define JSON_MEMBERS_MAX 256

/* Parse the whole of buf[0..len) (not NUL-terminated) as one JSON text
 * (RFC 8259 §2: any value, surrounded by optional whitespace) into
 * tok[0..max_tok). Strict: no trailing commas, comments, leading zeros,
 * NaN or Infinity, no byte order mark, no control characters in strings,
 * only the escapes of §7 with \u surrogates paired, only valid UTF-8 (no
 * overlong forms, surrogates or code points past U+10FFFF), no key twice in
 * one object (compared after unescaping). max_depth: nesting of arrays
 * and objects (0: JSON_DEPTH_DEFAULT; more than JSON_DEPTH_MAX: -EINVAL).
 * Returns 0 and fills doc (tok[0] is the root); -EINVAL for invalid JSON
 * or -E2BIG when max_tok tokens or max_depth is not enough, an object
 * has more than JSON_MEMBERS_MAX members, or keys made to share a hash
 * would cost the duplicate check more than the document's length in
 * decoding, with *err (may be NULL) saying where and why. Cost: the parser
 * recurses about max_depth times (keep the default on small thread
 * stacks); the duplicate check compares a hash per pair of keys of one
 * object (hence their limit) and decodes a pair only when hashes match. */
int json_parse(struct json_doc *doc, const char *buf, size_t len, struct json_tok *tok, uint32_t max_tok,
	       unsigned max_depth, struct json_err *err);

/* The value of key in the object at token obj (keys compared after
 * unescaping), or -1: not an object, or no such key. */
int json_find(const struct json_doc *d, int obj, const char *key);

/* Iterate the children of an array (values) or an object (keys; the value
 * is key + 1). json_first: the first child or -1 if none (or not a
 * container). json_next: the child after child i of container c, or -1. */
int json_first(const struct json_doc *d, int c);
int json_next(const struct json_doc *d, int c, int i);

/* Decode the string at token i into out (cap bytes) with a NUL after it;
 * *len (may be NULL) gets its length without the NUL. json_get_string
 * refuses a string with U+0000 in it (-EINVAL: a C string could not hold
 * it); json_get_bytes allows it. -EINVAL: not a string; -ENOSPC: it and
 * its NUL do not fit (out then holds ""). */
int json_get_string(const struct json_doc *d, int i, char *out, size_t cap, size_t *len);
int json_get_bytes(const struct json_doc *d, int i, char *out, size_t cap, size_t *len);

/* The number at token i as an int64_t: -EINVAL if it is not a number or
 * has a fraction or an exponent ("1.0" and "1e2" are refused for integer
 * fields); -ERANGE outside [INT64_MIN, INT64_MAX]. "-0" is 0. */
int json_get_int64(const struct json_doc *d, int i, int64_t *v);

/* The number at token i as the nearest double (strtod, so LC_NUMERIC must
 * be "C", which it is unless the program calls setlocale): -EINVAL if not
 * a number; -ERANGE if it overflows to infinity (1e999) or has more than
 * 512 characters. An underflow gives 0 or a subnormal, not an error. */
int json_get_double(const struct json_doc *d, int i, double *v);

/* true/false at token i: 0, or -EINVAL if it is not a boolean. */
int json_get_bool(const struct json_doc *d, int i, bool *v);

/* Whether token i is null (false for i < 0). */
bool json_is_null(const struct json_doc *d, int i);

/* Does the string token i equal s (after unescaping)? */
bool json_str_eq(const struct json_doc *d, int i, const char *s, size_t n);

/* The writer: appends JSON text to buf (cap bytes, owned by the caller)
 * and never writes at or past buf + cap. The first error sticks in err
 * and makes every later call a no-op: -ENOBUFS when something did not fit
 * (what fitted before it stays), -EINVAL for misuse (a value where a key
 * is due, a close that does not match, a NaN, too deep). Commas and colons
 * are written for the caller. No NUL is written: the text is buf[0..len). */
#define JSON_W_DEPTH 64
struct json_w {
	char *buf;
	size_t cap, len;
	int err;
	unsigned depth;
	bool need_comma;              /* a value was written at this level */
	bool want_value;              /* a key was written: its value is due */
	uint8_t in_obj[JSON_W_DEPTH]; /* 1: object, 0: array, per open level */
};

void json_w_init(struct json_w *w, char *buf, size_t cap);
void json_w_obj_begin(struct json_w *w);
void json_w_obj_end(struct json_w *w);
void json_w_arr_begin(struct json_w *w);
void json_w_arr_end(struct json_w *w);

/* A key of the open object (n bytes, escaped like a string). */
void json_w_key(struct json_w *w, const char *s, size_t n);

/* A string value of n bytes, escaped (RFC 8259 §7): '"', '\\' and the
 * control characters (\b \f \n \r \t, others as \u00XX). Invalid UTF-8 is
 * replaced byte by byte with U+FFFD: a writer of guest or user text should
 * not fail on it, and what comes out is always valid JSON. Binary data
 * belongs in json_w_base64. */
void json_w_string(struct json_w *w, const char *s, size_t n);
void json_w_int(struct json_w *w, int64_t v);
void json_w_uint(struct json_w *w, uint64_t v);

/* A finite double as "%.17g" (reads back as the same double); NaN and
 * infinities: -EINVAL (JSON has no such numbers). */
void json_w_double(struct json_w *w, double v);

/* A number already in JSON syntax (n bytes, checked: -EINVAL if not). */
void json_w_number(struct json_w *w, const char *s, size_t n);
void json_w_bool(struct json_w *w, bool v);
void json_w_null(struct json_w *w);

/* n bytes as a base64 string value (RFC 4648 §4, padded). */
void json_w_base64(struct json_w *w, const void *data, size_t n);

/* A member of the open object: key (a C string) and its value; a NULL
 * string is written as null. */
void json_w_kstr(struct json_w *w, const char *key, const char *s);
void json_w_kint(struct json_w *w, const char *key, int64_t v);
void json_w_kuint(struct json_w *w, const char *key, uint64_t v);
void json_w_kbool(struct json_w *w, const char *key, bool v);
void json_w_knull(struct json_w *w, const char *key);

/* The text's length, or the sticky error; -EINVAL too if a container is
 * still open, a key has no value or nothing was written. */
int json_w_finish(struct json_w *w, size_t *len);

/* Encode n bytes at data as base64 (RFC 4648 §4, with padding) into out
 * (cap bytes), no NUL; *out_len gets the length. Returns 0, or -ENOSPC
 * (nothing written) if it needs more than cap bytes or overflows size_t. */
int json_base64_encode(const void *data, size_t n, char *out, size_t cap, size_t *out_len);

#endif
