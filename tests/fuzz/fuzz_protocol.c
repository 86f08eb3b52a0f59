/* libFuzzer target for the host <-> agent codec (guest/protocol.c).
 *
 * Input byte 0 picks the mode: even, the rest is a byte stream cut into
 * frames by the incremental decoder, fed in pieces whose sizes come from
 * byte 1; odd, byte 1 is a message type and the rest one payload for
 * tvp_parse() alone. Beyond "no crash", checks the codec's guarantees: a
 * message that parses re-encodes to exactly the same frame, its string
 * lists copy out with the counts it claims, and the decoder never holds
 * more than one frame plus read-ahead. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "guest/protocol.h"

static void check_message(const struct tvp_frame *f)
{
	struct tvp_msg m;
	char err[40]; /* small on purpose: messages must truncate cleanly */
	size_t len;
	uint8_t *buf;

	if (tvp_parse(f, &m, err, sizeof(err)) != 0) {
		if (!memchr(err, 0, sizeof(err)))
			abort();
		return;
	}
	if (tvp_encode(&m, NULL, 0, &len) != TVP_E_NOSPACE || len != TVP_HDR_SIZE + (size_t)f->len)
		abort();
	buf = malloc(len);
	if (!buf || tvp_encode(&m, buf, len, &len) != 0 || buf[2] != f->type || buf[3] != f->flags ||
	    memcmp(buf + TVP_HDR_SIZE, f->payload, f->len) != 0)
		abort();
	free(buf);
	if (m.type == TVP_EXEC) {
		const struct tvp_strvec *v[2] = { &m.exec.argv, &m.exec.env };

		for (int i = 0; i < 2; i++) {
			char **s = tvp_strvec_dup(v[i]);
			uint32_t n = 0;

			if (!s)
				abort();
			while (s[n])
				n++;
			if (n != v[i]->count)
				abort();
			free(s);
		}
	}
}

static void fuzz_stream(const uint8_t *data, size_t size, uint8_t pattern)
{
	struct tvp_decoder d;
	struct tvp_frame f;
	size_t off = 0, step = (size_t)pattern + 1;
	int rc = 0;

	tvp_decoder_init(&d, pattern & 0x80 ? 4096 : 0);
	while (off < size && rc >= 0) {
		size_t want = step < size - off ? step : size - off, avail;

		if (off & 1) {
			off += tvp_decoder_feed(&d, data + off, want);
		} else {
			uint8_t *p = tvp_decoder_space(&d, &avail);

			if (p) {
				want = want < avail ? want : avail;
				memcpy(p, data + off, want);
				tvp_decoder_commit(&d, want);
				off += want;
			}
		}
		while ((rc = tvp_decoder_next(&d, &f)) == 1)
			check_message(&f);
		if (d.cap > TVP_HDR_SIZE + (size_t)TVP_MAX_PAYLOAD && d.cap > (64u << 10))
			abort();
		if (rc < 0 && !tvp_decoder_error(&d)[0])
			abort();
		step = step * 5 % 251 + 1;
	}
	tvp_decoder_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tvp_frame f;

	if (size < 2)
		return 0;
	if (data[0] & 1) {
		/* Copied so that ASan sees reads past the payload's end. */
		uint8_t *payload = malloc(size - 2 ? size - 2 : 1);

		memcpy(payload, data + 2, size - 2);
		f = (struct tvp_frame){ data[1], data[0] >> 1 & 0x1f, 1, (uint32_t)(size - 2), payload };
		check_message(&f);
		free(payload);
	} else {
		fuzz_stream(data + 2, size - 2, data[1]);
	}
	return 0;
}
