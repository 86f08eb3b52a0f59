/* The values of options: numbers, and the --rootfs/--drive and --net SPECs
 * (comma-separated words). */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/cli/cli.h"

int cli_parse_u32(const char *flag, const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (end != s && !*end && s[0] != '-' && (errno == ERANGE || v > UINT32_MAX)) {
		fprintf(stderr, "tinyvmm: %s: '%s' is too large (at most %u)\n", flag, s, UINT32_MAX);
		return -1;
	}
	if (errno || end == s || *end || s[0] == '-') {
		fprintf(stderr, "tinyvmm: %s: '%s' is not a number\n", flag, s);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

int cli_parse_size(const char *flag, const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = s[0] >= '0' && s[0] <= '9' ? strtoull(s, &end, 10) : 0;
	if (s[0] < '0' || s[0] > '9' || errno)
		goto bad;
	switch (*end) {
	case 'K':
	case 'k':
		shift = 10;
		end++;
		break;
	case 'M':
	case 'm':
		shift = 20;
		end++;
		break;
	case 'G':
	case 'g':
		shift = 30;
		end++;
		break;
	}
	if (*end || v > (UINT64_MAX >> shift))
		goto bad;
	*out = (uint64_t)v << shift;
	return 0;
bad:
	fprintf(stderr, "tinyvmm: %s: '%s' is not a number (K, M or G may follow: 2^10, 2^20, 2^30)\n", flag, s);
	return -1;
}

/* A rate limit word's value: a positive count per second, kept as a bucket
 * of that size refilled each second (so at most a second's worth comes as
 * a burst). */
static int parse_rate(const char *flag, const char *s, struct tvm_bucket *b)
{
	uint64_t v;

	if (cli_parse_size(flag, s, &v))
		return -1;
	if (!v) {
		fprintf(stderr, "tinyvmm: %s: the rate must be positive (leave it out for none)\n", flag);
		return -1;
	}
	*b = (struct tvm_bucket){ .size = v, .refill_ms = 1000 };
	return 0;
}

/* SPEC: [path=]FILE[,ro][,rw][,cow][,overlay=FILE][,overlay-limit=MIB][,id=SERIAL][,bw=BYTES/S][,iops=N] */
int cli_parse_drive(const char *flag, const char *spec, struct tvm_drive *d, int cow)
{
	char *copy = strdup(spec), *save = NULL, *tok;
	const char *mode = NULL;
	char what[64];
	uint32_t mib;

	if (!copy) {
		fprintf(stderr, "tinyvmm: %s: out of memory\n", flag);
		return -1;
	}
	*d = (struct tvm_drive){ .cow = cow };
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		bool ro = !strcmp(tok, "ro"), rw = !strcmp(tok, "rw"), cw = !strcmp(tok, "cow");

		if ((ro || rw || cw) && mode && strcmp(mode, tok)) {
			/* the last one used to win: ",cow,rw" wrote the image in place */
			fprintf(stderr, "tinyvmm: %s %s: %s and %s: one mode only (ro, rw or cow)\n", flag, spec, mode,
				tok);
			return -1;
		}
		if (ro || rw || cw)
			mode = ro ? "ro" : rw ? "rw" : "cow";
		if (!strncmp(tok, "path=", 5))
			d->path = tok + 5;
		else if (ro)
			d->read_only = 1, d->cow = 0;
		else if (rw)
			d->read_only = 0, d->cow = 0;
		else if (cw)
			d->cow = 1, d->read_only = 0;
		else if (!strncmp(tok, "overlay=", 8))
			d->overlay_path = tok + 8;
		else if (!strncmp(tok, "overlay-limit=", 14)) {
			if (cli_parse_u32(flag, tok + 14, &mib))
				return -1;
			d->overlay_limit = (uint64_t)mib << 20;
		} else if (!strncmp(tok, "id=", 3))
			d->id = tok + 3;
		else if (!strncmp(tok, "bw=", 3) || !strncmp(tok, "iops=", 5)) {
			bool bw = tok[0] == 'b';

			snprintf(what, sizeof(what), "%s %s", flag, bw ? "bw" : "iops");
			if (parse_rate(what, strchr(tok, '=') + 1, bw ? &d->limit.bytes : &d->limit.ops))
				return -1;
		} else if (!d->path && !strchr(tok, '='))
			d->path = tok;
		else {
			fprintf(stderr, "tinyvmm: %s %s: unknown option '%s'\n", flag, spec, tok);
			return -1;
		}
	}
	if (!d->path || !*d->path) {
		fprintf(stderr, "tinyvmm: %s %s: no image path\n", flag, spec);
		return -1;
	}
	if (d->overlay_path && !d->cow) {
		fprintf(stderr, "tinyvmm: %s %s: overlay= needs copy-on-write mode\n", flag, spec);
		return -1;
	}
	return 0;
}

/* The --net SPEC's rate words: rx-bw=, tx-bw= (bytes/s), rx-pps=,
 * tx-pps= (frames/s). 1: tok is one of them and was parsed, 0: it is
 * none of them, -1: bad value. */
static int net_rate(const char *tok, struct tvm_net *n)
{
	static const struct {
		const char *word;
		size_t off;
	} words[] = {
		{ "rx-bw=", offsetof(struct tvm_net, rx.bytes) },
		{ "tx-bw=", offsetof(struct tvm_net, tx.bytes) },
		{ "rx-pps=", offsetof(struct tvm_net, rx.ops) },
		{ "tx-pps=", offsetof(struct tvm_net, tx.ops) },
	};
	char flag[32];

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		size_t len = strlen(words[i].word);

		if (strncmp(tok, words[i].word, len))
			continue;
		snprintf(flag, sizeof(flag), "--net %.*s", (int)len - 1, words[i].word);
		return parse_rate(flag, tok + len, (struct tvm_bucket *)((char *)n + words[i].off)) ? -1 : 1;
	}
	return 0;
}

/* SPEC: [tap=]NAME|auto[,mac=MAC][,mtu=BYTES][,rx-bw=BYTES/S][,tx-bw=BYTES/S][,rx-pps=N][,tx-pps=N].
 * A bare word is the TAP's name; "auto" (or no name) has tinyvmm create
 * one. */
int cli_parse_net(const char *spec, struct tvm_net *n)
{
	char *copy = strdup(spec), *save = NULL, *tok;
	const char *name = NULL;
	int rate;

	if (!copy) {
		fprintf(stderr, "tinyvmm: --net: out of memory\n");
		return -1;
	}
	n->enabled = 1;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strncmp(tok, "tap=", 4) && !name)
			name = tok + 4;
		else if (!strncmp(tok, "mac=", 4))
			n->mac = tok + 4;
		else if (!strncmp(tok, "mtu=", 4)) {
			if (cli_parse_u32("--net mtu", tok + 4, &n->mtu))
				return -1;
		} else if ((rate = net_rate(tok, n)) != 0) {
			if (rate < 0)
				return -1;
		} else if (!name && !strchr(tok, '='))
			name = tok;
		else {
			fprintf(stderr,
				"tinyvmm: --net %s: unknown option '%s' (tap=, mac=, mtu=, rx-bw=, tx-bw=, rx-pps=, "
				"tx-pps=)\n",
				spec, tok);
			return -1;
		}
	}
	if (name && !*name) {
		fprintf(stderr, "tinyvmm: --net %s: empty TAP name\n", spec);
		return -1;
	}
	n->tap = name && strcmp(name, "auto") ? name : NULL;
	return 0;
}
