/* libFuzzer target for the privileged helper's request check
 * (vmm/serve/serve_priv.c, compiled in: it is not part of the library):
 * the bytes a daemon taken over by a client could send it. Byte 0: how
 * many files came with the request (0-3); the rest is the request. Whatever
 * the bytes: no crash, no read past them, and an accepted request holds
 * what the helper relies on, checked again here independently: a spawn is
 * cfg.exe's `run` with one file, every argument inside the request, its
 * paths a sandbox's under the state dir and --jail among them, a
 * TAP request names a tvs TAP and (up) a /30's host end inside net_range,
 * and nothing else carries a file or a body. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/serve/serve_priv.c"

#define CHECK(x)                 \
	do {                     \
		if (!(x))        \
			abort(); \
	} while (0)

/* The helper's work is not what is fuzzed here. */
int net_tap_up(const char *name, uint32_t host, char *err, size_t cap)
{
	(void)name, (void)host, (void)err, (void)cap;
	abort();
}

int net_tap_down(const char *name)
{
	(void)name;
	abort();
}

int net_host_addrs(uint32_t *out, size_t cap)
{
	(void)out, (void)cap;
	abort();
}

static const struct priv_limits lim = { .exe = "/usr/local/bin/tinyvmm",
					.state_dir = "/var/lib/tinyvmm/serve",
					.cgroup_parent = "tinyvmm",
					.jail = true,
					.net_base = 0x0ad30000,
					.net_prefix = 16 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct priv_msg m;
	char err[200];
	unsigned nfds;
	char *buf;
	int r;

	if (size < 1)
		return 0;
	nfds = data[0] & 3;
	/* a copy of exactly the request: ASan sees any read past it */
	buf = malloc(size - 1 ? size - 1 : 1);
	CHECK(buf);
	memcpy(buf, data + 1, size - 1);
	err[0] = 0;
	r = priv_parse(buf, size - 1, nfds, &lim, &m, err, sizeof(err));
	CHECK(r == 0 || r == -EINVAL || r == -EPERM);
	CHECK(r == 0 || (err[0] && memchr(err, 0, sizeof(err))));
	if (r == 0) {
		const struct priv_head *h = (const void *)buf;

		CHECK(size - 1 >= sizeof(*h) && m.op == h->op);
		switch (m.op) {
		case PRIV_SPAWN:
			CHECK(nfds == 1 && m.argc >= 2 && m.argc <= PRIV_MAX_ARGS && !m.argv[m.argc]);
			for (uint32_t i = 0; i < m.argc; i++) {
				CHECK(m.argv[i] >= buf + sizeof(*h) && m.argv[i] < buf + size - 1);
				CHECK(memchr(m.argv[i], 0, (size_t)(buf + size - 1 - m.argv[i])));
			}
			CHECK(!strcmp(m.argv[0], lim.exe) && !strcmp(m.argv[1], "run"));
			/* every path one under the state dir, the jail on */
			for (uint32_t i = 2; i + 1 < m.argc; i++) {
				if (!strcmp(m.argv[i], "--vsock-uds") || !strcmp(m.argv[i], "--pause-to") ||
				    !strcmp(m.argv[i], "--snapshot"))
					CHECK(!strncmp(m.argv[i + 1], "/var/lib/tinyvmm/serve/sandboxes/sbx_", 37) &&
					      !strstr(m.argv[i + 1], "/.."));
				CHECK(strcmp(m.argv[i], "--no-seccomp") && strcmp(m.argv[i], "--put") &&
				      strcmp(m.argv[i], "--kernel") && strcmp(m.argv[i], "--drive"));
			}
			bool jailed = false;
			for (uint32_t i = 2; i < m.argc; i++)
				jailed |= !strcmp(m.argv[i], "--jail");
			CHECK(jailed);
			bool cow_only = false;
			for (uint32_t i = 2; i < m.argc; i++)
				cow_only |= !strcmp(m.argv[i], "--no-inplace-drives");
			CHECK(cow_only);
			break;
		case PRIV_TAP_UP:
			CHECK(m.host >> 16 == 0x0ad3 && (m.host & 3) == 1);
			/* fall through */
		case PRIV_TAP_DOWN:
			CHECK(!memcmp(m.name, "tvs", 3) && strlen(m.name) == 11);
			for (int i = 3; i < 11; i++)
				CHECK(strchr("0123456789abcdef", m.name[i]));
			/* fall through */
		case PRIV_ADDRS:
		case PRIV_HOST:
		case PRIV_SOCKET_BOUND:
		case PRIV_SOCKET_GONE: CHECK(nfds == 0 && size - 1 == sizeof(*h)); break;
		default: abort();
		}
	}
	free(buf);
	return 0;
}
