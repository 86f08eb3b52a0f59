/* The values of options: numbers, and the --rootfs/--drive and --net SPECs
 * (comma-separated words). */
#include <errno.h>
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
	if (errno || end == s || *end || v > UINT32_MAX || s[0] == '-') {
		fprintf(stderr, "tinyvmm: %s: '%s' is not a number\n", flag, s);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

/* SPEC: [path=]FILE[,ro][,rw][,cow][,overlay=FILE][,overlay-limit=MIB][,id=SERIAL] */
int cli_parse_drive(const char *flag, const char *spec, struct tvm_drive *d, int cow)
{
	char *copy = strdup(spec), *save = NULL, *tok;
	uint32_t mib;

	if (!copy) {
		fprintf(stderr, "tinyvmm: %s: out of memory\n", flag);
		return -1;
	}
	*d = (struct tvm_drive){ .cow = cow };
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strncmp(tok, "path=", 5))
			d->path = tok + 5;
		else if (!strcmp(tok, "ro"))
			d->read_only = 1, d->cow = 0;
		else if (!strcmp(tok, "rw"))
			d->read_only = 0, d->cow = 0;
		else if (!strcmp(tok, "cow"))
			d->cow = 1, d->read_only = 0;
		else if (!strncmp(tok, "overlay=", 8))
			d->overlay_path = tok + 8;
		else if (!strncmp(tok, "overlay-limit=", 14)) {
			if (cli_parse_u32(flag, tok + 14, &mib))
				return -1;
			d->overlay_limit = (uint64_t)mib << 20;
		} else if (!strncmp(tok, "id=", 3))
			d->id = tok + 3;
		else if (!d->path && !strchr(tok, '='))
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

/* SPEC: [tap=]NAME|auto[,mac=MAC][,mtu=BYTES]. A bare word is the TAP's
 * name; "auto" (or no name) has tinyvmm create one. */
int cli_parse_net(const char *spec, struct tvm_net *n)
{
	char *copy = strdup(spec), *save = NULL, *tok;
	const char *name = NULL;

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
		} else if (!name && !strchr(tok, '='))
			name = tok;
		else {
			fprintf(stderr, "tinyvmm: --net %s: unknown option '%s' (tap=, mac=, mtu=)\n", spec, tok);
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
