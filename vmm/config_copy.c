#include "vmm/config_copy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Every string field of a config, as pointers to the pointers. */
static unsigned fields(struct tvm_config *c, const char ***out)
{
	unsigned n = 0;

	out[n++] = &c->kernel_path;
	out[n++] = &c->initrd_path;
	out[n++] = &c->cmdline;
	out[n++] = &c->cmdline_append;
	out[n++] = &c->vsock_uds;
	for (unsigned i = 0; i < TVM_MAX_DRIVES; i++) {
		out[n++] = &c->drives[i].path;
		out[n++] = &c->drives[i].id;
		out[n++] = &c->drives[i].overlay_path;
	}
	out[n++] = &c->net.tap;
	out[n++] = &c->net.mac;
	out[n++] = &c->net.guest_ip;
	out[n++] = &c->net.guest_gw;
	for (unsigned i = 0; i < TVM_MAX_NET_RULES; i++)
		out[n++] = &c->net.allow[i];
	for (unsigned i = 0; i < TVM_MAX_NET_DNS; i++)
		out[n++] = &c->net.dns[i];
	out[n++] = &c->cgroup.parent;
	out[n++] = &c->cgroup.cpuset;
	return n;
}

int config_copy(struct tvm_config *dst, const struct tvm_config *src, char **arena)
{
	const char **f[5 + 3 * TVM_MAX_DRIVES + 4 + TVM_MAX_NET_RULES + TVM_MAX_NET_DNS + 2];
	unsigned n;
	size_t total = 1;
	char *p;

	*dst = *src;
	n = fields(dst, f);
	for (unsigned i = 0; i < n; i++)
		if (*f[i])
			total += strlen(*f[i]) + 1;
	p = *arena = malloc(total);
	if (!p)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		size_t len;

		if (!*f[i])
			continue;
		len = strlen(*f[i]) + 1;
		memcpy(p, *f[i], len);
		*f[i] = p;
		p += len;
	}
	return 0;
}
